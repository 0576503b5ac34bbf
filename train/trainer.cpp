#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/require.h"
#include "engine/gemm.h"
#include "train/checkpoint.h"
#include "data/hash.h"
#include "distributed/zero.h"
#include "train/detail/step_checks.h"

namespace xg::train {

namespace {

bool schedule_uses_steps(const std::string& s) { return s == "warmup_linear" || s == "warmup_cosine"; }

}  // namespace

std::string option_name(const std::string& field) {
  if (field == "clip_norm") return "--clip";
  std::string o = "--" + field;
  std::replace(o.begin(), o.end(), '_', '-');
  return o;
}

void TrainOptions::validate(bool option_names) const {
  // A field as the messages name it: "warmup", or the program's "--warmup".
  auto n = [option_names](const char* field) { return option_names ? option_name(field) : std::string(field); };
  auto range = [&](const char* name, int64_t v, int64_t lo, int64_t hi) {
    require(v >= lo && v <= hi, fmt::format("{} {}: expected {}..{}", n(name), v, lo, hi));
  };
  auto finite = [&](const char* name, double v, double lo, double hi) {
    require(std::isfinite(v) && v >= lo && v <= hi,
          fmt::format("{} {}: expected a finite number from {} to {}", n(name), v, lo, hi));
  };
  range("steps", steps, 1, int64_t{1} << 40);
  range("warmup", warmup, 0, int64_t{1} << 40);
  if (schedule_uses_steps(schedule))
    require(warmup < steps, fmt::format("{} {} must be below {} {}", n("warmup"), warmup, n("steps"), steps));
  if (schedule == "noam")
    require(warmup >= 1, fmt::format("{} {}: the noam schedule needs at least 1 warm-up step", n("warmup"), warmup));
  finite("time_limit", time_limit, 0, 1e12);
  require(std::isfinite(lr) && lr > 0 && lr <= 1e30, fmt::format("{} {}: expected a number above 0, at most 1e+30", n("lr"), lr));
  finite("beta1", beta1, 0, 0.999999);
  finite("beta2", beta2, 0, 0.999999);
  require(std::isfinite(eps) && eps > 0 && eps <= 1, fmt::format("{} {}: expected a number above 0, at most 1", n("eps"), eps));
  finite("weight_decay", weight_decay, 0, 10);
  finite("bucket_mb", bucket_mb, 1.0 / 1024, 4096);
  require(std::isfinite(clip_norm), fmt::format("{} {}: expected a finite number (<= 0: off)", n("clip_norm"), clip_norm));
  finite("average", average, 0, 0.99);
  finite("min_lr_ratio", min_lr_ratio, 0, 1);
  require(schedule == "warmup_cosine" || min_lr_ratio == kMinLrRatio,
          fmt::format("{} {:g} applies to the warmup_cosine schedule only, and {} is {}", n("min_lr_ratio"),
                      min_lr_ratio, n("schedule"), schedule));
  require(schedule == "noam" || schedule == "constant" || schedule == "warmup_linear" || schedule == "warmup_cosine",
        n("schedule") + " '" + schedule + "' is not one of noam, constant, warmup_linear, warmup_cosine");
  require(precision != Precision::bf16 || engine::bf16_refusal().empty(), n("precision") + " bf16: " + engine::bf16_refusal());
}

Trainer::Trainer(Job& job, const TrainOptions& o) : job_(job), opts_(o) {
  opts_.validate();
  params_ = job_.model().named_parameters();
  optim::AdamOptions a;
  a.lr = 0;  // set by the schedule each step
  a.beta1 = opts_.beta1;
  a.beta2 = opts_.beta2;
  a.eps = opts_.eps;
  a.weight_decay = opts_.weight_decay;
  const bool decay = opts_.weight_decay > 0;
  auto make = [a, decay](std::vector<optim::ParamGroup> groups) -> std::unique_ptr<optim::Optimizer> {
    if (decay) return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamWOptions(a));
    return std::make_unique<optim::Adam>(std::move(groups), a);
  };
  auto groups = decay ? optim::weight_decay_groups(params_, opts_.weight_decay)
                      : optim::one_group(job_.model().parameters());
  if (sharded())
    opt_ = std::make_unique<dist::ZeroRedundancyOptimizer>(std::move(groups), 0.0, make);
  else
    opt_ = make(std::move(groups));
  const double lr = opts_.lr;
  if (opts_.schedule == "noam") {
    if (job_.model_width() <= 0) throw std::invalid_argument("schedule noam needs a model width, and this model has none");
    schedule_ = std::make_unique<optim::Noam>(job_.model_width(), opts_.warmup, lr);
  } else if (opts_.schedule == "constant") {
    schedule_ = std::make_unique<optim::Constant>(lr);
  } else if (opts_.schedule == "warmup_linear") {
    schedule_ = std::make_unique<optim::WarmupLinearDecay>(lr, opts_.warmup, opts_.steps);
  } else {  // nanoGPT's recipe: down to a tenth of the peak at the last step, unless min_lr_ratio says otherwise
    schedule_ = std::make_unique<optim::WarmupCosine>(lr, opts_.warmup, opts_.steps, lr * opts_.min_lr_ratio);
  }
  if (dist::world_size() > 1) {
    dist::DataParallelOptions d;
    d.bf16_exchange = opts_.bf16_exchange;
    d.bucket_bytes = static_cast<int64_t>(opts_.bucket_mb * (1 << 20));
    ddp_ = std::make_unique<dist::DataParallel>(job_.model(), d);
    if (dist::rank() > 0 && job_.dropout_generator())
      *job_.dropout_generator() = Generator(rank_seed(opts_.seed, dist::rank(), 0));
  }
}

