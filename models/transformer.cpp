#include "models/transformer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg::models {

void TransformerConfig::validate() const {
  auto need = [](bool ok, const std::string& what) { require(ok, what, "TransformerConfig: "); };
  need(src_vocab > 0 && tgt_vocab > 0, "vocabulary sizes must be positive");
  need(layers > 0, "layers must be positive, got " + std::to_string(layers));
  nn::require_heads_divide(d_model, heads, "TransformerConfig: ");
  need(d_ff > 0, "d_ff must be positive");
  need(dropout >= 0 && dropout < 1, "dropout must be in [0, 1), got " + std::to_string(dropout));
  need(max_len > 0, "max_len must be positive");
  need(!tie_weights || src_vocab == tgt_vocab,
       "tie_weights needs src_vocab == tgt_vocab, got " + std::to_string(src_vocab) + " and " +
           std::to_string(tgt_vocab));
  need(pad_id >= 0 && pad_id < std::min(src_vocab, tgt_vocab), "pad_id must be a valid token id");
}

double TransformerConfig::parameter_count() const {
  const double c = static_cast<double>(d_model), f = static_cast<double>(d_ff);
  const double attention = 4 * (c * c + c), feed_forward = c * f + f + f * c + c, norm = 2 * c;
  const double encoder = attention + feed_forward + 2 * norm, decoder = 2 * attention + feed_forward + 3 * norm;
  const double sv = static_cast<double>(src_vocab), tv = static_cast<double>(tgt_vocab);
  const double embeddings = tie_weights ? sv * c : sv * c + tv * c + (c * tv + tv);
  return static_cast<double>(layers) * (encoder + decoder) + embeddings + (pre_norm ? 2 * norm : 0);
}

// ---- layers -------------------------------------------------------------------

EncoderLayer::EncoderLayer(const TransformerConfig& cfg, Generator& init, std::shared_ptr<Generator> drop)
    : pre_norm_(cfg.pre_norm) {
  self_attn = register_module("self_attn",
                              std::make_shared<nn::MultiHeadAttention>(cfg.d_model, cfg.heads, cfg.dropout, init, drop));
  ff = register_module("ff", std::make_shared<nn::PositionwiseFeedForward>(cfg.d_model, cfg.d_ff, cfg.dropout, init, drop));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(cfg.d_model));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(cfg.d_model));
  drop1 = register_module("drop1", std::make_shared<nn::Dropout>(cfg.dropout, drop));
  drop2 = register_module("drop2", std::make_shared<nn::Dropout>(cfg.dropout, drop));
}

Tensor EncoderLayer::forward(const Tensor& x, const Tensor& src_pad) {
  const auto named = scope();
  if (pre_norm_) {  // x + f(norm(x))
    Tensor n = norm1->forward(x);
    Tensor h = x + drop1->forward(self_attn->forward(n, n, n, src_pad));
    return h + drop2->forward(ff->forward(norm2->forward(h)));
  }
  // the paper: norm(x + f(x))
  Tensor h = norm1->forward(x, drop1->forward(self_attn->forward(x, x, x, src_pad)));
  return norm2->forward(h, drop2->forward(ff->forward(h)));
}

DecoderLayer::DecoderLayer(const TransformerConfig& cfg, Generator& init, std::shared_ptr<Generator> drop)
    : pre_norm_(cfg.pre_norm) {
  self_attn = register_module("self_attn",
                              std::make_shared<nn::MultiHeadAttention>(cfg.d_model, cfg.heads, cfg.dropout, init, drop));
  cross_attn = register_module(
      "cross_attn", std::make_shared<nn::MultiHeadAttention>(cfg.d_model, cfg.heads, cfg.dropout, init, drop));
  ff = register_module("ff", std::make_shared<nn::PositionwiseFeedForward>(cfg.d_model, cfg.d_ff, cfg.dropout, init, drop));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(cfg.d_model));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(cfg.d_model));
  norm3 = register_module("norm3", std::make_shared<nn::LayerNorm>(cfg.d_model));
  drop1 = register_module("drop1", std::make_shared<nn::Dropout>(cfg.dropout, drop));
  drop2 = register_module("drop2", std::make_shared<nn::Dropout>(cfg.dropout, drop));
  drop3 = register_module("drop3", std::make_shared<nn::Dropout>(cfg.dropout, drop));
}

