#include "models/transformer.h"

#include <algorithm>
#include <array>
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
  const auto layer = nn::TransformerLayerOptions(cfg.d_model, cfg.heads)
                         .dim_feedforward(cfg.d_ff)
                         .dropout(cfg.dropout)
                         .batch_first(true)
                         .norm_first(cfg.pre_norm);
  auto final_norm = [&] { return cfg.pre_norm ? std::make_shared<nn::LayerNorm>(cfg.d_model) : nullptr; };
  encoder = register_module("encoder",
                            std::make_shared<nn::TransformerEncoder>(layer, cfg.layers, init, final_norm(), drop_gen_));
  decoder = register_module("decoder",
                            std::make_shared<nn::TransformerDecoder>(layer, cfg.layers, init, final_norm(), drop_gen_));
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
  return encoder->forward(embed(*src_embed, src), Tensor(), src_pad);  // (B,S,C)
}

Tensor Transformer::decode_hidden(const Batch& tgt, const Tensor& memory, const Tensor& src_pad) {
  Tensor tgt_pad = padding_mask(tgt);
  // (B,T,C)
  return decoder->forward(embed(*tgt_embed, ids_of(tgt)), memory, Tensor(), Tensor(), tgt_pad, src_pad,
                          /*tgt_is_causal=*/true);
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
  for (size_t i = 0; i < decoder->layers->size(); ++i) {
    st.cross_kv.push_back(decoder_layer(i).multihead_attn->project_kv(memory, memory));
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
  for (size_t i = 0; i < decoder->layers->size(); ++i)
    y = decoder_layer(i).forward_step(y, st.self_kv[i], st.cross_kv[i], st.src_pad);
  if (decoder->norm) y = decoder->norm->forward(y);
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

// ---- the layout before nn's layers ------------------------------------------------

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (size_t dot; (dot = s.find('.', at)) != std::string::npos; at = dot + 1) parts.push_back(s.substr(at, dot - at));
  parts.push_back(s.substr(at));
  return parts;
}

// One earlier key under the model, split at its dots: today's key, or "" when
// it is a piece of a packed projection (*slot, 0..2 for w_q, w_k, w_v, is set
// and *packed names the packed key).
std::string today_key(std::vector<std::string> p, int* slot, std::string* packed) {
  if (p[0] == "enc_norm" || p[0] == "dec_norm") {
    p[0] = p[0] == "enc_norm" ? "encoder.norm" : "decoder.norm";
  } else if ((p[0] == "encoder" || p[0] == "decoder") && p.size() >= 4 && all_digits(p[1])) {
    p[1] = "layers." + p[1];
    if (p[2] == "ff") p.erase(p.begin() + 2);  // ff.linear1 -> linear1
    else if (p[2] == "cross_attn") p[2] = "multihead_attn";
    if ((p[2] == "self_attn" || p[2] == "multihead_attn") && p.size() == 5) {
      const std::string names[] = {"w_q", "w_k", "w_v"};
      for (int i = 0; i < 3; ++i)
        if (p[3] == names[i]) {
          *slot = i;
          *packed = p[0] + "." + p[1] + "." + p[2] + ".in_proj_" + p[4];
          return "";
        }
      if (p[3] == "w_o") p[3] = "out_proj";
    }
  } else {
    return "";
  }
  std::string key = p[0];
  for (size_t i = 1; i < p.size(); ++i) key += "." + p[i];
  return key;
}

}  // namespace

void Transformer::upgrade_state_dict(std::map<std::string, Tensor>& state, const std::string& prefix) const {
  NoGradGuard no_grad;
  std::map<std::string, Tensor> out;
  std::map<std::string, std::array<std::pair<std::string, Tensor>, 3>> packed;  // in_proj key -> (old key, tensor) of q, k, v
  bool earlier = false;
  for (const auto& [key, t] : state) {
    const bool mine = key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0;
    int slot = -1;
    std::string in_proj;
    const std::string now = mine ? today_key(split_dots(key.substr(prefix.size())), &slot, &in_proj) : "";
    if (slot >= 0) packed[prefix + in_proj][slot] = {key, t};
    else out[now.empty() ? key : prefix + now] = t;
    earlier = earlier || slot >= 0 || !now.empty();  // today_key names only keys it renames
  }
  if (!earlier) return;
  for (auto& [key, parts] : packed) {
    const bool whole = std::all_of(parts.begin(), parts.end(), [](const auto& p) { return p.second.defined(); }) &&
                       parts[0].second.shape() == parts[1].second.shape() &&
                       parts[1].second.shape() == parts[2].second.shape();
    if (whole) out[key] = concat({parts[0].second, parts[1].second, parts[2].second}, 0);  // (3C, C) or (3C)
    else  // left as they were: load_state_dict names them
      for (auto& [old, t] : parts)
        if (!old.empty()) out[old] = t;
  }
  state = std::move(out);
}

// ---- decoding ----------------------------------------------------------------------

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
