#include "models/gpt.h"

#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg::models {

void GPTConfig::validate() const {
  auto need = [](bool ok, const std::string& what) { require(ok, what, "GPTConfig: "); };
  need(vocab > 0, "vocab must be positive, got " + std::to_string(vocab));
  need(max_len > 0, "max_len must be positive, got " + std::to_string(max_len));
  need(layers > 0, "layers must be positive, got " + std::to_string(layers));
  nn::require_heads_divide(d_model, heads, "GPTConfig: ");
  need(d_ff > 0, "d_ff must be positive, got " + std::to_string(d_ff));
  need(dropout >= 0 && dropout < 1, "dropout must be in [0, 1), got " + std::to_string(dropout));
}

GPTBlock::GPTBlock(const GPTConfig& c, Generator& init, std::shared_ptr<Generator> drop, bool causal)
    : causal_(causal) {
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(c.d_model));
  attn = register_module("attn", std::make_shared<nn::MultiHeadAttention>(c.d_model, c.heads, c.dropout, init, drop));
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(c.d_model));
  ff = register_module("ff", std::make_shared<nn::PositionwiseFeedForward>(c.d_model, c.d_ff, c.dropout, init, drop,
                                                                           nn::Activation::gelu));
  drop1 = register_module("drop1", std::make_shared<nn::Dropout>(c.dropout, drop));
  drop2 = register_module("drop2", std::make_shared<nn::Dropout>(c.dropout, drop));
}

Tensor GPTBlock::forward(const Tensor& x) {
  const auto named = scope();
  Tensor n = ln1->forward(x);
  Tensor h = x + drop1->forward(attn->forward(n, n, n, Tensor(), causal_));
  return h + drop2->forward(ff->forward(ln2->forward(h)));
}

Tensor GPTBlock::forward_step(const Tensor& x, nn::MultiHeadAttention::KVCache& kv) {
  const auto named = scope();
  if (!causal_) throw std::logic_error("GPTBlock::forward_step: a non-causal block has no incremental form");
  if (x.size(1) > 1 && kv.length() > 0)
    throw std::invalid_argument("GPTBlock::forward_step: " + std::to_string(x.size(1)) +
                                " positions after a non-empty cache (feed a prompt first, then one token a step)");
  Tensor n = ln1->forward(x);
  attn->extend_kv(kv, n, n);
  // A prompt attends causally within itself; a single new position sees
  // every cached one, which is what the causal mask allows it.
  Tensor h = x + drop1->forward(attn->attend(n, kv, Tensor(), /*causal=*/x.size(1) > 1));
  return h + drop2->forward(ff->forward(ln2->forward(h)));
}

GPT::GPT(const GPTConfig& cfg) try : cfg_(cfg) {
  cfg.validate();
  check_fits_in_memory(cfg.parameter_count());
  Generator init(cfg.seed);
  drop_gen_ = std::make_shared<Generator>(cfg.seed ^ 0x9e3779b97f4a7c15ULL);
  tok_embed = register_module("tok_embed",
                              std::make_shared<nn::Embedding>(cfg.vocab, cfg.d_model, init, std::nullopt, 0.02));
  if (cfg.learned_positions)
    pos_learned = register_module("pos", std::make_shared<nn::LearnedPositionalEmbedding>(cfg.max_len, cfg.d_model, init));
  else
    pos_sin = register_module("pos", std::make_shared<nn::PositionalEncoding>(cfg.d_model, cfg.max_len, 0.0, nullptr));
  drop = register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout, drop_gen_));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < cfg.layers; ++i) blocks->push_back(std::make_shared<GPTBlock>(cfg, init, drop_gen_));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(cfg.d_model));
} catch (const std::bad_alloc&) {
  out_of_memory("the GPT", cfg.parameter_count());
}

void GPT::check_positions(int64_t start, int64_t cols) const {
  if (start + cols > cfg_.max_len)
    throw std::invalid_argument("GPT: positions " + std::to_string(start) + ".." + std::to_string(start + cols - 1) +
                                " exceed max_len " + std::to_string(cfg_.max_len));
}