Tensor DecoderLayer::forward(const Tensor& y, const Tensor& memory, const Tensor& tgt_pad, const Tensor& src_pad) {
  const auto named = scope();
  if (pre_norm_) {
    Tensor n = norm1->forward(y);
    Tensor h = y + drop1->forward(self_attn->forward(n, n, n, tgt_pad, /*causal=*/true));
    Tensor n2 = norm2->forward(h);
    h = h + drop2->forward(cross_attn->forward(n2, memory, memory, src_pad));
    return h + drop3->forward(ff->forward(norm3->forward(h)));
  }
  Tensor h = norm1->forward(y, drop1->forward(self_attn->forward(y, y, y, tgt_pad, /*causal=*/true)));
  h = norm2->forward(h, drop2->forward(cross_attn->forward(h, memory, memory, src_pad)));
  return norm3->forward(h, drop3->forward(ff->forward(h)));
}

Tensor DecoderLayer::forward_step(const Tensor& y, nn::MultiHeadAttention::KVCache& self_kv,
                                  const nn::MultiHeadAttention::KVCache& cross_kv, const Tensor& src_pad) {
  const auto named = scope();
  // As forward(), with the causal self-attention reading the cache: the new
  // position sees every earlier one, which is exactly what the mask allowed.
  if (pre_norm_) {
    Tensor n = norm1->forward(y);
    self_attn->extend_kv(self_kv, n, n);
    Tensor h = y + drop1->forward(self_attn->attend(n, self_kv));
    h = h + drop2->forward(cross_attn->attend(norm2->forward(h), cross_kv, src_pad));
    return h + drop3->forward(ff->forward(norm3->forward(h)));
  }
  self_attn->extend_kv(self_kv, y, y);
  Tensor h = norm1->forward(y, drop1->forward(self_attn->attend(y, self_kv)));
  h = norm2->forward(h, drop2->forward(cross_attn->attend(h, cross_kv, src_pad)));
  return norm3->forward(h, drop3->forward(ff->forward(h)));
}

// ---- model ----------------------------------------------------------------------

Transformer::Transformer(const TransformerConfig& cfg) try : cfg_(cfg) {
  cfg.validate();
  check_fits_in_memory(cfg.parameter_count());
  Generator init(cfg.seed);
  drop_gen_ = std::make_shared<Generator>(cfg.seed + 1);
  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(cfg.src_vocab, cfg.d_model, init));
  tgt_embed = cfg.tie_weights ? src_embed
                              : register_module("tgt_embed", std::make_shared<nn::Embedding>(cfg.tgt_vocab, cfg.d_model, init));
  pos = register_module("pos", std::make_shared<nn::PositionalEncoding>(cfg.d_model, cfg.max_len, cfg.dropout, drop_gen_));
  encoder = register_module("encoder", std::make_shared<nn::ModuleList>());
  decoder = register_module("decoder", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < cfg.layers; ++i) {
    encoder->push_back(std::make_shared<EncoderLayer>(cfg, init, drop_gen_));
    decoder->push_back(std::make_shared<DecoderLayer>(cfg, init, drop_gen_));
  }
  if (cfg.pre_norm) {
    enc_norm = register_module("enc_norm", std::make_shared<nn::LayerNorm>(cfg.d_model));
    dec_norm = register_module("dec_norm", std::make_shared<nn::LayerNorm>(cfg.d_model));
  }
  if (!cfg.tie_weights)
    out_proj = register_module("out_proj", std::make_shared<nn::Linear>(cfg.d_model, cfg.tgt_vocab, init));
  // As in the reference implementations: Glorot-uniform for every matrix.
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) nn::init::xavier_uniform_(p, init);
} catch (const std::bad_alloc&) {
  out_of_memory("the Transformer", cfg.parameter_count());
}

Tensor Transformer::padding_mask(const Batch& b) const {
  Tensor m = zeros({b.rows, b.cols}, src_embed->weight().dtype());
  for (int64_t i = 0; i < b.rows * b.cols; ++i)
    if (b.ids[i] == cfg_.pad_id) m.set({i / b.cols, i % b.cols}, 1.0);
  return m;
}

Tensor Transformer::padding_mask(const Tensor& ids) const {
  const int64_t v = std::max(cfg_.src_vocab, cfg_.tgt_vocab);
  if (!ids.defined() || ids.dtype() != Dtype::i64 || ids.dim() != 2)
    throw ShapeError("Transformer::padding_mask: ids must be int64 (B,S), got " +
                     (ids.defined() ? std::string(dtype_name(ids.dtype())) + " " + shape_str(ids.shape())
                                    : std::string("an undefined tensor")));
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (p[i] < 0 || p[i] >= v)
      throw ShapeError("Transformer::padding_mask: id " + std::to_string(p[i]) + " is outside 0.." +
                       std::to_string(v - 1));
  Tensor is_pad = zeros({v, 1}, src_embed->weight().dtype());  // (V,1): 1 at pad_id
  is_pad.set({cfg_.pad_id, 0}, 1.0);
  return reshape(gather_rows(is_pad, ids), ids.shape());  // (B,S,1) -> (B,S)
}

