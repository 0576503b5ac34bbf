#include "models/rnn_seq2seq.h"

#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/require.h"
#include "autograd/trace.h"

namespace xg::models {

namespace {

void need(bool ok, const std::string& what) { require(ok, what, "RNNSeq2SeqConfig: "); }

bool luong(const std::string& attention) { return attention != "bahdanau"; }

// A word of `words` under `key`, or FormatError naming the file and the choices.
std::string metadata_word(const Metadata& m, const std::string& key, const std::string& path,
                          const std::vector<std::string>& words) {
  auto it = m.find(key);
  std::string list;
  for (const auto& w : words) list += (list.empty() ? "" : ", ") + w;
  if (it == m.end()) throw FormatError("checkpoint " + path + ": metadata has no '" + key + "'");
  for (const auto& w : words)
    if (it->second == w) return w;
  throw FormatError("checkpoint " + path + ": " + key + " '" + it->second + "': expected one of " + list);
}

}  // namespace

void RNNSeq2SeqConfig::validate() const {
  using L = ModelLimits;
  auto range = [](const char* name, int64_t v, int64_t hi) {
    need(v >= 1 && v <= hi, std::string(name) + " " + std::to_string(v) + ": expected 1.." + std::to_string(hi));
  };
  range("src_vocab", src_vocab, L::vocab);
  range("tgt_vocab", tgt_vocab, L::vocab);
  range("embed", embed, L::d_model);
  range("hidden", hidden, L::d_model);
  range("layers", layers, L::layers);
  need(cell == "lstm" || cell == "gru", "cell '" + cell + "': expected lstm or gru");
  need(attention == "bahdanau" || attention == "dot" || attention == "general" || attention == "concat",
       "attention '" + attention + "': expected bahdanau, dot, general or concat");
  need(dropout >= 0 && dropout < 1, "dropout " + std::to_string(dropout) + ": expected 0 <= p < 1");
  need(pad_id >= 0 && pad_id < src_vocab && pad_id < tgt_vocab,
       "pad_id " + std::to_string(pad_id) + ": expected an id of both vocabularies");
}

double RNNSeq2SeqConfig::parameter_count() const {
  const double E = static_cast<double>(embed), H = static_cast<double>(hidden), Hd = 2 * H,
               G = cell == "lstm" ? 4 : 3, Vs = static_cast<double>(src_vocab), Vt = static_cast<double>(tgt_vocab);
  double n = (Vs + Vt) * E;                                  // embeddings
  for (int64_t k = 0; k < layers; ++k)                        // encoder, both directions
    n += 2 * (G * H * (k == 0 ? E : Hd) + G * H * H + 2 * G * H);
  n += Hd * Hd + Hd;                                          // bridge
  n += G * Hd * (E + Hd) + G * Hd * Hd + 2 * G * Hd;          // decoder cell
  const double additive = 2 * Hd * Hd + 2 * Hd;               // w_q with bias, w_k, v
  if (attention == "bahdanau") return n + additive + 2 * Hd * Vt + Vt;
  n += attention == "general" ? Hd * Hd : attention == "concat" ? additive : 0;
  return n + 2 * Hd * Hd + Hd * Vt + Vt;                      // combine, out
}

Metadata RNNSeq2SeqConfig::to_metadata() const {
  auto str = [](int64_t v) { return std::to_string(v); };
  return {{"cfg.model", "rnn"},          {"cfg.src_vocab", str(src_vocab)}, {"cfg.tgt_vocab", str(tgt_vocab)},
          {"cfg.embed", str(embed)},     {"cfg.hidden", str(hidden)},       {"cfg.layers", str(layers)},
          {"cfg.cell", cell},            {"cfg.attention", attention}};
}

RNNSeq2SeqConfig RNNSeq2SeqConfig::from_metadata(const Metadata& m, const std::string& path) {
  using L = ModelLimits;
  metadata_word(m, "cfg.model", path, {"rnn"});
  RNNSeq2SeqConfig c;
  c.src_vocab = metadata_int(m, "cfg.src_vocab", path, 1, L::vocab);
  c.tgt_vocab = metadata_int(m, "cfg.tgt_vocab", path, 1, L::vocab);
  c.embed = metadata_int(m, "cfg.embed", path, 1, L::d_model);
  c.hidden = metadata_int(m, "cfg.hidden", path, 1, L::d_model);
  c.layers = metadata_int(m, "cfg.layers", path, 1, L::layers);
  c.cell = metadata_word(m, "cfg.cell", path, {"lstm", "gru"});
  c.attention = metadata_word(m, "cfg.attention", path, {"bahdanau", "dot", "general", "concat"});
  c.dropout = 0;
  validate_read(c, path);
  return c;
}

RNNSeq2Seq::RNNSeq2Seq(const RNNSeq2SeqConfig& cfg) try : cfg_(cfg), drop_gen_(std::make_shared<Generator>(cfg.seed + 1)) {
  cfg_.validate();
  check_fits_in_memory(cfg.parameter_count());
  Generator init(cfg.seed);
  const int64_t E = cfg.embed, H = cfg.hidden, Hd = 2 * H;
  src_embed_ = register_module("src_embed", std::make_shared<nn::Embedding>(cfg.src_vocab, E, init, cfg.pad_id));
  tgt_embed_ = register_module("tgt_embed", std::make_shared<nn::Embedding>(cfg.tgt_vocab, E, init, cfg.pad_id));
  const auto eo =
      nn::RNNOptions(E, H).num_layers(cfg.layers).batch_first(true).dropout(cfg.dropout).bidirectional(true);
  if (cfg.cell == "lstm") encoder_ = register_module("encoder", std::make_shared<nn::LSTM>(eo, init, drop_gen_));
  else encoder_ = register_module("encoder", std::make_shared<nn::GRU>(eo, init, drop_gen_));
  bridge_ = register_module("bridge", std::make_shared<nn::Linear>(Hd, Hd, init));
  const int64_t cell_in = E + Hd;  // the embedding and the context (Bahdanau) or h~ (Luong)
  if (cfg.cell == "lstm") decoder_ = register_module("decoder", std::make_shared<nn::LSTMCell>(cell_in, Hd, init));
  else decoder_ = register_module("decoder", std::make_shared<nn::GRUCell>(cell_in, Hd, init));
  if (luong(cfg.attention)) {
    nn::LuongOptions lo;
    lo.query_size = lo.key_size = Hd;
    lo.score = cfg.attention;
    lo.hidden = Hd;
    luong_ = register_module("attention", std::make_shared<nn::LuongAttention>(lo, init));
    combine_ = register_module("combine", std::make_shared<nn::Linear>(2 * Hd, Hd, init, false));
    out_ = register_module("out", std::make_shared<nn::Linear>(Hd, cfg.tgt_vocab, init));
  } else {
    additive_ = register_module("attention", std::make_shared<nn::AdditiveAttention>(Hd, Hd, Hd, init));
    out_ = register_module("out", std::make_shared<nn::Linear>(2 * Hd, cfg.tgt_vocab, init));
  }
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(cfg.dropout, drop_gen_));
} catch (const std::bad_alloc&) {
  out_of_memory("the recurrent encoder-decoder", cfg.parameter_count());
}