uint64_t rank_seed(uint64_t seed, int rank, int64_t step) {
  // splitmix64 adds its increment once more: rank r and step s land r + 1 increments and s << 20 past the seed.
  return data::splitmix64(seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(rank) + (static_cast<uint64_t>(step) << 20));
}

int64_t Trainer::position_at(int64_t step, double seconds) const {
  if (opts_.time_limit <= 0 || !opts_.clock_schedule) return step;
  // The warm-up counts steps whatever the clock: what keeps the first
  // updates small is their number, and a clock-bounded run of many more
  // --steps than it runs would otherwise pass it in a handful of steps.
  const int64_t warm = std::clamp<int64_t>(opts_.warmup, 0, opts_.steps);
  if (step < warm) return step;
  // After it, the rest of the schedule follows the clock (from the run's
  // start) or the steps, whichever is further along.
  const double fraction = std::min(1.0, seconds / opts_.time_limit);
  const double by_time = static_cast<double>(warm) + static_cast<double>(opts_.steps - warm) * fraction;
  return std::max(step, static_cast<int64_t>(by_time));
}

int64_t Trainer::schedule_position() const { return position_at(step_, train_seconds_); }

bool Trainer::timed_out() const {
  // A limit ends the run at the clock; a clock-bounded schedule ends its
  // schedule then too, except within its warm-up, which counts steps.
  return opts_.time_limit > 0 && train_seconds_ >= opts_.time_limit && schedule_position() < opts_.steps;
}

bool Trainer::finished() const { return schedule_position() >= opts_.steps || timed_out(); }

double Trainer::current_lr() const { return schedule_->lr(std::clamp<int64_t>(schedule_position(), 1, opts_.steps)); }

double Trainer::step() {
  if (!last_.empty())
    throw std::logic_error("Trainer::step: the model holds the mean of the weights (use_average()), not the training state");
  const auto t0 = std::chrono::steady_clock::now();
  const Shard shard{dist::rank(), dist::world_size(), step_ + 1};
  nn::Module& model = job_.model();
  model.train();
  opt_->zero_grad();
  DetectAnomalyGuard anomaly(opts_.detect_anomaly);
  StepLoss s;
  {
    Autocast cast(opts_.precision);  // forward and loss only, as torch.autocast
    s = job_.loss(shard);
    if (!s.loss.defined() || s.loss.numel() != 1)
      throw std::logic_error("Job::loss must return a defined one-element loss");
    if (shard.world > 1)  // this process's share of the batch's items, times world
      s.loss = s.loss * (static_cast<double>(s.count) * shard.world / static_cast<double>(std::max<int64_t>(s.global_count, 1)));
  }
  // The batch's loss: the same value, and so the same decisions, everywhere.
  const double value = shard.world > 1 ? dist::allreduce(s.loss.item(), dist::ReduceOp::mean) : s.loss.item();
  const int64_t at = step_ + 1;
  const std::string hint = opts_.detect_anomaly ? "" : " (run with --detect-anomaly to find the op that made it)";
  detail::check_loss(value, at, hint);
  s.loss.backward();
  if (ddp_) ddp_->wait();  // the gradients of the whole batch, on every process
  detail::clip_or_stop(params_, opts_.clip_norm, at, hint);
  step_ = at;
  opt_->set_lr(current_lr());
  opt_->step();
  train_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The clock decides where the schedule is and when the run stops: one clock for every process.
  if (shard.world > 1 && opts_.time_limit > 0) train_seconds_ = dist::allreduce(train_seconds_, dist::ReduceOp::mean);
  last_count_ = s.global_count;
  snapshot_if_due();
  return value;
}