Tensor Transformer::embed(nn::Embedding& e, const Tensor& ids) {
  const auto named = scope();
  if (ids.size(1) > cfg_.max_len)
    throw std::invalid_argument("Transformer: sequence length " + std::to_string(ids.size(1)) + " exceeds max_len " +
                                std::to_string(cfg_.max_len));
  // (B,L,C): token embedding scaled by sqrt(C), plus the positional encoding (with dropout)
  return pos->forward(e.forward(ids) * std::sqrt(static_cast<double>(cfg_.d_model)));
}

namespace {
Tensor ids_of(const Batch& b) { return from_ints(b.ids, {b.rows, b.cols}); }  // (B,L) int64
}  // namespace

Tensor Transformer::encode(const Batch& src) { return encode(ids_of(src), padding_mask(src)); }

Tensor Transformer::encode(const Tensor& src, const Tensor& src_pad) {
  const auto named = scope();
  Tensor x = embed(*src_embed, src);  // (B,S,C)
  for (size_t i = 0; i < encoder->size(); ++i) x = encoder->at<EncoderLayer>(i)->forward(x, src_pad);
  return cfg_.pre_norm ? enc_norm->forward(x) : x;
}

Tensor Transformer::decode_hidden(const Batch& tgt, const Tensor& memory, const Tensor& src_pad) {
  Tensor tgt_pad = padding_mask(tgt);
  Tensor y = embed(*tgt_embed, ids_of(tgt));  // (B,T,C)
  for (size_t i = 0; i < decoder->size(); ++i) y = decoder->at<DecoderLayer>(i)->forward(y, memory, tgt_pad, src_pad);
  if (cfg_.pre_norm) y = dec_norm->forward(y);
  return y;
}

Tensor Transformer::decode(const Batch& tgt, const Tensor& memory, const Tensor& src_pad) {
  const auto named = scope();
  Tensor y = decode_hidden(tgt, memory, src_pad);
  // (B,T,V)
  return cfg_.tie_weights ? linear(y, tgt_embed->weight()) : out_proj->forward(y);
}

Tensor Transformer::forward(const Batch& src, const Batch& tgt_in) {
  if (src.rows != tgt_in.rows)
    throw std::invalid_argument("Transformer::forward: source batch has " + std::to_string(src.rows) +
                                " rows, target batch " + std::to_string(tgt_in.rows));
  Tensor src_pad = padding_mask(src);
  return decode(tgt_in, encode(ids_of(src), src_pad), src_pad);
}

DecodeState Transformer::start_decode(const Batch& src) { return start_decode(ids_of(src)); }

DecodeState Transformer::start_decode(const Tensor& src, Tensor* memory_out) {
  DecodeState st;
  st.src_pad = padding_mask(src);
  Tensor memory = encode(src, st.src_pad);  // (B,S,C)
  if (memory_out) *memory_out = memory;
  for (size_t i = 0; i < decoder->size(); ++i) {
    st.cross_kv.push_back(decoder->at<DecoderLayer>(i)->cross_attn->project_kv(memory, memory));
    st.self_kv.emplace_back();
    st.self_kv.back().reserve = cfg_.max_len;  // the most positions decode_step allows
  }
  return st;
}

Tensor Transformer::decode_step(DecodeState& st, const std::vector<int64_t>& tokens) {
  const int64_t b = st.src_pad.size(0);
  if (static_cast<int64_t>(tokens.size()) != b)
    throw std::invalid_argument("Transformer::decode_step: " + std::to_string(tokens.size()) +
                                " tokens for a state of " + std::to_string(b) + " rows");
  if (st.pos >= cfg_.max_len)
    throw std::invalid_argument("Transformer::decode_step: position " + std::to_string(st.pos) +
                                " exceeds max_len " + std::to_string(cfg_.max_len));
  Tensor logits = step(st, from_ints(tokens, {b, 1}), from_ints({st.pos}, {1}));
  ++st.pos;
  return logits;
}

Tensor Transformer::step(DecodeState& st, const Tensor& tokens, const Tensor& position) {
  const auto named = scope();
  const int64_t b = st.src_pad.size(0);
  if (!tokens.defined() || tokens.shape() != Shape{b, 1})
    throw ShapeError("Transformer::step: tokens must be (B,1) = " + shape_str({b, 1}) + " for the state's batch, got " +
                     (tokens.defined() ? shape_str(tokens.shape()) : std::string("undefined")));
  // (B,1,C) at the position given
  Tensor y = pos->forward_at(tgt_embed->forward(tokens) * std::sqrt(static_cast<double>(cfg_.d_model)), position);
  for (size_t i = 0; i < decoder->size(); ++i)
    y = decoder->at<DecoderLayer>(i)->forward_step(y, st.self_kv[i], st.cross_kv[i], st.src_pad);
  if (cfg_.pre_norm) y = dec_norm->forward(y);
  Tensor logits = cfg_.tie_weights ? linear(y, tgt_embed->weight()) : out_proj->forward(y);  // (B,1,V)
  return reshape(logits, {b, -1});
}

