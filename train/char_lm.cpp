#include "train/char_lm.h"

#include "train/detail/checkpoint_io.h"
#include "train/detail/step_checks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/serialize.h"
#include "train/trainer.h"  // check_writable, meta_int, ModelLimits

namespace xg::train {

CharLMOptions::CharLMOptions() {
  model.layers = 4;
  model.d_model = 128;
  model.heads = 4;
  model.d_ff = 512;
  model.max_len = 128;
  model.dropout = 0.0;
}

void CharLMOptions::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("CharLMOptions: " + what);
  };
  need(batch_size >= 1, fmt::format("batch_size {}: expected at least 1", batch_size));
  need(steps >= 1, fmt::format("steps {}: expected at least 1", steps));
  need(std::isfinite(time_limit) && time_limit >= 0, fmt::format("time_limit {}: expected a number >= 0", time_limit));
  need(std::isfinite(lr) && lr > 0, fmt::format("lr {}: expected a finite number > 0", lr));
  need(warmup >= 0 && warmup < steps, fmt::format("warmup {}: expected 0 to steps - 1 = {}", warmup, steps - 1));
  need(std::isfinite(weight_decay) && weight_decay >= 0,
       fmt::format("weight_decay {}: expected a finite number >= 0", weight_decay));
  need(std::isfinite(clip_norm), fmt::format("clip_norm {}: expected a finite number", clip_norm));
  need(eval_every >= 1, fmt::format("eval_every {}: expected at least 1", eval_every));
  need(eval_chars >= 0, fmt::format("eval_chars {}: expected 0 (all) or more", eval_chars));
  need(train_chars >= 0, fmt::format("train_chars {}: expected 0 (all) or more", train_chars));
  need(checkpoint_every >= 0, fmt::format("checkpoint_every {}: expected 0 or more", checkpoint_every));
  need(!resume || !checkpoint.empty(), "resume needs a checkpoint path");
  models::GPTConfig m = model;
  m.vocab = 1;  // taken from the data
  m.validate();
}

namespace {

std::map<std::string, std::string> config_meta(const models::GPTConfig& c) {
  return {{"cfg.vocab", std::to_string(c.vocab)},       {"cfg.layers", std::to_string(c.layers)},
          {"cfg.d_model", std::to_string(c.d_model)},   {"cfg.heads", std::to_string(c.heads)},
          {"cfg.d_ff", std::to_string(c.d_ff)},         {"cfg.max_len", std::to_string(c.max_len)},
          {"cfg.learned_positions", std::to_string(c.learned_positions)}};
}

// What must match for a run to continue another: the model, the vocabulary,
// and everything that decides the data order and the schedule.
std::map<std::string, std::string> identity_meta(const CharLMOptions& o, const CharVocab& v) {
  auto m = config_meta(o.model);
  m["vocab"] = v.to_string();
  m["seed"] = std::to_string(o.seed);
  m["batch"] = std::to_string(o.batch_size);
  m["steps"] = std::to_string(o.steps);
  m["lr"] = fmt::format("{}", o.lr);
  m["warmup"] = std::to_string(o.warmup);
  m["weight_decay"] = fmt::format("{}", o.weight_decay);
  m["train_chars"] = std::to_string(o.train_chars);
  return m;
}

models::GPTConfig read_config(const std::map<std::string, std::string>& m, const std::string& path) {
  models::GPTConfig c;
  c.vocab = meta_int(m, "cfg.vocab", path, 1, 256);
  c.layers = meta_int(m, "cfg.layers", path, 1, ModelLimits::layers);
  c.d_model = meta_int(m, "cfg.d_model", path, 1, ModelLimits::d_model);
  c.heads = meta_int(m, "cfg.heads", path, 1, ModelLimits::heads);
  c.d_ff = meta_int(m, "cfg.d_ff", path, 1, ModelLimits::d_ff);
  c.max_len = meta_int(m, "cfg.max_len", path, 1, ModelLimits::max_len);
  c.learned_positions = meta_int(m, "cfg.learned_positions", path, 0, 1) != 0;
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + path + ": " + e.what());
  }
  return c;
}

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

}  // namespace

CharLM::CharLM(const CharLMOptions& o)
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
  optim::AdamOptions a;
  a.lr = opts_.lr;
  a.beta2 = 0.95;  // nanoGPT's
  a.weight_decay = opts_.weight_decay;
  opt_ = std::make_unique<optim::AdamW>(optim::weight_decay_groups(model_->named_parameters(), opts_.weight_decay), a);
  schedule_ = std::make_unique<optim::WarmupCosine>(opts_.lr, opts_.warmup, opts_.steps, opts_.lr / 10);
}

double CharLM::current_lr() const { return schedule_->lr(std::max<int64_t>(step_, 1)); }