std::string RNNSeq2Seq::type_name() const {
  return "RNNSeq2Seq(cell=" + cfg_.cell + ", attention=" + cfg_.attention + ", embed=" + std::to_string(cfg_.embed) +
         ", hidden=" + std::to_string(cfg_.hidden) + ", layers=" + std::to_string(cfg_.layers) + ")";
}

Tensor RNNSeq2Seq::forward(const Tensor&) {
  throw std::logic_error(describe() + ": forward(x) is not defined; use forward(src, tgt_in) or loss()");
}

Tensor RNNSeq2Seq::padding_mask(const Tensor& src) const { return id_mask(src, cfg_.pad_id, bridge_->weight().dtype()); }

namespace {
// The batch's ids as a (B,S) int64 tensor, its sizes checked (`who` names the model).
Tensor ids_of(const Batch& src, const std::string& who) {
  if (src.rows < 1 || src.cols < 1 || static_cast<int64_t>(src.ids.size()) != src.rows * src.cols)
    throw ShapeError(who + ": a source batch of " + std::to_string(src.rows) + "x" + std::to_string(src.cols) +
                     " with " + std::to_string(src.ids.size()) + " ids");
  return from_ints(src.ids, {src.rows, src.cols});
}
}  // namespace

Tensor RNNSeq2Seq::encode(const Batch& src) { return encode(ids_of(src, describe())); }

