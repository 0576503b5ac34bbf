#include "train/trainer.h"

#include "train/detail/checkpoint_io.h"
#include "train/detail/step_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/serialize.h"

namespace xg::train {

namespace {

std::unique_ptr<optim::Schedule> make_schedule(const TrainOptions& o) {
  if (o.schedule == "noam") return std::make_unique<optim::Noam>(o.model.d_model, o.warmup, o.lr);
  if (o.schedule == "constant") return std::make_unique<optim::Constant>(o.lr);
  if (o.schedule == "warmup_linear") return std::make_unique<optim::WarmupLinearDecay>(o.lr, o.warmup, o.steps);
  // nanoGPT's recipe: down to a tenth of the peak at the last step.
  if (o.schedule == "warmup_cosine") return std::make_unique<optim::WarmupCosine>(o.lr, o.warmup, o.steps, o.lr / 10);
  throw std::invalid_argument("schedule '" + o.schedule + "' is not one of noam, constant, warmup_linear, warmup_cosine");
}

models::TransformerConfig with_vocab(models::TransformerConfig m, const TaskConfig& t) {
  m.src_vocab = m.tgt_vocab = t.vocab;
  m.pad_id = kPad;
  m.max_len = std::max<int64_t>(m.max_len, t.max_len + 2);
  return m;
}

// What must be the same to continue a run: the model and the task. Written
// into every checkpoint's metadata; load() compares key by key.
std::map<std::string, std::string> identity_meta(const models::TransformerConfig& c, const TaskConfig& t) {
  return {{"cfg.src_vocab", std::to_string(c.src_vocab)}, {"cfg.tgt_vocab", std::to_string(c.tgt_vocab)},
          {"cfg.layers", std::to_string(c.layers)},       {"cfg.d_model", std::to_string(c.d_model)},
          {"cfg.heads", std::to_string(c.heads)},         {"cfg.d_ff", std::to_string(c.d_ff)},
          {"cfg.max_len", std::to_string(c.max_len)},     {"cfg.pre_norm", std::to_string(c.pre_norm)},
          {"cfg.tie_weights", std::to_string(c.tie_weights)},
          {"task", task_name(t.task)},                    {"task.min_len", std::to_string(t.min_len)},
          {"task.max_len", std::to_string(t.max_len)}};
}

}  // namespace

// A metadata integer (parse_whole_number) within [lo, hi].
int64_t meta_int(const std::map<std::string, std::string>& m, const std::string& key, const std::string& path,
                 int64_t lo, int64_t hi) {
  auto it = m.find(key);
  if (it == m.end()) throw FormatError("checkpoint " + path + ": metadata has no '" + key + "'");
  const std::optional<int64_t> x = parse_whole_number(it->second);
  if (!x || *x < lo || *x > hi)
    throw FormatError("checkpoint " + path + ": metadata '" + key + "' is '" + it->second +
                      "', expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return *x;
}

namespace {

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

}  // namespace

std::optional<int64_t> parse_whole_number(const std::string& s) {
  const size_t sign = !s.empty() && s[0] == '-';
  const size_t digits = s.size() - sign;
  if (digits == 0 || digits > 18 || s.find_first_not_of("0123456789", sign) != std::string::npos) return std::nullopt;
  return std::stoll(s);
}

void TrainOptions::validate() const {
  task.validate();
  auto range = [](const char* name, int64_t v, int64_t lo, int64_t hi) {
    check(v >= lo && v <= hi, std::string(name) + " " + std::to_string(v) + ": expected " + std::to_string(lo) +
                                  ".." + std::to_string(hi));
  };
  auto finite = [](const char* name, double v, double lo, double hi) {
    check(std::isfinite(v) && v >= lo && v <= hi,
          std::string(name) + " " + std::to_string(v) + ": expected a finite number from " + std::to_string(lo) +
              " to " + std::to_string(hi));
  };
  range("batch_size", batch_size, 1, 1 << 20);
  check(batch_size >= dist::world_size(),
        "batch_size " + std::to_string(batch_size) + ": expected at least one example per process (" +
            std::to_string(dist::world_size()) + " processes)");
  range("steps", steps, 1, int64_t{1} << 40);
  range("warmup", warmup, 0, int64_t{1} << 40);
  range("eval_every", eval_every, 1, int64_t{1} << 40);
  range("eval_size", eval_size, 1, 1 << 24);
  range("checkpoint_every", checkpoint_every, 0, int64_t{1} << 40);
  finite("target_exact_match", target_exact_match, 0, 1);
  finite("lr", lr, 0, 1e30);
  finite("label_smoothing", label_smoothing, 0, 0.999);
  check(std::isfinite(clip_norm), "clip_norm " + std::to_string(clip_norm) + ": expected a finite number (<= 0: off)");
  check(schedule == "noam" || schedule == "constant" || schedule == "warmup_linear" || schedule == "warmup_cosine",
        "schedule '" + schedule + "' is not one of noam, constant, warmup_linear, warmup_cosine");
  check(!resume || !checkpoint.empty(), "resume needs a checkpoint path");
  const models::TransformerConfig full = with_vocab(model, task);
  full.validate();
  check_fits_in_memory(full);
}

Trainer::Trainer(const TrainOptions& opts) : opts_(opts), data_gen_(opts.seed) {
  opts_.validate();
  opts_.model = with_vocab(opts_.model, opts_.task);
  opts_.model.seed = opts_.seed;
  model_ = std::make_shared<models::Transformer>(opts_.model);
  optim::AdamOptions ao;
  ao.lr = 0;  // set by the schedule each step
  ao.beta1 = 0.9;
  ao.beta2 = 0.98;
  ao.eps = 1e-9;
  opt_ = std::make_unique<optim::Adam>(model_->parameters(), ao);
  schedule_ = make_schedule(opts_);
  if (dist::world_size() > 1) {
    ddp_ = std::make_unique<dist::DataParallel>(*model_);
    if (dist::rank() > 0) model_->dropout_generator() = Generator(rank_seed(opts_.seed, dist::rank(), 0));
  }
  // The held-out set comes from its own generator: training never sees its draws.
  Generator eval_gen(opts_.seed ^ 0x5eed5eedULL);
  for (int64_t i = 0; i < opts_.eval_size; ++i) eval_set_.push_back(sample(opts_.task, eval_gen));
}

double Trainer::current_lr() const { return schedule_->lr(std::max<int64_t>(step_, 1)); }

uint64_t rank_seed(uint64_t seed, int rank, int64_t step) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(rank) + 1) + (static_cast<uint64_t>(step) << 20);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Trainer::step() {
  // The same global batch on every process (one data generator, the same
  // seed); each keeps its slice.
  std::vector<Example> ex;
  ex.reserve(opts_.batch_size);
  for (int64_t i = 0; i < opts_.batch_size; ++i) ex.push_back(sample(opts_.task, data_gen_));
  const int world = dist::world_size(), rank = dist::rank();
  int64_t all_tokens = 0;  // target tokens of the whole batch: each example's symbols and its EOS
  for (const Example& e : ex) all_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  if (world > 1) {
    const int64_t lo = opts_.batch_size * rank / world, hi = opts_.batch_size * (rank + 1) / world;
    ex = std::vector<Example>(ex.begin() + lo, ex.begin() + hi);
  }
  TrainBatch b = make_batch(ex);
  last_tokens_ = all_tokens;
  // This process's share of the batch's target tokens, times world (1 alone).
  const double weight = static_cast<double>(b.target_tokens) * world / static_cast<double>(all_tokens);
  model_->train();
  opt_->zero_grad();
  DetectAnomalyGuard anomaly(opts_.detect_anomaly);
  Tensor loss;
  {
    Autocast cast(opts_.precision);  // forward and loss only, as torch.autocast
    loss = model_->loss(b.src, b.tgt_in, b.tgt_out, opts_.label_smoothing);
    if (world > 1) loss = loss * weight;
  }
  // The batch's loss: the same value, and so the same decisions, everywhere.
  const double value = world > 1 ? dist::allreduce(loss.item(), dist::ReduceOp::mean) : loss.item();
  // A non-finite loss or gradient stops here, before the optimiser step: the
  // parameters stay those after step `step_`, and nothing non-finite is saved.
  const int64_t at = step_ + 1;
  const std::string hint = opts_.detect_anomaly ? "" : " (run with --detect-anomaly to find the op that made it)";
  detail::check_loss(value, at, hint);
  loss.backward();
  if (ddp_) ddp_->wait();  // the gradients of the whole batch, on every process
  detail::clip_or_stop(model_->named_parameters(), opts_.clip_norm, at, hint);
  ++step_;
  opt_->set_lr(schedule_->lr(step_));
  opt_->step();
  return value;
}

EvalResult Trainer::evaluate(int64_t n_samples) {
  return train::evaluate(*model_, eval_set_, std::max<int64_t>(opts_.batch_size, 100), n_samples);
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, Tensor> all;
  for (auto& [k, v] : model_->state_dict()) all["model." + k] = v;
  for (auto& [k, v] : opt_->state_dict()) all["optim." + k] = v;
  auto meta = identity_meta(opts_.model, opts_.task);
  meta["step"] = std::to_string(step_);
  meta["data_gen"] = data_gen_.state();
  meta["dropout_gen"] = model_->dropout_generator().state();
  meta["schedule"] = opts_.schedule;
  save_tensors(path, all, meta);
}

void Trainer::load(const std::string& path) {
  std::map<std::string, std::string> meta;
  auto all = load_tensors(path, &meta);
  // Only the keys that differ, each with both values.
  auto mine = identity_meta(opts_.model, opts_.task);
  mine["schedule"] = opts_.schedule;
  detail::check_same_run(mine, meta, path);
  const detail::SplitState state = detail::split_state(all, path);
  const int64_t step = meta_int(meta, "step", path, 0, int64_t{1} << 40);
  if (!meta.count("data_gen") || !meta.count("dropout_gen"))
    throw FormatError("checkpoint " + path + ": metadata lacks the generator states");
  // Everything that can fail runs before the first change to this trainer.
  Generator data_gen, dropout_gen;
  data_gen.set_state(meta.at("data_gen"));
  dropout_gen.set_state(meta.at("dropout_gen"));
  model_->load_state_dict(state.model);
  opt_->load_state_dict(state.optim);
  step_ = step;
  data_gen_ = data_gen;
  model_->dropout_generator() = dist::rank() > 0 ? Generator(rank_seed(opts_.seed, dist::rank(), step)) : dropout_gen;
}

CheckpointInfo read_checkpoint_info(const std::map<std::string, std::string>& m, const std::string& path) {
  CheckpointInfo info;
  models::TransformerConfig& c = info.model;
  c.src_vocab = meta_int(m, "cfg.src_vocab", path, kFirstSymbol + 1, ModelLimits::vocab);
  c.tgt_vocab = meta_int(m, "cfg.tgt_vocab", path, kFirstSymbol + 1, ModelLimits::vocab);
  c.layers = meta_int(m, "cfg.layers", path, 1, ModelLimits::layers);
  c.d_model = meta_int(m, "cfg.d_model", path, 1, ModelLimits::d_model);
  c.heads = meta_int(m, "cfg.heads", path, 1, ModelLimits::heads);
  c.d_ff = meta_int(m, "cfg.d_ff", path, 1, ModelLimits::d_ff);
  c.max_len = meta_int(m, "cfg.max_len", path, 1, ModelLimits::max_len);
  c.pre_norm = meta_int(m, "cfg.pre_norm", path, 0, 1) != 0;
  c.tie_weights = meta_int(m, "cfg.tie_weights", path, 0, 1) != 0;
  c.pad_id = kPad;
  c.dropout = 0;
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + path + ": " + e.what());
  }
  info.task.vocab = c.src_vocab;
  auto task = m.find("task");
  if (task == m.end()) throw FormatError("checkpoint " + path + ": metadata has no 'task'");
  try {
    info.task.task = parse_task(task->second);
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + path + ": " + e.what());
  }
  info.task.min_len = meta_int(m, "task.min_len", path, 1, c.max_len);
  info.task.max_len = meta_int(m, "task.max_len", path, info.task.min_len, c.max_len);
  info.step = meta_int(m, "step", path, 0, int64_t{1} << 40);
  return info;
}

void check_fits_in_memory(const models::TransformerConfig& c) {
  const double params = c.parameter_count();
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (16 * params > ram)
    throw std::invalid_argument("the model's " + std::to_string(static_cast<int64_t>(params)) + " parameters need " +
                                std::to_string(static_cast<int64_t>(16 * params / 1e9)) +
                                " GB with their gradients and Adam state, more than this machine's " +
                                std::to_string(static_cast<int64_t>(ram / 1e9)) + " GB");
}

void check_writable(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw std::runtime_error("checkpoint " + path + " is a directory, not a file");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string probe = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    throw std::runtime_error("checkpoint " + path + ": cannot create a file in " + dir + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace xg::train