double CharLM::step() {
  const int64_t b = opts_.batch_size, t = opts_.model.max_len, at = step_ + 1;
  std::vector<int64_t> x(static_cast<size_t>(b * t)), y(static_cast<size_t>(b * t));
  for (int64_t r = 0; r < b; ++r) {
    const int64_t s = window_start(opts_.seed, at, b, r, static_cast<int64_t>(train_ids_.size()), t);
    std::copy_n(train_ids_.begin() + s, t, x.begin() + r * t);
    std::copy_n(train_ids_.begin() + s + 1, t, y.begin() + r * t);
  }
  model_->train();
  opt_->zero_grad();
  Tensor loss;
  {
    Autocast cast(opts_.precision);
    loss = model_->loss(from_ints(x, {b, t}), from_ints(y, {b, t}));
  }
  const double value = loss.item();
  detail::check_loss(value, at);
  loss.backward();
  detail::clip_or_stop(model_->named_parameters(), opts_.clip_norm, at);
  step_ = at;
  opt_->set_lr(schedule_->lr(step_));
  opt_->step();
  return value;
}

double CharLM::evaluate_bpc(int64_t chars) {
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
    Autocast cast(opts_.precision);
    nats += model_->loss(from_ints(x, {rows, len}), from_ints(y, {rows, len})).item() * static_cast<double>(rows * len);
    predicted += rows * len;
    start += rows * len;
  }
  model_->train();
  return nats / static_cast<double>(predicted) / std::log(2.0);
}

std::string CharLM::sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed) {
  const std::string text = generate_text(*model_, vocab_, prompt, n, s, seed);
  model_->train();
  return text;
}

void CharLM::save(const std::string& path) const {
  std::map<std::string, Tensor> all;
  for (auto& [k, v] : model_->state_dict()) all["model." + k] = v;
  for (auto& [k, v] : opt_->state_dict()) all["optim." + k] = v;
  auto meta = identity_meta(opts_, vocab_);
  meta["kind"] = "char_lm";
  meta["step"] = std::to_string(step_);
  save_tensors(path, all, meta);
}

void CharLM::load(const std::string& path) {
  std::map<std::string, std::string> meta;
  auto all = load_tensors(path, &meta);
  detail::check_same_run(identity_meta(opts_, vocab_), meta, path, {{"vocab", "vocab differs"}});
  const detail::SplitState state = detail::split_state(all, path);
  const int64_t step = meta_int(meta, "step", path, 0, opts_.steps);
  model_->load_state_dict(state.model);
  opt_->load_state_dict(state.optim);
  step_ = step;
}

CharSampler::CharSampler(const std::string& checkpoint) {
  std::map<std::string, std::string> meta;
  auto all = load_tensors(checkpoint, &meta);
  if (meta.count("kind") == 0 || meta.at("kind") != "char_lm")
    throw FormatError("checkpoint " + checkpoint + " was not written by char_lm train (no kind=char_lm in its metadata)");
  if (meta.count("vocab") == 0) throw FormatError("checkpoint " + checkpoint + ": metadata has no 'vocab'");
  try {
    vocab = std::make_unique<CharVocab>(CharVocab::from_string(meta.at("vocab")));
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + checkpoint + ": " + e.what());
  }
  models::GPTConfig c = read_config(meta, checkpoint);
  if (c.vocab != vocab->size())
    throw FormatError(fmt::format("checkpoint {}: cfg.vocab {} but the stored vocabulary has {} characters", checkpoint,
                                  c.vocab, vocab->size()));
  model = std::make_shared<models::GPT>(c);
  std::map<std::string, Tensor> weights;
  for (auto& [k, v] : all)
    if (k.rfind("model.", 0) == 0) weights[k.substr(6)] = v;
  model->load_state_dict(weights);
}

std::string CharSampler::sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed) {
  return generate_text(*model, *vocab, prompt, n, s, seed);
}

namespace {
using detail::duration;

// One line: newlines and tabs shown as the two characters \n and \t.
std::string one_line(const std::string& s) {
  std::string r;
  for (char c : s) r += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return r;
}
}  // namespace

