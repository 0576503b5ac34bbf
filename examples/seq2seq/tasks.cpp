#include "examples/seq2seq/tasks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/serialize.h"

namespace xg::seq2seq {

Task parse_task(const std::string& s) {
  if (s == "copy") return Task::copy;
  if (s == "reverse") return Task::reverse;
  throw std::invalid_argument("unknown task '" + s + "' (expected copy or reverse)");
}

const char* task_name(Task t) { return t == Task::copy ? "copy" : "reverse"; }

void TaskConfig::validate() const {
  if (vocab <= kFirstSymbol)
    throw std::invalid_argument("task: vocab " + std::to_string(vocab) + " leaves no symbols after the " +
                                std::to_string(kFirstSymbol) + " special tokens");
  if (min_len < 1 || max_len < min_len)
    throw std::invalid_argument("task: need 1 <= min_len <= max_len, got " + std::to_string(min_len) + " and " +
                                std::to_string(max_len));
}

Example sample(const TaskConfig& cfg, Generator& gen) {
  const int64_t span = cfg.max_len - cfg.min_len + 1;
  const int64_t len = cfg.min_len + static_cast<int64_t>(gen.engine()() % static_cast<uint64_t>(span));
  Example e;
  for (int64_t i = 0; i < len; ++i)
    e.src.push_back(kFirstSymbol + static_cast<int64_t>(gen.engine()() % static_cast<uint64_t>(cfg.vocab - kFirstSymbol)));
  e.tgt = e.src;
  if (cfg.task == Task::reverse) std::reverse(e.tgt.begin(), e.tgt.end());
  return e;
}

TrainBatch make_batch(const std::vector<Example>& examples) {
  const int64_t b = static_cast<int64_t>(examples.size());
  size_t s = 1, t = 1;
  for (const auto& e : examples) s = std::max(s, e.src.size()), t = std::max(t, e.tgt.size() + 1);
  TrainBatch out;
  out.src = {std::vector<int64_t>(b * s, kPad), b, static_cast<int64_t>(s)};
  out.tgt_in = {std::vector<int64_t>(b * t, kPad), b, static_cast<int64_t>(t)};
  out.tgt_out = out.tgt_in;
  for (int64_t r = 0; r < b; ++r) {
    const auto& e = examples[r];
    std::copy(e.src.begin(), e.src.end(), out.src.ids.begin() + r * s);
    out.tgt_in.ids[r * t] = kBos;
    std::copy(e.tgt.begin(), e.tgt.end(), out.tgt_in.ids.begin() + r * t + 1);
    std::copy(e.tgt.begin(), e.tgt.end(), out.tgt_out.ids.begin() + r * t);
    out.tgt_out.ids[r * t + e.tgt.size()] = kEos;
    out.target_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  }
  return out;
}

EvalResult evaluate(models::Transformer& model, const std::vector<Example>& set, int64_t batch_size,
                    int64_t n_samples) {
  EvalResult r;
  int64_t exact = 0, right = 0, positions = 0;
  for (size_t at = 0; at < set.size(); at += batch_size) {
    std::vector<Example> part(set.begin() + at, set.begin() + std::min(set.size(), at + batch_size));
    TrainBatch b = make_batch(part);
    int64_t longest = 0;
    for (const auto& e : part) longest = std::max<int64_t>(longest, e.tgt.size());
    auto outs = models::greedy_decode(model, b.src, kBos, kEos, longest + 5);
    for (size_t i = 0; i < part.size(); ++i) {
      const auto& want = part[i].tgt;
      const auto& got = outs[i];
      exact += got == want;
      // positions 0..len(want): the symbols, then EOS (got ends where EOS was emitted)
      for (size_t p = 0; p <= want.size(); ++p) {
        const int64_t w = p < want.size() ? want[p] : kEos;
        const int64_t g = p < got.size() ? got[p] : (p == got.size() ? kEos : -1);
        right += w == g;
      }
      positions += static_cast<int64_t>(want.size()) + 1;
      if (static_cast<int64_t>(r.samples.size()) < n_samples) r.samples.emplace_back(part[i], got);
    }
  }
  r.exact_match = set.empty() ? 0 : static_cast<double>(exact) / set.size();
  r.token_acc = positions ? static_cast<double>(right) / positions : 0;
  return r;
}

// ---- Trainer ------------------------------------------------------------------

namespace {

std::unique_ptr<optim::Schedule> make_schedule(const TrainOptions& o) {
  if (o.schedule == "noam") return std::make_unique<optim::Noam>(o.model.d_model, o.warmup, o.lr);
  if (o.schedule == "constant") return std::make_unique<optim::Constant>(o.lr);
  if (o.schedule == "warmup_linear") return std::make_unique<optim::WarmupLinearDecay>(o.lr, o.warmup, o.steps);
  throw std::invalid_argument("unknown schedule '" + o.schedule + "' (expected noam, constant or warmup_linear)");
}

models::TransformerConfig with_vocab(models::TransformerConfig m, const TaskConfig& t) {
  m.src_vocab = m.tgt_vocab = t.vocab;
  m.pad_id = kPad;
  m.max_len = std::max<int64_t>(m.max_len, t.max_len + 2);
  return m;
}

// The model configuration, as checkpoint metadata.
std::map<std::string, std::string> config_meta(const models::TransformerConfig& c) {
  return {{"cfg.src_vocab", std::to_string(c.src_vocab)}, {"cfg.tgt_vocab", std::to_string(c.tgt_vocab)},
          {"cfg.layers", std::to_string(c.layers)},       {"cfg.d_model", std::to_string(c.d_model)},
          {"cfg.heads", std::to_string(c.heads)},         {"cfg.d_ff", std::to_string(c.d_ff)},
          {"cfg.max_len", std::to_string(c.max_len)},     {"cfg.pre_norm", std::to_string(c.pre_norm)},
          {"cfg.tie_weights", std::to_string(c.tie_weights)}};
}

int64_t meta_int(const std::map<std::string, std::string>& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) throw FormatError("checkpoint " + path + ": metadata has no '" + key + "'");
  try {
    size_t used = 0;
    int64_t v = std::stoll(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument(it->second);
    return v;
  } catch (const std::exception&) {
    throw FormatError("checkpoint " + path + ": metadata '" + key + "' is not an integer: '" + it->second + "'");
  }
}

models::TransformerConfig config_from_meta(const std::map<std::string, std::string>& m, const std::string& path) {
  models::TransformerConfig c;
  c.src_vocab = meta_int(m, "cfg.src_vocab", path);
  c.tgt_vocab = meta_int(m, "cfg.tgt_vocab", path);
  c.layers = meta_int(m, "cfg.layers", path);
  c.d_model = meta_int(m, "cfg.d_model", path);
  c.heads = meta_int(m, "cfg.heads", path);
  c.d_ff = meta_int(m, "cfg.d_ff", path);
  c.max_len = meta_int(m, "cfg.max_len", path);
  c.pre_norm = meta_int(m, "cfg.pre_norm", path) != 0;
  c.tie_weights = meta_int(m, "cfg.tie_weights", path) != 0;
  c.pad_id = kPad;
  c.dropout = 0;
  return c;
}

}  // namespace

Trainer::Trainer(const TrainOptions& opts) : opts_(opts), data_gen_(opts.seed) {
  opts_.task.validate();
  if (opts_.batch_size < 1) throw std::invalid_argument("batch_size must be positive");
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
  // The held-out set comes from its own generator: training never sees its draws.
  Generator eval_gen(opts_.seed ^ 0x5eed5eedULL);
  for (int64_t i = 0; i < opts_.eval_size; ++i) eval_set_.push_back(sample(opts_.task, eval_gen));
}

double Trainer::current_lr() const { return schedule_->lr(std::max<int64_t>(step_, 1)); }

double Trainer::step() {
  std::vector<Example> ex;
  ex.reserve(opts_.batch_size);
  for (int64_t i = 0; i < opts_.batch_size; ++i) ex.push_back(sample(opts_.task, data_gen_));
  TrainBatch b = make_batch(ex);
  last_tokens_ = b.target_tokens;
  model_->train();
  opt_->zero_grad();
  DetectAnomalyGuard anomaly(opts_.detect_anomaly);
  Tensor loss;
  {
    Autocast cast(opts_.precision);  // forward and loss only, as torch.autocast
    loss = model_->loss(b.src, b.tgt_in, b.tgt_out, opts_.label_smoothing);
  }
  // A non-finite loss or gradient stops here, before the optimiser step: the
  // parameters stay those after step `step_`, and nothing non-finite is saved.
  const int64_t at = step_ + 1;
  const std::string hint = opts_.detect_anomaly ? "" : " (run with --detect-anomaly to find the op that made it)";
  if (!std::isfinite(loss.item()))
    throw optim::NonFiniteError("step " + std::to_string(at) + ": the loss is " + std::to_string(loss.item()) +
                                "; stopped before updating the parameters" + hint);
  loss.backward();
  // Clipping leaves non-finite gradients as they are and returns the norm.
  const double norm = opts_.clip_norm > 0 ? optim::clip_grad_norm(model_->parameters(), opts_.clip_norm, false)
                                          : optim::grad_norm(model_->parameters());
  if (!std::isfinite(norm)) {
    std::string who = "?";
    for (const auto& [name, p] : model_->named_parameters())
      if (p.grad().defined() && first_nonfinite(p.grad()) >= 0) {
        who = name;
        break;
      }
    throw optim::NonFiniteError("step " + std::to_string(at) + ": the gradient norm is " + std::to_string(norm) +
                                " (first non-finite gradient: " + who +
                                "); stopped before updating the parameters" + hint);
  }
  ++step_;
  opt_->set_lr(schedule_->lr(step_));
  opt_->step();
  return loss.item();
}

EvalResult Trainer::evaluate(int64_t n_samples) {
  return seq2seq::evaluate(*model_, eval_set_, std::max<int64_t>(opts_.batch_size, 100), n_samples);
}

void Trainer::save(const std::string& path) const {
  std::map<std::string, Tensor> all;
  for (auto& [k, v] : model_->state_dict()) all["model." + k] = v;
  for (auto& [k, v] : opt_->state_dict()) all["optim." + k] = v;
  auto meta = config_meta(opts_.model);
  meta["step"] = std::to_string(step_);
  meta["data_gen"] = data_gen_.state();
  meta["dropout_gen"] = model_->dropout_generator().state();
  meta["task"] = task_name(opts_.task.task);
  meta["schedule"] = opts_.schedule;
  save_tensors(path, all, meta);
}

void Trainer::load(const std::string& path) {
  std::map<std::string, std::string> meta;
  auto all = load_tensors(path, &meta);
  models::TransformerConfig saved = config_from_meta(meta, path);
  const auto& c = opts_.model;
  if (saved.src_vocab != c.src_vocab || saved.layers != c.layers || saved.d_model != c.d_model ||
      saved.heads != c.heads || saved.d_ff != c.d_ff || saved.pre_norm != c.pre_norm ||
      saved.tie_weights != c.tie_weights)
    throw std::invalid_argument("checkpoint " + path + " holds a different model (d_model " +
                                std::to_string(saved.d_model) + ", layers " + std::to_string(saved.layers) +
                                ", vocab " + std::to_string(saved.src_vocab) + ") than the one configured (d_model " +
                                std::to_string(c.d_model) + ", layers " + std::to_string(c.layers) + ", vocab " +
                                std::to_string(c.src_vocab) + ")");
  std::map<std::string, Tensor> model_state, optim_state;
  for (auto& [k, v] : all) {
    if (k.rfind("model.", 0) == 0) model_state[k.substr(6)] = v;
    else if (k.rfind("optim.", 0) == 0) optim_state[k.substr(6)] = v;
    else throw FormatError("checkpoint " + path + ": unexpected tensor '" + k + "'");
  }
  if (meta.count("schedule") && meta.at("schedule") != opts_.schedule)
    throw std::invalid_argument("checkpoint " + path + " was trained with the " + meta.at("schedule") +
                                " schedule, not " + opts_.schedule);
  model_->load_state_dict(model_state);
  opt_->load_state_dict(optim_state);
  step_ = meta_int(meta, "step", path);
  if (!meta.count("data_gen") || !meta.count("dropout_gen"))
    throw FormatError("checkpoint " + path + ": metadata lacks the generator states");
  data_gen_.set_state(meta.at("data_gen"));
  model_->dropout_generator().set_state(meta.at("dropout_gen"));
}

models::TransformerConfig checkpoint_config(const std::string& path) {
  std::map<std::string, std::string> meta;
  load_tensors(path, &meta);
  return config_from_meta(meta, path);
}

}  // namespace xg::seq2seq