Tensor GPT::embed(const std::vector<int64_t>& ids, int64_t rows, int64_t cols, int64_t start) {
  check_positions(start, cols);
  Tensor x = tok_embed->forward(ids, {rows, cols});  // (B,T,C)
  x = pos_learned ? pos_learned->forward(x, start) : pos_sin->forward(x, start);
  return drop->forward(x);
}

Tensor GPT::head(const Tensor& h) { return linear(ln_f->forward(h), tok_embed->weight()); }

Tensor GPT::blocks_of(const Batch& ids) {
  if (static_cast<int64_t>(ids.ids.size()) != ids.rows * ids.cols)
    throw std::invalid_argument("GPT: " + std::to_string(ids.ids.size()) + " ids for a (" + std::to_string(ids.rows) +
                                "," + std::to_string(ids.cols) + ") batch");
  Tensor h = embed(ids.ids, ids.rows, ids.cols, 0);
  for (size_t i = 0; i < blocks->size(); ++i) h = blocks->at<GPTBlock>(i)->forward(h);
  return h;
}

Tensor GPT::forward(const Batch& ids) {
  const auto named = scope();
  return head(blocks_of(ids));
}

Tensor GPT::loss(const Batch& ids, const Batch& targets, int64_t ignore_index) {
  const auto named = scope();
  if (ids.rows != targets.rows || ids.cols != targets.cols)
    throw std::invalid_argument("GPT::loss: ids (" + std::to_string(ids.rows) + "," + std::to_string(ids.cols) +
                                ") and targets (" + std::to_string(targets.rows) + "," + std::to_string(targets.cols) +
                                ") differ in shape");
  // The tied projection and the loss in one op (linear_cross_entropy): the
  // (B,T,V) logits are never held whole.
  return linear_cross_entropy(ln_f->forward(blocks_of(ids)), tok_embed->weight(), Tensor(), targets.ids,
                              ignore_index);
}

namespace {
Batch batch_of(const Tensor& t, const char* op, const char* what) {
  if (!t.defined() || t.dtype() != Dtype::i64 || t.dim() != 2)
    throw std::invalid_argument(std::string(op) + ": " + what + " must be a 2-D int64 tensor (B,T), got " +
                                (t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape())
                                             : std::string("an undefined tensor")));
  const int64_t* p = t.data<int64_t>();
  return Batch{std::vector<int64_t>(p, p + t.numel()), t.size(0), t.size(1)};
}
}  // namespace

Tensor GPT::forward(const Tensor& ids) { return forward(batch_of(ids, "GPT", "ids")); }

Tensor GPT::loss(const Tensor& ids, const Tensor& targets, int64_t ignore_index) {
  return loss(batch_of(ids, "GPT::loss", "ids"), batch_of(targets, "GPT::loss", "targets"), ignore_index);
}

GPT::Cache GPT::start_cache() {
  Cache c;
  c.kv.resize(blocks->size());
  for (auto& kv : c.kv) kv.reserve = cfg_.max_len;
  return c;
}

Tensor GPT::prefill(Cache& cache, const Batch& prompt) {
  if (cache.pos != 0) throw std::invalid_argument("GPT::prefill: the cache already holds " + std::to_string(cache.pos) +
                                                  " positions (prefill starts a sequence)");
  if (prompt.cols < 1) throw std::invalid_argument("GPT::prefill: an empty prompt (at least one token a row)");
  check_positions(0, prompt.cols);
  Tensor logits = prefill(cache, from_ints(prompt.ids, {prompt.rows, prompt.cols}));
  cache.pos = prompt.cols;
  return logits;
}