CharLMResult run_char_lm(CharLM& lm, const CharLMLoop& loop) {
  const CharLMOptions& o = lm.options();
  if (loop.log_every < 1) throw std::invalid_argument(fmt::format("log_every {}: expected at least 1", loop.log_every));
  std::FILE* out = loop.out;
  detail::resume_if_asked(lm, o.checkpoint, o.resume, true, out);
  const auto& c = lm.model().config();
  const int threads = num_threads();
  fmt::print(out,
             "data={} ({} files, {} train / {} validation characters, {} fortunes held out) vocab={} | GPT layers={} "
             "d_model={} heads={} d_ff={} context={} | {} parameters | batch {}, warmup_cosine lr {:g}, {} thread{}, {}\n",
             o.data, lm.data().files, lm.data().train.size(), lm.data().valid.size(), lm.data().valid_records, c.vocab,
             c.layers, c.d_model, c.heads, c.d_ff, c.max_len, lm.model().num_parameters(), o.batch_size, o.lr, threads,
             threads == 1 ? "" : "s", precision_name(o.precision));
  std::fflush(out);

  const detail::MetricsFile metrics_file(loop.metrics, "step,loss,lr,val_bpc,tokens_per_s,elapsed_s",
                                         lm.steps_done() > 0);
  std::FILE* metrics = metrics_file.get();

  const bool tty = ::isatty(::fileno(out));
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const auto start = clock::now();
  CharLMResult r;
  double loss_sum = 0;
  int64_t window = 0, saved_at = -1;
  const int64_t first = lm.steps_done();
  auto evaluate = [&](int64_t step, int64_t chars, const char* what) {
    const double bpc = lm.evaluate_bpc(chars);
    if (tty) fmt::print(out, "\n");
    fmt::print(out, "{} step {}: val_bpc {:.4f} ({} validation characters)\n", what, step, bpc,
               chars > 0 ? std::min<int64_t>(chars, static_cast<int64_t>(lm.data().valid.size()))
                         : static_cast<int64_t>(lm.data().valid.size()));
    return bpc;
  };
  while (lm.steps_done() < o.steps) {
    const auto t0 = clock::now();
    double loss = 0;
    try {
      loss = lm.step();
    } catch (const optim::NonFiniteError& e) {
      if (tty) fmt::print(out, "\n");
      if (o.checkpoint.empty()) throw;
      const std::string held = saved_at >= 0 ? fmt::format("{} holds step {}", o.checkpoint, saved_at)
                                             : fmt::format("{} was not written by this run", o.checkpoint);
      throw optim::NonFiniteError(std::string(e.what()) + "; nothing saved at this step; " + held);
    }
    r.train_seconds += since(t0);
    loss_sum += loss;
    ++window;
    const int64_t step = lm.steps_done();
    const double tps = static_cast<double>((step - first) * lm.tokens_per_step()) / std::max(r.train_seconds, 1e-9);
    const double elapsed = since(start);
    const bool out_of_time = o.time_limit > 0 && r.train_seconds >= o.time_limit;
    const double eta = o.time_limit > 0
                           ? std::max(0.0, o.time_limit - r.train_seconds)
                           : elapsed / static_cast<double>(step - first) * static_cast<double>(o.steps - step);
    const std::string line =
        fmt::format("step {}/{} loss {:.4f} ({:.3f} bpc) lr {:.2e} {:.0f} tok/s elapsed {} ETA {}", step, o.steps, loss,
                    loss / std::log(2.0), lm.current_lr(), tps, duration(elapsed), duration(eta));
    if (tty) {
      fmt::print(out, "\r{}\x1b[K", line);
    } else if (step % loop.log_every == 0) {
      fmt::print(out, "{}\n", line);
    }
    std::fflush(out);
    const bool at_end = step == o.steps || out_of_time;
    if (step % o.eval_every == 0 && !at_end) {
      const double bpc = evaluate(step, o.eval_chars, "eval");
      if (loop.sample_chars > 0)
        fmt::print(out, "  sample: {}\n", one_line(lm.sample("", loop.sample_chars, {0.8, 0, 1.0}, 1)));
      if (metrics) {
        std::fprintf(metrics, "%lld,%.6f,%.6g,%.6f,%.1f,%.1f\n", static_cast<long long>(step),
                     loss_sum / static_cast<double>(window), lm.current_lr(), bpc, tps, since(start));
        std::fflush(metrics);
      }
      loss_sum = 0;
      window = 0;
      std::fflush(out);
    }
    if (!o.checkpoint.empty() && ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || at_end)) {
      lm.save(o.checkpoint);
      saved_at = step;
    }
    if (out_of_time) {
      r.timed_out = step < o.steps;
      break;
    }
  }
  r.steps = lm.steps_done();
  const double train_s = r.train_seconds;
  r.val_bpc = evaluate(r.steps, 0, "final eval");
  if (metrics) {
    const double tps = r.steps > first ? static_cast<double>((r.steps - first) * lm.tokens_per_step()) / train_s : 0;
    std::fprintf(metrics, "%lld,%.6f,%.6g,%.6f,%.1f,%.1f\n", static_cast<long long>(r.steps),
                 window ? loss_sum / static_cast<double>(window) : NAN, lm.current_lr(), r.val_bpc, tps, since(start));
  }
  if (loop.sample_chars > 0)
    fmt::print(out, "  sample: {}\n", one_line(lm.sample("", loop.sample_chars, {0.8, 0, 1.0}, 1)));
  fmt::print(out, "final steps={} val_bpc={:.4f} train_seconds={:.1f}{}\n", r.steps, r.val_bpc, train_s,
             r.timed_out ? " (time limit)" : "");
  std::fflush(out);
  return r;
}

}  // namespace xg::train
