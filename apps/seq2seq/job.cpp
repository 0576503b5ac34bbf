#include "apps/seq2seq/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/autograd.h"
#include "distributed/dist.h"

namespace xg::seq2seq {

namespace {

// Salt of the held-out set's generator: training never sees its draws.
constexpr uint64_t kEvalSeedSalt = 0x5eed5eedULL;

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// The run's model configuration: the chosen family's, with the task's vocabulary.
models::Seq2SeqConfig model_config(const TaskJobOptions& o) {
  models::Seq2SeqConfig c;
  c.kind = o.model_kind;
  c.transformer = o.model;
  c.rnn = o.rnn;
  c.set_vocab(o.task.vocab, kPad);
  c.transformer.max_len = std::max<int64_t>(c.transformer.max_len, o.task.max_len + 2);
  c.transformer.seed = c.rnn.seed = o.seed;
  return c;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

void TaskJobOptions::validate() const {
  task.validate();
  check(batch_size >= 1 && batch_size <= (1 << 20), fmt::format("batch_size {}: expected 1..{}", batch_size, 1 << 20));
  train::check_batch_per_process(batch_size, "example");
  check(eval_size >= 1 && eval_size <= (1 << 24), fmt::format("eval_size {}: expected 1..{}", eval_size, 1 << 24));
  check(std::isfinite(label_smoothing) && label_smoothing >= 0 && label_smoothing <= 0.999,
        fmt::format("label_smoothing {}: expected a finite number from 0 to 0.999", label_smoothing));
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

TaskJob::TaskJob(const TaskJobOptions& o) : opts_(o), data_gen_(o.seed) {
  opts_.validate();
  const models::Seq2SeqConfig c = model_config(opts_);
  opts_.model = c.transformer;
  opts_.rnn = c.rnn;
  model_ = models::make_seq2seq(c);
  Generator eval_gen(opts_.seed ^ kEvalSeedSalt);
  for (int64_t i = 0; i < opts_.eval_size; ++i) eval_set_.push_back(sample(opts_.task, eval_gen));
}

std::string TaskJob::describe() {
  return fmt::format("task={} vocab={} len={}..{} batch {} | {}", task_name(opts_.task.task), opts_.task.vocab,
                     opts_.task.min_len, opts_.task.max_len, opts_.batch_size, model_->describe());
}

train::StepLoss TaskJob::loss(const train::Shard& shard) {
  // The same global batch on every process (one data generator, the same seed); each keeps its rows.
  std::vector<Example> ex;
  ex.reserve(static_cast<size_t>(opts_.batch_size));
  for (int64_t i = 0; i < opts_.batch_size; ++i) ex.push_back(sample(opts_.task, data_gen_));
  int64_t all_tokens = 0;  // target tokens of the whole batch: each example's symbols and its EOS
  for (const Example& e : ex) all_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  ex = std::vector<Example>(ex.begin() + shard.begin(opts_.batch_size), ex.begin() + shard.end(opts_.batch_size));
  const TrainBatch b = make_batch(ex);
  return {model_->loss(b, opts_.label_smoothing), b.target_tokens, all_tokens};
}

EvalResult TaskJob::evaluate_all(int64_t n_samples) {
  return seq2seq::evaluate(*model_, eval_set_, std::max<int64_t>(opts_.batch_size, 100), n_samples);
}

train::Evaluation TaskJob::evaluate(train::EvalStage stage, int64_t step) {
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

std::string TaskJob::final_line(const train::RunSummary& r) const {
  auto value = [&](const char* name) { return r.final.metric(name); };
  return fmt::format("task={} steps={} exact_match={:.3f} token_acc={:.3f} seconds={:.1f}", task_name(opts_.task.task),
                     r.steps, value("exact_match"), value("token_acc"), r.seconds);
}

Metadata TaskJob::identity() const {
  Metadata m = model_->to_metadata();
  m["task"] = task_name(opts_.task.task);
  m["task.min_len"] = std::to_string(opts_.task.min_len);
  m["task.max_len"] = std::to_string(opts_.task.max_len);
  return m;
}

Metadata TaskJob::state() const { return {{"data_gen", data_gen_.state()}}; }

void TaskJob::set_state(const Metadata& meta, const std::string& path) {
  auto it = meta.find("data_gen");
  if (it == meta.end()) throw FormatError("checkpoint " + path + ": metadata has no 'data_gen'");
  Generator g;
  g.set_state(it->second);
  data_gen_ = g;
}

CheckpointInfo read_checkpoint_info(const Metadata& m, const std::string& path) {
  CheckpointInfo info;
  info.model = models::Seq2SeqConfig::from_metadata(m, path);
  const int64_t vocab = info.model.src_vocab();
  const int64_t other = info.model.kind == "rnn" ? info.model.rnn.tgt_vocab : info.model.transformer.tgt_vocab;
  if (vocab <= kFirstSymbol || other <= kFirstSymbol)
    throw FormatError(fmt::format("checkpoint {}: vocabularies {} and {} leave no symbols after the {} special tokens",
                                  path, vocab, other, kFirstSymbol));
  info.model.transformer.pad_id = info.model.rnn.pad_id = kPad;
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

}  // namespace xg::seq2seq