void Transformer::select_rows(DecodeState& st, const std::vector<int64_t>& rows) {
  auto pick = [&](Tensor& t) {
    if (!t.defined()) return;
    Shape s = t.shape();
    Tensor flat = reshape(t, {s[0], -1});
    s[0] = static_cast<int64_t>(rows.size());
    t = reshape(gather_rows(flat, rows, {s[0]}), s);
  };
  pick(st.src_pad);
  for (auto* caches : {&st.self_kv, &st.cross_kv})
    for (auto& c : *caches) {
      pick(c.k);
      pick(c.v);
    }
}

Tensor Transformer::loss(const Batch& src, const Batch& tgt_in, const Batch& tgt_out, double label_smoothing) {
  const auto named = scope();
  if (tgt_in.rows != tgt_out.rows || tgt_in.cols != tgt_out.cols)
    throw std::invalid_argument("Transformer::loss: target input (" + std::to_string(tgt_in.rows) + "," +
                                std::to_string(tgt_in.cols) + ") and output (" + std::to_string(tgt_out.rows) + "," +
                                std::to_string(tgt_out.cols) + ") differ in shape");
  if (src.rows != tgt_in.rows)
    throw std::invalid_argument("Transformer::loss: source batch has " + std::to_string(src.rows) +
                                " rows, target batch " + std::to_string(tgt_in.rows));
  // The projection and the loss in one op, chunk by chunk: the (B,T,V)
  // logits are never held whole (what large vocabularies need).
  Tensor src_pad = padding_mask(src);
  Tensor y = decode_hidden(tgt_in, encode(ids_of(src), src_pad), src_pad);
  if (cfg_.tie_weights) return linear_cross_entropy(y, tgt_embed->weight(), Tensor(), tgt_out.ids, cfg_.pad_id, label_smoothing);
  return linear_cross_entropy(y, out_proj->weight(), out_proj->bias(), tgt_out.ids, cfg_.pad_id, label_smoothing);
}

// ---- decoding ----------------------------------------------------------------------

namespace {

}  // namespace

std::vector<std::vector<int64_t>> greedy_decode(Transformer& model, const Batch& src, int64_t bos, int64_t eos,
                                                int64_t max_len) {
  NoGradGuard no_grad;
  nn::EvalGuard eval(model);
  DecodeState st = model.start_decode(src);  // the encoder runs once
  const int64_t b = src.rows;
  std::vector<std::vector<int64_t>> out(b);
  std::vector<bool> done(b, false);
  std::vector<int64_t> last(b, bos);
  for (int64_t step = 0; step < max_len; ++step) {
    std::vector<int64_t> next = argmax(model.decode_step(st, last), -1);
    bool all_done = true;
    for (int64_t r = 0; r < b; ++r) {
      if (!done[r]) {
        if (next[r] == eos) done[r] = true;
        else out[r].push_back(next[r]);
      }
      last[r] = done[r] ? model.config().pad_id : next[r];
      all_done = all_done && done[r];
    }
    if (all_done) break;
  }
  return out;
}

std::vector<int64_t> beam_search(Transformer& model, const std::vector<int64_t>& src, int64_t bos, int64_t eos,
                                 int64_t max_len, int64_t beam_size, double alpha) {
  return beam_search_nbest(model, src, bos, eos, max_len, beam_size, alpha).front().tokens;
}

std::vector<Hypothesis> beam_search_nbest(Transformer& model, const std::vector<int64_t>& src, int64_t bos,
                                          int64_t eos, int64_t max_len, int64_t beam_size, double alpha) {
  if (beam_size < 1) throw std::invalid_argument("beam_search: beam_size must be at least 1, got " + std::to_string(beam_size));
  NoGradGuard no_grad;
  nn::EvalGuard eval(model);
  DecodeState st = model.start_decode(Batch{src, 1, static_cast<int64_t>(src.size())});  // one row per live beam
  BeamDecoder decoder{[&](const std::vector<int64_t>& rows) { Transformer::select_rows(st, rows); },
                      [&](const std::vector<int64_t>& tokens) { return model.decode_step(st, tokens); }};
  return beam_search_steps(decoder, bos, eos, max_len, beam_size, alpha);
}

}  // namespace xg::models
