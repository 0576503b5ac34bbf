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

const std::vector<std::pair<std::string, Seq2SeqKind>>& seq2seq_kinds() {
  static const std::vector<std::pair<std::string, Seq2SeqKind>> kinds = {{"transformer", Seq2SeqKind::transformer},
                                                                         {"rnn", Seq2SeqKind::rnn}};
  return kinds;
}

const std::string& seq2seq_kind_word(Seq2SeqKind kind) {
  for (const auto& [word, k] : seq2seq_kinds())
    if (k == kind) return word;
  throw std::logic_error("seq2seq_kind_word: a kind with no word");
}

Seq2SeqConfig Seq2SeqConfig::choose(Seq2SeqKind kind, const TransformerConfig& transformer,
                                    const RNNSeq2SeqConfig& rnn) {
  if (kind == Seq2SeqKind::rnn) return rnn;
  return transformer;
}

Seq2SeqKind Seq2SeqConfig::kind() const { return rnn() ? Seq2SeqKind::rnn : Seq2SeqKind::transformer; }

Metadata Seq2SeqConfig::to_metadata() const {
  return std::visit([](const auto& c) { return c.to_metadata(); }, family);
}

Seq2SeqConfig Seq2SeqConfig::from_metadata(const Metadata& m, const std::string& path) {
  auto it = m.find("cfg.model");
  if (it == m.end() || it->second == "transformer") return TransformerConfig::from_metadata(m, path);
  if (it->second == "rnn") return RNNSeq2SeqConfig::from_metadata(m, path);
  throw FormatError("checkpoint " + path + ": cfg.model '" + it->second + "': expected transformer or rnn");
}

double Seq2SeqConfig::parameter_count() const {
  return std::visit([](const auto& c) { return c.parameter_count(); }, family);
}

int64_t Seq2SeqConfig::src_vocab() const {
  return std::visit([](const auto& c) { return c.src_vocab; }, family);
}

int64_t Seq2SeqConfig::tgt_vocab() const {
  return std::visit([](const auto& c) { return c.tgt_vocab; }, family);
}

int64_t Seq2SeqConfig::max_positions() const {
  const TransformerConfig* t = transformer();
  return t ? t->max_len : ModelLimits::max_len;
}

void Seq2SeqConfig::set_vocab(int64_t vocab, int64_t pad_id) {
  std::visit([vocab](auto& c) { c.src_vocab = c.tgt_vocab = vocab; }, family);
  set_pad_id(pad_id);
}

void Seq2SeqConfig::set_pad_id(int64_t pad_id) {
  std::visit([pad_id](auto& c) { c.pad_id = pad_id; }, family);
}

void Seq2SeqConfig::validate() const {
  std::visit([](const auto& c) { c.validate(); }, family);
}

std::unique_ptr<Seq2SeqModel> make_seq2seq(const Seq2SeqConfig& c) {
  c.validate();
  if (const RNNSeq2SeqConfig* r = c.rnn()) return std::make_unique<RNNModel>(*r);
  return std::make_unique<TransformerModel>(*c.transformer());
}

}  // namespace xg::models
