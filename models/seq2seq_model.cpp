#include "models/seq2seq_model.h"

#include <fmt/format.h>

#include "autograd/ops.h"
#include "models/attention_map.h"

namespace xg::models {

namespace {

// What both families' adapters forward to their model alike.
template <class M>
class Adapter : public Seq2SeqModel {
 public:
  template <class Config>
  explicit Adapter(const Config& c) : m_(c) {}
  nn::Module& module() override { return m_; }
  Generator& dropout_generator() override { return m_.dropout_generator(); }
  Metadata to_metadata() const override { return m_.config().to_metadata(); }
  double parameter_count() const override { return m_.config().parameter_count(); }
  int64_t src_vocab() const override { return m_.config().src_vocab; }
  Tensor loss(const TrainBatch& b, double smoothing) override { return m_.loss(b.src, b.tgt_in, b.tgt_out, smoothing); }
  std::vector<std::vector<int64_t>> greedy(const Batch& src, int64_t max_len) override {
    return greedy_decode(m_, src, kBos, kEos, max_len);
  }
  std::vector<int64_t> beam(const std::vector<int64_t>& src, int64_t max_len, int64_t beam_size, double alpha) override {
    return beam_search(m_, src, kBos, kEos, max_len, beam_size, alpha);
  }

 protected:
  M m_;
};

class TransformerModel : public Adapter<Transformer> {
 public:
  using Adapter::Adapter;
  int64_t width() const override { return m_.config().d_model; }
  std::string kind() const override { return "transformer"; }
  std::string describe() const override {
    const auto& c = m_.config();
    return fmt::format("Transformer N={} d_model={} heads={} d_ff={} dropout={:g} {}", c.layers, c.d_model, c.heads,
                       c.d_ff, c.dropout, c.pre_norm ? "pre-norm" : "post-norm");
  }
  int64_t max_positions() const override { return m_.config().max_len; }
  std::vector<Tensor> attention_maps(const std::vector<int64_t>& src, const std::vector<int64_t>& out) override {
    return cross_attention(m_, src, out, kBos);
  }
};

class RNNModel : public Adapter<RNNSeq2Seq> {
 public:
  using Adapter::Adapter;
  int64_t width() const override { return 2 * m_.config().hidden; }
  std::string kind() const override { return "rnn"; }
  std::string describe() const override {
    const auto& c = m_.config();
    return fmt::format("RNN seq2seq {} layers={} embed={} hidden={} attention={} dropout={:g}", c.cell, c.layers,
                       c.embed, c.hidden, c.attention, c.dropout);
  }
  int64_t max_positions() const override { return ModelLimits::max_len; }
  std::vector<Tensor> attention_maps(const std::vector<int64_t>& src, const std::vector<int64_t>& out) override {
    NoGradGuard no_grad;
    nn::EvalGuard eval(m_);
    std::vector<int64_t> in{kBos};
    in.insert(in.end(), out.begin(), out.end());
    const int64_t S = static_cast<int64_t>(src.size()), T = static_cast<int64_t>(in.size());
    m_.forward(Batch{src, 1, S}, Batch{in, 1, T});
    return {m_.last_attention()};  // (1,T,S): one layer, one head
  }
};

}  // namespace

Metadata Seq2SeqConfig::to_metadata() const { return kind == "rnn" ? rnn.to_metadata() : transformer.to_metadata(); }

Seq2SeqConfig Seq2SeqConfig::from_metadata(const Metadata& m, const std::string& path) {
  Seq2SeqConfig c;
  auto it = m.find("cfg.model");
  if (it != m.end() && it->second != "transformer" && it->second != "rnn")
    throw FormatError("checkpoint " + path + ": cfg.model '" + it->second + "': expected transformer or rnn");
  if (it != m.end() && it->second == "rnn") {
    c.kind = "rnn";
    c.rnn = RNNSeq2SeqConfig::from_metadata(m, path);
  } else {
    c.transformer = TransformerConfig::from_metadata(m, path);
  }
  return c;
}

double Seq2SeqConfig::parameter_count() const {
  return kind == "rnn" ? rnn.parameter_count() : transformer.parameter_count();
}

int64_t Seq2SeqConfig::src_vocab() const { return kind == "rnn" ? rnn.src_vocab : transformer.src_vocab; }

int64_t Seq2SeqConfig::max_positions() const { return kind == "rnn" ? ModelLimits::max_len : transformer.max_len; }

void Seq2SeqConfig::set_vocab(int64_t vocab, int64_t pad_id) {
  transformer.src_vocab = transformer.tgt_vocab = rnn.src_vocab = rnn.tgt_vocab = vocab;
  transformer.pad_id = rnn.pad_id = pad_id;
}

void Seq2SeqConfig::validate() const {
  if (kind != "transformer" && kind != "rnn")
    throw std::invalid_argument("model kind '" + kind + "': expected transformer or rnn");
  if (kind == "rnn") rnn.validate();
  else transformer.validate();
}

std::unique_ptr<Seq2SeqModel> make_seq2seq(const Seq2SeqConfig& c) {
  c.validate();
  if (c.kind == "rnn") return std::make_unique<RNNModel>(c.rnn);
  return std::make_unique<TransformerModel>(c.transformer);
}

}  // namespace xg::models