int64_t Trainer::snapshots_due(int64_t position) const {
  // Snapshot k (1..n) is due at position from + k (steps - from) / n: the last at the end of the schedule.
  if (opts_.average <= 0) return 0;
  const int64_t n = TrainOptions::kAverageSnapshots;
  const int64_t from = opts_.steps - static_cast<int64_t>(std::llround(opts_.average * static_cast<double>(opts_.steps)));
  const int64_t at = std::min(position, opts_.steps);
  int64_t due = 0;
  while (due < n && at >= from + (due + 1) * (opts_.steps - from) / n) ++due;
  return due;
}

void Trainer::snapshot_if_due() {
  if (averaged_ >= snapshots_due(schedule_position())) return;  // at most one a step
  NoGradGuard no_grad;
  if (average_.empty())
    for (const auto& [name, p] : params_) average_.push_back(p.detach().clone());
  else  // running mean: m += (p - m) / k
    for (size_t i = 0; i < params_.size(); ++i)
      average_[i].copy_(average_[i] + (params_[i].second.detach() - average_[i]) * (1.0 / static_cast<double>(averaged_ + 1)));
  ++averaged_;
}

void Trainer::use_average() {
  if (averaged_ == 0) throw std::logic_error("Trainer::use_average: no snapshot of the weights has been taken yet");
  if (!last_.empty()) return;
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    last_.push_back(params_[i].second.detach().clone());
    params_[i].second.copy_(average_[i]);
  }
}

Metadata Trainer::identity() const {
  Metadata m = job_.identity();
  m["kind"] = job_.kind();
  m["schedule"] = opts_.schedule;
  m["lr"] = fmt::format("{}", opts_.lr);
  m["warmup"] = std::to_string(opts_.warmup);
  m["weight_decay"] = fmt::format("{}", opts_.weight_decay);
  m["average"] = fmt::format("{}", opts_.average);
  if (opts_.schedule == "warmup_cosine") m["min_lr_ratio"] = fmt::format("{}", opts_.min_lr_ratio);
  if (schedule_uses_steps(opts_.schedule) || opts_.average > 0) m["steps"] = std::to_string(opts_.steps);
  if (opts_.time_limit > 0 && opts_.clock_schedule) m["time_limit"] = fmt::format("{}", opts_.time_limit);
  return m;
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, Tensor> all;
  // Sharded: gathered on rank 0 from every process.
  const auto optim = sharded() ? static_cast<const dist::ZeroRedundancyOptimizer&>(*opt_).consolidate_state_dict(0)
                              : opt_->state_dict();
  if (sharded() && dist::rank() != 0) return;
  for (auto& [k, v] : optim) all["optim." + k] = v;
  for (auto& [k, v] : job_.model().state_dict()) all["model." + k] = v;
  for (size_t i = 0; i < last_.size(); ++i) all["model." + params_[i].first] = last_[i];  // the training state
  for (size_t i = 0; i < average_.size(); ++i) all["average." + params_[i].first] = average_[i];
  Metadata meta = identity();
  for (auto& [k, v] : job_.state()) meta[k] = v;
  meta["step"] = std::to_string(step_);
  meta["train_seconds"] = fmt::format("{:.17g}", train_seconds_);
  meta["averaged"] = std::to_string(averaged_);
  meta["finished"] = finished() ? "1" : "0";  // inference takes the mean of a finished run only
  if (Generator* g = job_.dropout_generator()) meta["dropout_gen"] = g->state();
  save_tensors(path, all, meta);
}

namespace {

// train_seconds of a checkpoint: a finite number of seconds >= 0.
double read_seconds(const Metadata& meta, const std::string& path) {
  if (!meta.count("train_seconds")) throw FormatError("checkpoint " + path + ": metadata has no 'train_seconds'");
  const std::string& t = meta.at("train_seconds");
  char* end = nullptr;
  const double seconds = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0)
    throw FormatError("checkpoint " + path + ": train_seconds '" + t + "' is not a number of seconds >= 0");
  return seconds;
}