// Each row's length: its ids up to the padding at its end. Under an export
// trace also as a tensor made by ops from the ids (the count of ids that
// are not padding), which equals it when no padding sits inside a row.
Tensor RNNSeq2Seq::encode(const Tensor& src) {
  const auto named = scope();
  if (!src.defined() || src.dtype() != Dtype::i64 || src.dim() != 2 || src.size(0) < 1 || src.size(1) < 1)
    throw ShapeError(describe() + ": source ids " + (src.defined() ? shape_str(src.shape()) : "undefined") +
                     ": expected (B,S) int64 with B, S >= 1");
  const int64_t B = src.size(0), S = src.size(1);
  const int64_t* ids = src.data<int64_t>();
  std::vector<int64_t> lengths(static_cast<size_t>(B));
  int64_t pads = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = S;
    while (n > 0 && ids[b * S + n - 1] == cfg_.pad_id) --n;  // rows are padded at the end
    if (n == 0) throw std::invalid_argument(describe() + ": source row " + std::to_string(b) + " is all padding");
    lengths[static_cast<size_t>(b)] = n;
    for (int64_t t = 0; t < S; ++t) pads += ids[b * S + t] == cfg_.pad_id;
  }
  Tensor traced_lengths;
  if (tracing()) {
    int64_t total = 0;
    for (int64_t n : lengths) total += n;
    if (total + pads != B * S)
      throw std::invalid_argument(describe() + ": a source row holds the padding id " + std::to_string(cfg_.pad_id) +
                                  " before its end; an exported encoder counts a row's ids that are not padding");
    traced_lengths = sum(padding_mask(src) * -1.0 + 1.0, {1});  // (B)
  }
  const Tensor x = dropout_->forward(src_embed_->forward(src));  // (B,S,E)
  encoder_states_ = encoder_->forward(x, Tensor(), lengths, Tensor(), traced_lengths);
  return encoder_states_.output;
}

RNNSeq2Seq::State RNNSeq2Seq::start(const Batch& src) { return start(ids_of(src, describe())); }

RNNSeq2Seq::State RNNSeq2Seq::start(const Tensor& src) {
  State s;
  s.memory = encode(src);
  s.pad = padding_mask(src);
  const int64_t L = cfg_.layers, B = src.size(0), H = cfg_.hidden;
  const Tensor& h_n = encoder_states_.h_n;  // (2L,B,H): the top layer's directions are 2L-2 and 2L-1
  const Tensor top = concat({reshape(slice(h_n, 0, 2 * L - 2, 2 * L - 1), {B, H}),
                             reshape(slice(h_n, 0, 2 * L - 1, 2 * L), {B, H})}, 1);  // (B,2H)
  s.h = tanh(bridge_->forward(top));
  if (cfg_.cell == "lstm") s.c = zeros({B, 2 * H}, s.h.dtype());
  if (luong_) s.feed = zeros({B, 2 * H}, s.h.dtype());
  return s;
}

Tensor RNNSeq2Seq::step(State& s, const std::vector<int64_t>& tokens) {
  const int64_t B = s.h.size(0);
  if (static_cast<int64_t>(tokens.size()) != B)
    throw ShapeError(describe() + ": " + std::to_string(tokens.size()) + " tokens for a batch of " + std::to_string(B));
  return step(s, from_ints(tokens, {B}));
}

Tensor RNNSeq2Seq::step(State& s, const Tensor& tokens) {
  const int64_t B = s.h.size(0);
  if (!tokens.defined() || tokens.dtype() != Dtype::i64 || tokens.shape() != Shape{B})
    throw ShapeError(describe() + ": tokens " + (tokens.defined() ? shape_str(tokens.shape()) : "undefined") +
                     ": expected (" + std::to_string(B) + ") int64, one per row");
  const Tensor e = dropout_->forward(tgt_embed_->forward(tokens));  // (B,E)
  if (additive_) {
    const nn::AttentionOutput a = additive_->forward(unsqueeze(s.h, 1), s.memory, s.memory, s.pad);
    const Tensor ctx = reshape(a.context, {B, -1});
    s.h = decoder_->step(concat({e, ctx}, 1), s.h, s.c);
    last_step_attention_ = a.weights;
    return out_->forward(dropout_->forward(concat({s.h, ctx}, 1)));
  }
  s.h = decoder_->step(concat({e, s.feed}, 1), s.h, s.c);
  const nn::AttentionOutput a = luong_->forward(unsqueeze(s.h, 1), s.memory, s.memory, s.pad);
  s.feed = tanh(combine_->forward(concat({reshape(a.context, {B, -1}), s.h}, 1)));
  last_step_attention_ = a.weights;
  return out_->forward(dropout_->forward(s.feed));
}

