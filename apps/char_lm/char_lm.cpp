#include "apps/char_lm/char_lm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/require.h"
#include "distributed/dist.h"
#include "train/checkpoint.h"

namespace xg::char_lm {

CharLMOptions::CharLMOptions() {
  model.layers = 4;
  model.d_model = 128;
  model.heads = 4;
  model.d_ff = 512;
  model.max_len = 128;
  model.dropout = 0.0;
}

void CharLMOptions::validate() const {
  auto need = [](bool ok, const std::string& what) { require(ok, what, "CharLMOptions: "); };
  need(batch_size >= 1, fmt::format("batch_size {}: expected at least 1", batch_size));
  train::check_batch_per_process(batch_size, "window");
  need(eval_chars >= 0, fmt::format("eval_chars {}: expected 0 (all) or more", eval_chars));
  need(train_chars >= 0, fmt::format("train_chars {}: expected 0 (all) or more", train_chars));
  need(sample_chars >= 0, fmt::format("sample_chars {}: expected 0 (none) or more", sample_chars));
  models::GPTConfig m = model;
  m.vocab = 1;  // taken from the data
  m.validate();
}

namespace {

// The characters generated after `prompt` with a sliding context: when the
// context is full, the last half of it is fed again as a new prompt.
std::string generate_text(models::GPT& model, const CharVocab& vocab, const std::string& prompt, int64_t n,
                          const nn::SamplingOptions& s, uint64_t seed) {
  std::vector<int64_t> seq = vocab.encode(prompt.empty() ? std::string("%\n") : prompt);
  const int64_t window = model.config().max_len;
  if (static_cast<int64_t>(seq.size()) > window) seq.erase(seq.begin(), seq.end() - window / 2);
  Generator gen(seed);
  std::vector<int64_t> out;
  while (static_cast<int64_t>(out.size()) < n) {
    if (static_cast<int64_t>(seq.size()) >= window) seq.erase(seq.begin(), seq.end() - std::max<int64_t>(window / 2, 1));
    const int64_t room = window - static_cast<int64_t>(seq.size());
    const int64_t take = std::min(n - static_cast<int64_t>(out.size()), room);
    const auto got = model.generate({seq}, take, gen, s)[0];
    seq.insert(seq.end(), got.begin(), got.end());
    out.insert(out.end(), got.begin(), got.end());
  }
  return vocab.decode(out);
}

// One line: newlines and tabs shown as the two characters \n and \t.
std::string one_line(const std::string& s) {
  std::string r;
  for (char c : s) r += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return r;
}

}  // namespace

train::TrainOptions default_recipe() {
  train::TrainOptions o;
  o.steps = 5000;
  o.schedule = "warmup_cosine";
  o.lr = 2e-3;
  o.warmup = 200;
  o.beta1 = 0.9;
  o.beta2 = 0.95;  // nanoGPT's
  o.weight_decay = 0.1;
  o.clip_norm = 1.0;
  return o;
}

CharLMJob::CharLMJob(const CharLMOptions& o)
    : opts_((o.validate(), o)), data_(load_fortunes(o.data)), vocab_(data_.train + data_.valid) {
  if (opts_.train_chars > 0 && opts_.train_chars < static_cast<int64_t>(data_.train.size()))
    data_.train.resize(static_cast<size_t>(opts_.train_chars));
  train_ids_ = vocab_.encode(data_.train);
  valid_ids_ = vocab_.encode(data_.valid);
  const int64_t t = opts_.model.max_len;
  if (static_cast<int64_t>(train_ids_.size()) <= t + 1)
    throw std::invalid_argument(fmt::format("CharLM: {} training characters are too few for a context of {}",
                                            train_ids_.size(), t));
  if (valid_ids_.size() < 2)
    throw std::invalid_argument("CharLM: the validation split of " + opts_.data + " is empty");
  opts_.model.vocab = vocab_.size();
  opts_.model.seed = opts_.seed;
  model_ = std::make_shared<models::GPT>(opts_.model);
}

std::string CharLMJob::describe() {
  const auto& c = opts_.model;
  return fmt::format(
      "data={} ({} files, {} train / {} validation characters, {} fortunes held out) vocab={} | GPT layers={} "
      "d_model={} heads={} d_ff={} context={} | batch {}",
      opts_.data, data_.files, data_.train.size(), data_.valid.size(), data_.valid_records, c.vocab, c.layers,
      c.d_model, c.heads, c.d_ff, c.max_len, opts_.batch_size);
}

train::StepLoss CharLMJob::loss(const train::Shard& shard) {
  // Row r of step s's batch starts at window_start(seed, s, B, r, ...): every
  // process knows every row; it computes rows [begin, end).
  const int64_t b = opts_.batch_size, t = opts_.model.max_len;
  const int64_t lo = shard.begin(b), rows = shard.end(b) - lo;
  std::vector<int64_t> x(static_cast<size_t>(rows * t)), y(static_cast<size_t>(rows * t));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t s = window_start(opts_.seed, shard.step, b, lo + r, static_cast<int64_t>(train_ids_.size()), t);
    std::copy_n(train_ids_.begin() + s, t, x.begin() + r * t);
    std::copy_n(train_ids_.begin() + s + 1, t, y.begin() + r * t);
  }
  return {model_->loss(from_ints(x, {rows, t}), from_ints(y, {rows, t})), rows * t, b * t};
}