Tensor GPT::prefill(Cache& cache, const Tensor& prompt) {
  const auto named = scope();
  if (!prompt.defined() || prompt.dim() != 2 || prompt.size(1) < 1)
    throw ShapeError("GPT::prefill: prompt must be (B,T) with T >= 1, got " +
                     (prompt.defined() ? shape_str(prompt.shape()) : std::string("undefined")));
  Tensor x = tok_embed->forward(prompt);  // (B,T,C), positions 0..T-1
  Tensor h = drop->forward(pos_learned ? pos_learned->forward(x) : pos_sin->forward(x));
  for (size_t i = 0; i < blocks->size(); ++i) h = blocks->at<GPTBlock>(i)->forward_step(h, cache.kv[i]);
  // The last position at any length (bounds from the end, which a graph keeps as such): (B,1,C)
  Tensor last = slice(h, 1, -1, std::numeric_limits<int64_t>::max());
  return reshape(head(last), {prompt.size(0), cfg_.vocab});
}

Tensor GPT::step(Cache& cache, const std::vector<int64_t>& tokens) {
  const int64_t b = static_cast<int64_t>(tokens.size());
  if (cache.pos == 0) throw std::invalid_argument("GPT::step: the cache is empty (prefill a prompt first)");
  if (!cache.kv.empty() && cache.kv[0].k.defined() && cache.kv[0].k.size(0) != b)
    throw std::invalid_argument("GPT::step: " + std::to_string(b) + " tokens for a cache of " +
                                std::to_string(cache.kv[0].k.size(0)) + " rows");
  check_positions(cache.pos, 1);
  Tensor logits = step(cache, from_ints(tokens, {b, 1}), from_ints({cache.pos}, {1}));
  ++cache.pos;
  return logits;
}

Tensor GPT::step(Cache& cache, const Tensor& tokens, const Tensor& position) {
  const auto named = scope();
  if (!tokens.defined() || tokens.dim() != 2 || tokens.size(1) != 1)
    throw ShapeError("GPT::step: tokens must be (B,1), got " +
                     (tokens.defined() ? shape_str(tokens.shape()) : std::string("undefined")));
  Tensor x = tok_embed->forward(tokens);  // (B,1,C)
  x = pos_learned ? pos_learned->forward_at(x, position) : pos_sin->forward_at(x, position);
  Tensor h = drop->forward(x);
  for (size_t i = 0; i < blocks->size(); ++i) h = blocks->at<GPTBlock>(i)->forward_step(h, cache.kv[i]);
  return reshape(head(h), {tokens.size(0), cfg_.vocab});
}

std::vector<std::vector<int64_t>> GPT::generate(const std::vector<std::vector<int64_t>>& prompts, int64_t new_tokens,
                                                Generator& gen, const nn::SamplingOptions& sampling) {
  if (prompts.empty()) return {};
  const int64_t t = static_cast<int64_t>(prompts[0].size());
  Batch b{{}, static_cast<int64_t>(prompts.size()), t};
  for (const auto& p : prompts) {
    if (static_cast<int64_t>(p.size()) != t)
      throw std::invalid_argument("GPT::generate: prompts of different lengths (" + std::to_string(t) + " and " +
                                  std::to_string(p.size()) + ")");
    b.ids.insert(b.ids.end(), p.begin(), p.end());
  }
  if (new_tokens < 0) throw std::invalid_argument("GPT::generate: new_tokens " + std::to_string(new_tokens) + " < 0");
  if (t + new_tokens > cfg_.max_len)
    throw std::invalid_argument("GPT::generate: a prompt of " + std::to_string(t) + " tokens plus " +
                                std::to_string(new_tokens) + " new ones exceeds max_len " + std::to_string(cfg_.max_len));
  NoGradGuard no_grad;
  nn::EvalGuard eval_mode(*this);
  std::vector<std::vector<int64_t>> out(prompts.size());
  if (new_tokens > 0) {
    Cache cache = start_cache();
    Tensor logits = prefill(cache, b);
    for (int64_t k = 0; k < new_tokens; ++k) {
      const std::vector<int64_t> next = nn::sample(logits, gen, sampling);
      for (size_t r = 0; r < next.size(); ++r) out[r].push_back(next[r]);
      if (k + 1 < new_tokens) logits = step(cache, next);
    }
  }
  return out;
}

}  // namespace xg::models