Tensor RNNSeq2Seq::forward(const Batch& src, const Batch& tgt_in) {
  const auto named = scope();
  if (tgt_in.rows != src.rows)
    throw ShapeError(describe() + ": " + std::to_string(src.rows) + " source rows and " + std::to_string(tgt_in.rows) +
                     " target rows");
  State s = start(src);
  std::vector<Tensor> logits, weights;
  std::vector<int64_t> tokens(static_cast<size_t>(tgt_in.rows));
  for (int64_t t = 0; t < tgt_in.cols; ++t) {
    for (int64_t b = 0; b < tgt_in.rows; ++b) tokens[static_cast<size_t>(b)] = tgt_in.at(b, t);
    logits.push_back(step(s, tokens));
    weights.push_back(last_step_attention_);
  }
  last_attention_ = concat(weights, 1).detach();  // (B,T,S)
  return stack(logits, 1);                        // (B,T,V)
}

Tensor RNNSeq2Seq::loss(const Batch& src, const Batch& tgt_in, const Batch& tgt_out, double label_smoothing) {
  if (tgt_in.rows != tgt_out.rows || tgt_in.cols != tgt_out.cols)
    throw std::invalid_argument(describe() + ": target input (" + std::to_string(tgt_in.rows) + "," +
                                std::to_string(tgt_in.cols) + ") and output (" + std::to_string(tgt_out.rows) + "," +
                                std::to_string(tgt_out.cols) + ") differ in shape");
  const Tensor logits = forward(src, tgt_in);  // (B,T,V): rows of classes for cross_entropy
  return cross_entropy(reshape(logits, {-1, logits.size(2)}), tgt_out.ids,
                       CrossEntropyLossOptions().ignore_index(cfg_.pad_id).label_smoothing(label_smoothing));
}

void RNNSeq2Seq::select_rows(State& s, const std::vector<int64_t>& rows) {
  const Tensor index = from_ints(rows, {static_cast<int64_t>(rows.size())});
  for (Tensor* t : {&s.h, &s.c, &s.feed, &s.memory, &s.pad})
    if (t->defined()) *t = index_select(*t, 0, index);
}

std::vector<int64_t> beam_search(RNNSeq2Seq& model, const std::vector<int64_t>& src, int64_t bos, int64_t eos,
                                 int64_t max_len, int64_t beam_size, double alpha) {
  if (beam_size < 1) throw std::invalid_argument("beam_search: beam_size must be at least 1, got " + std::to_string(beam_size));
  NoGradGuard no_grad;
  nn::EvalGuard eval(model);
  RNNSeq2Seq::State st = model.start(Batch{src, 1, static_cast<int64_t>(src.size())});
  BeamDecoder decoder{[&](const std::vector<int64_t>& rows) { RNNSeq2Seq::select_rows(st, rows); },
                      [&](const std::vector<int64_t>& tokens) { return model.step(st, tokens); }};
  return beam_search_steps(decoder, bos, eos, max_len, beam_size, alpha).front().tokens;
}

std::vector<std::vector<int64_t>> greedy_decode(RNNSeq2Seq& model, const Batch& src, int64_t bos, int64_t eos,
                                                int64_t max_len) {
  NoGradGuard no_grad;
  nn::EvalGuard eval(model);
  RNNSeq2Seq::State s = model.start(src);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(src.rows));
  std::vector<int64_t> tokens(static_cast<size_t>(src.rows), bos);
  std::vector<bool> done(static_cast<size_t>(src.rows), false);
  for (int64_t t = 0; t < max_len; ++t) {
    const std::vector<int64_t> next = argmax(model.step(s, tokens), -1);
    bool all = true;
    for (size_t b = 0; b < next.size(); ++b) {
      if (!done[b] && next[b] == eos) done[b] = true;
      if (!done[b]) out[b].push_back(next[b]);
      all = all && done[b];
      tokens[b] = done[b] ? eos : next[b];
    }
    if (all) break;
  }
  return out;
}

}  // namespace xg::models