double CharLMJob::evaluate_bpc(int64_t chars) {
  const int64_t total = static_cast<int64_t>(valid_ids_.size());
  const int64_t n = chars > 0 ? std::min(chars, total) : total;  // characters read; n - 1 are predicted
  const int64_t t = opts_.model.max_len, rows_per_batch = std::max<int64_t>(opts_.batch_size, 32);
  NoGradGuard no_grad;
  model_->eval();
  double nats = 0;
  int64_t predicted = 0;
  for (int64_t start = 0; start < n - 1;) {
    // Full windows of t predictions, batched; the last one may be shorter.
    const int64_t len = std::min(t, n - 1 - start);
    const int64_t rows = len == t ? std::min(rows_per_batch, (n - 1 - start) / t) : 1;
    std::vector<int64_t> x(static_cast<size_t>(rows * len)), y(static_cast<size_t>(rows * len));
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(valid_ids_.begin() + start + r * len, len, x.begin() + r * len);
      std::copy_n(valid_ids_.begin() + start + r * len + 1, len, y.begin() + r * len);
    }
    nats += model_->loss(from_ints(x, {rows, len}), from_ints(y, {rows, len})).item() * static_cast<double>(rows * len);
    predicted += rows * len;
    start += rows * len;
  }
  return nats / static_cast<double>(predicted) / std::log(2.0);
}

std::string CharLMJob::sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed) {
  return generate_text(*model_, vocab_, prompt, n, s, seed);
}

train::Evaluation CharLMJob::evaluate(train::EvalStage stage, int64_t step) {
  const int64_t chars = stage == train::EvalStage::periodic ? opts_.eval_chars : 0;
  const int64_t total = static_cast<int64_t>(data_.valid.size());
  train::Evaluation e;
  e.metrics = {{"val_bpc", evaluate_bpc(chars)}};
  e.about = fmt::format("({} validation characters)", chars > 0 ? std::min(chars, total) : total);
  if (stage != train::EvalStage::check && opts_.sample_chars > 0)
    e.lines.push_back("  sample: " + one_line(sample("", opts_.sample_chars, {0.8, 0, 1.0}, 1)));
  return e;
}

std::string CharLMJob::loss_note(double loss) const { return fmt::format("({:.3f} bpc)", loss / std::log(2.0)); }

std::string CharLMJob::final_line(const train::RunSummary& r) const {
  return fmt::format("steps={} val_bpc={:.4f} train_seconds={:.1f}{}", r.steps,
                     r.final.metrics.empty() ? NAN : r.final.metrics[0].second, r.session_train_seconds,
                     r.timed_out ? " (time limit)" : "");
}

// What must match for a run to continue another: the model, the vocabulary,
// and what decides the data order (the trainer adds the schedule's keys).
Metadata CharLMJob::identity() const {
  Metadata m = opts_.model.to_metadata();
  m["vocab"] = vocab_.to_string();
  m["seed"] = std::to_string(opts_.seed);
  m["batch"] = std::to_string(opts_.batch_size);
  m["train_chars"] = std::to_string(opts_.train_chars);
  return m;
}

CharSampler::CharSampler(const std::string& checkpoint) {
  train::InferenceCheckpoint c = train::load_for_inference(checkpoint, "char_lm", "char_lm train");
  const Metadata& meta = c.metadata;
  try {
    vocab = std::make_unique<CharVocab>(CharVocab::from_string(train::metadata_string(meta, "vocab", checkpoint)));
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + checkpoint + ": " + e.what());
  }
  const models::GPTConfig config = models::GPTConfig::from_metadata(meta, checkpoint);
  if (config.vocab != vocab->size())
    throw FormatError(fmt::format("checkpoint {}: cfg.vocab {} but the stored vocabulary has {} characters", checkpoint,
                                  config.vocab, vocab->size()));
  model = std::make_shared<models::GPT>(config);
  model->load_state_dict(c.weights);
}

std::string CharSampler::sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed) {
  return generate_text(*model, *vocab, prompt, n, s, seed);
}

}  // namespace xg::char_lm