// A checkpoint whose model is in an earlier layout of its parameters (one
// that Module::upgrade rewrites) loads for inference, but a run cannot resume
// from it: the optimiser's state and the averages are kept per parameter of
// that layout.
void refuse_earlier_layout(const nn::Module& model, const std::map<std::string, Tensor>& all, const std::string& path) {
  const std::map<std::string, Tensor> today = model.upgrade(all, "model.");
  for (const auto& [name, t] : all)
    if (!today.count(name))
      throw FormatError(fmt::format("checkpoint {} holds the model in an earlier layout of its parameters ({}): it "
                                    "loads for decoding, evaluation and export, but training cannot resume from it "
                                    "(the optimiser's state is kept per parameter of that layout)",
                                    path, name.substr(6)));  // the upgrade renames only model.* keys
}

}  // namespace

std::vector<Tensor> Trainer::take_average(std::map<std::string, Tensor>& all, int64_t averaged,
                                          const std::string& path) const {
  // average.NAME for every parameter once a snapshot is in it, none before.
  std::vector<Tensor> average;
  std::set<std::string> names;
  for (const auto& [name, p] : params_) {
    names.insert("average." + name);
    auto it = all.find("average." + name);
    if (averaged == 0) continue;
    if (it == all.end())
      throw FormatError(fmt::format("checkpoint {}: averaged={} but average.{} is missing", path, averaged, name));
    if (it->second.shape() != p.shape() || it->second.dtype() != p.dtype())
      throw FormatError(fmt::format("checkpoint {}: average.{} does not match the parameter's shape or dtype", path, name));
    average.push_back(it->second);
  }
  for (auto it = all.begin(); it != all.end();) {
    if (it->first.rfind("average.", 0) != 0) {
      ++it;
      continue;
    }
    if (averaged == 0) throw FormatError(fmt::format("checkpoint {}: {} with averaged=0", path, it->first));
    if (!names.count(it->first))
      throw FormatError(fmt::format("checkpoint {}: {} is no parameter of the model", path, it->first));
    it = all.erase(it);
  }
  return average;
}

void Trainer::commit(const Metadata& meta, const SplitState& state, const std::string& path) {
  // The three parts each check all they are given before changing anything,
  // but one can refuse after another has changed: what they held is kept
  // aside and put back, so a load that fails changes nothing.
  const Metadata job_before = job_.state();
  std::map<std::string, Tensor> model_before, optim_before;
  {
    NoGradGuard no_grad;
    for (auto& [k, v] : job_.model().state_dict()) model_before[k] = v.detach().clone();
    for (auto& [k, v] : opt_->state_dict()) optim_before[k] = v.detach().clone();
  }
  try {
    job_.set_state(meta, path);
    job_.model().load_state_dict(state.model);
    opt_->load_state_dict(state.optim);
  } catch (...) {
    job_.set_state(job_before, path);
    job_.model().load_state_dict(model_before);
    opt_->load_state_dict(optim_before);
    throw;
  }
}

void Trainer::load(const std::string& path, bool allow_non_finite) {
  // Read and check everything first: the file, the run's identity, the loop's state.
  Metadata meta;
  auto all = load_checkpoint(path, meta, allow_non_finite);
  // A key the file lacks was added since it was written: the value it meant.
  Metadata theirs = meta;
  for (const auto& [key, value] : job_.identity_defaults()) theirs.emplace(key, value);
  // A cosine whose file lacks min_lr_ratio ended at the default.
  if (opts_.schedule == "warmup_cosine") theirs.emplace("min_lr_ratio", fmt::format("{}", TrainOptions::kMinLrRatio));
  check_same_run(identity(), theirs, path, job_.summarised());
  const int64_t step = metadata_int(meta, "step", path, 0, int64_t{1} << 40);
  const double seconds = read_seconds(meta, path);
  const int64_t averaged = metadata_int(meta, "averaged", path, 0, TrainOptions::kAverageSnapshots);
  const int64_t due = snapshots_due(position_at(step, seconds));
  if (averaged > due)
    throw FormatError(fmt::format("checkpoint {}: averaged={}, more snapshots than the {} due by step {}", path,
                                  averaged, due, step));
  refuse_earlier_layout(job_.model(), all, path);
  std::vector<Tensor> average = take_average(all, averaged, path);
  const SplitState state = split_state(all, path);
  Generator* drop = job_.dropout_generator();
  Generator dropout_gen;
  if (drop) dropout_gen.set_state(metadata_string(meta, "dropout_gen", path));
  // Then change: the parts that can still refuse, then the rest, which cannot.
  commit(meta, state, path);
  step_ = step;
  train_seconds_ = seconds;
  average_ = std::move(average);
  averaged_ = averaged;
  last_.clear();
  if (drop) *drop = dist::rank() > 0 ? Generator(rank_seed(opts_.seed, dist::rank(), step)) : dropout_gen;
}

}  // namespace xg::train
