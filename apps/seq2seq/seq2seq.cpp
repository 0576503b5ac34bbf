#include "apps/seq2seq/seq2seq.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "apps/common/smoothing.h"
#include "autograd/autograd.h"
#include "autograd/require.h"
#include "distributed/dist.h"

namespace xg::seq2seq {

namespace {

// Salt of the held-out set's generator: training never sees its draws.
constexpr uint64_t kEvalSeedSalt = 0x5eed5eedULL;

void check(bool ok, const std::string& what) { require(ok, what); }

// The options' two model configurations given the task's vocabulary,
// lengths and the seed; the run's model is the one model_kind chooses.
void fill_models(Seq2SeqOptions& o) {
  o.model.src_vocab = o.model.tgt_vocab = o.rnn.src_vocab = o.rnn.tgt_vocab = o.task.vocab;
  o.model.pad_id = o.rnn.pad_id = kPad;
  o.model.max_len = std::max<int64_t>(o.model.max_len, o.task.max_len + 2);
  o.model.seed = o.rnn.seed = o.seed;
}

models::Seq2SeqConfig model_config(Seq2SeqOptions o) {
  fill_models(o);
  return models::Seq2SeqConfig::choose(o.model_kind, o.model, o.rnn);
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

// "layers 2, d_model 64, d_ff 256, vocab 16", or the RNN's "rnn lstm layers 1, embed ..., hidden ..., vocab ...".
std::string summary(const models::Seq2SeqConfig& c) {
  if (const models::RNNSeq2SeqConfig* r = c.rnn())
    return fmt::format("rnn {} layers {}, embed {}, hidden {}, vocab {}", r->cell, r->layers, r->embed, r->hidden,
                       r->src_vocab);
  const models::TransformerConfig& t = *c.transformer();
  return fmt::format("layers {}, d_model {}, d_ff {}, vocab {}", t.layers, t.d_model, t.d_ff, t.src_vocab);
}

}  // namespace

void Seq2SeqOptions::validate() const {
  task.validate();
  check(batch_size >= 1 && batch_size <= (1 << 20), fmt::format("batch_size {}: expected 1..{}", batch_size, 1 << 20));
  train::check_batch_per_process(batch_size, "example");
  check(eval_size >= 1 && eval_size <= (1 << 24), fmt::format("eval_size {}: expected 1..{}", eval_size, 1 << 24));
  apps::check_label_smoothing(label_smoothing);
  check(samples >= 0, fmt::format("samples {}: expected 0 or more", samples));
  const models::Seq2SeqConfig full = model_config(*this);
  full.validate();
  models::check_fits_in_memory(full.parameter_count());
}

train::TrainOptions default_recipe() {
  train::TrainOptions o;
  o.steps = 1500;
  o.schedule = "noam";
  o.lr = 1.0;
  o.warmup = 200;
  o.beta1 = 0.9;
  o.beta2 = 0.98;
  o.eps = 1e-9;
  o.clip_norm = 1.0;
  return o;
}

Seq2SeqJob::Seq2SeqJob(const Seq2SeqOptions& o) : EncoderDecoderJob(o.seed), opts_(o) {
  opts_.validate();
  fill_models(opts_);
  model_ = models::make_seq2seq(models::Seq2SeqConfig::choose(opts_.model_kind, opts_.model, opts_.rnn));
  Generator eval_gen(opts_.seed ^ kEvalSeedSalt);
  for (int64_t i = 0; i < opts_.eval_size; ++i) eval_set_.push_back(sample(opts_.task, eval_gen));
}

std::string Seq2SeqJob::describe() {
  return fmt::format("task={} vocab={} len={}..{} batch {} | {}", task_name(opts_.task.task), opts_.task.vocab,
                     opts_.task.min_len, opts_.task.max_len, opts_.batch_size, model_->describe());
}

train::StepLoss Seq2SeqJob::loss(const train::Shard& shard) {
  // The same global batch on every process (one data generator, the same seed); each keeps its rows.
  std::vector<Example> ex;
  ex.reserve(static_cast<size_t>(opts_.batch_size));
  for (int64_t i = 0; i < opts_.batch_size; ++i) ex.push_back(sample(opts_.task, data_gen_));
  return shard_loss(std::move(ex), shard, opts_.label_smoothing);
}

EvalResult Seq2SeqJob::evaluate_all(int64_t n_samples) {
  return seq2seq::evaluate(*model_, eval_set_, std::max<int64_t>(opts_.batch_size, 100), n_samples);
}

train::Evaluation Seq2SeqJob::evaluate(train::EvalStage stage, int64_t step) {
  // The final evaluation right after a periodic one at the same step (a
  // target reached) is that one: the weights have not changed.
  if (stage == train::EvalStage::final && last_eval_ && last_eval_->first == step) return last_eval_->second;
  const EvalResult r = evaluate_all(stage == train::EvalStage::check ? 0 : opts_.samples);
  train::Evaluation e;
  e.metrics = {{"exact_match", r.exact_match}, {"token_acc", r.token_acc}};
  e.about = fmt::format("({} held-out sequences)", eval_set_.size());
  for (const auto& [ex, got] : r.samples)
    e.lines.push_back(fmt::format("  {} -> {}{}", join(ex.src), join(got), got == ex.tgt ? "" : "  (wrong)"));
  if (stage == train::EvalStage::periodic) last_eval_ = {step, e};
  return e;
}

std::string Seq2SeqJob::final_line(const train::RunSummary& r) const {
  auto value = [&](const char* name) { return r.final.metric(name); };
  return fmt::format("task={} steps={} exact_match={:.3f} token_acc={:.3f} seconds={:.1f}", task_name(opts_.task.task),
                     r.steps, value("exact_match"), value("token_acc"), r.seconds);
}

Metadata Seq2SeqJob::identity() const {
  Metadata m = EncoderDecoderJob::identity();
  m["task"] = task_name(opts_.task.task);
  m["task.min_len"] = std::to_string(opts_.task.min_len);
  m["task.max_len"] = std::to_string(opts_.task.max_len);
  return m;
}

CheckpointInfo read_checkpoint_info(const Metadata& m, const std::string& path) {
  CheckpointInfo info;
  info.model = models::Seq2SeqConfig::from_metadata(m, path);
  const int64_t vocab = info.model.src_vocab();
  const int64_t other = info.model.tgt_vocab();
  if (vocab <= kFirstSymbol || other <= kFirstSymbol)
    throw FormatError(fmt::format("checkpoint {}: vocabularies {} and {} leave no symbols after the {} special tokens",
                                  path, vocab, other, kFirstSymbol));
  info.model.set_pad_id(kPad);
  info.task.vocab = vocab;
  auto task = m.find("task");
  if (task == m.end()) throw FormatError("checkpoint " + path + ": metadata has no 'task'");
  try {
    info.task.task = parse_task(task->second);
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + path + ": " + e.what());
  }
  info.task.min_len = metadata_int(m, "task.min_len", path, 1, info.model.max_positions());
  info.task.max_len = metadata_int(m, "task.max_len", path, info.task.min_len, info.model.max_positions());
  info.step = metadata_int(m, "step", path, 0, int64_t{1} << 40);
  return info;
}

Decoder::Decoder(const std::string& checkpoint) {
  load(checkpoint, "seq2seq", "train_tasks", [&](const train::InferenceCheckpoint& c) {
    info_ = read_checkpoint_info(c.metadata, checkpoint);
    double present = 0;
    for (auto& [k, v] : c.weights) present += static_cast<double>(v.numel());
    const double needed = info_.model.parameter_count();
    if (needed != present)
      throw FormatError(fmt::format("checkpoint {}: its configuration ({}) has {:.0f} parameters but the file holds "
                                    "{:.0f} model values",
                                    checkpoint, summary(info_.model), needed, present));
    return info_.model;
  });
}

std::vector<int64_t> Decoder::parse(const std::string& line) const {
  std::istringstream in(line);
  std::vector<int64_t> ids;
  std::string tok;
  const int64_t vocab = info_.model.src_vocab();
  while (in >> tok) {
    const int64_t v = parse_whole_number(tok).value_or(-1);
    if (v < kFirstSymbol || v >= vocab)
      throw std::invalid_argument(
          fmt::format("{} is not a symbol id: symbols are {}..{}", quote_text(tok), kFirstSymbol, vocab - 1));
    ids.push_back(v);
  }
  if (static_cast<int64_t>(ids.size()) > info_.model.max_positions())
    throw std::invalid_argument(fmt::format("{} tokens: the model has positions for at most {}", ids.size(),
                                            info_.model.max_positions()));
  return ids;
}

std::string Decoder::length_warning(const std::vector<int64_t>& src) const {
  const int64_t n = static_cast<int64_t>(src.size());
  if (n <= info_.task.max_len) return "";
  return fmt::format("{} tokens, longer than the {}..{} the model was trained on: expect wrong output", n,
                     info_.task.min_len, info_.task.max_len);
}

}  // namespace xg::seq2seq
