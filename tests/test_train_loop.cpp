// The model-agnostic training loop (train/): the step checks, the Trainer and
// fit() on a toy job, whatever the application.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "autograd/autograd.h"
#include "autograd/serialize.h"
#include "nn/nn.h"
#include "tests/helpers.h"
#include "train/checkpoint.h"
#include "train/detail/step_checks.h"
#include "train/loop.h"

using namespace xg;
using namespace xg::train;

TEST_CASE("train: the step checks every trainer shares name the step, and the parameter whose gradient is not finite") {
  CHECK(XG_THROW_MESSAGE(detail::check_loss(std::nan(""), 7), optim::NonFiniteError) ==
        "step 7: the loss is nan; stopped before updating the parameters");
  CHECK(XG_THROW_MESSAGE(detail::check_loss(INFINITY, 2, " (hint)"), optim::NonFiniteError) ==
        "step 2: the loss is inf; stopped before updating the parameters (hint)");
  detail::check_loss(1.5, 1);  // finite: nothing
  auto vec = [](std::vector<double> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); };
  Tensor a = vec({3.0, 0.0}).requires_grad_();
  Tensor b = vec({4.0}).requires_grad_();
  a.set_grad(vec({3.0, 0.0}));
  b.set_grad(vec({4.0}));
  const std::vector<std::pair<std::string, Tensor>> named = {{"a", a}, {"b", b}};
  CHECK(detail::clip_or_stop(named, 0, 1) == doctest::Approx(5.0));  // 0: no clip
  CHECK(b.grad().item() == 4.0);
  CHECK(detail::clip_or_stop(named, 1.0, 1) == doctest::Approx(5.0));
  CHECK(b.grad().item() == doctest::Approx(0.8).epsilon(1e-5));
  b.set_grad(vec({std::nan("")}));
  CHECK(XG_THROW_MESSAGE(detail::clip_or_stop(named, 1.0, 3), optim::NonFiniteError) ==
        "step 3: the gradient norm is nan (first non-finite gradient: b); stopped before updating the parameters");
  CHECK(a.grad().to_vector()[0] == doctest::Approx(0.6).epsilon(1e-5));  // left as it was
}


namespace {

// A toy application: a Linear(1, 1) fits y = 3x + 1 on fresh random points.
// Its evaluation "fit" is 1 / (1 + the mean squared error on fixed points);
// `nan_at` makes the loss of that step non-finite.
class LineJob : public Job {
 public:
  explicit LineJob(std::string slope = "3", int64_t nan_at = 0) : slope_(std::move(slope)), nan_at_(nan_at) {
    Generator init(7);
    model_ = std::make_shared<nn::Linear>(1, 1, init);
  }
  nn::Module& model() override { return *model_; }
  std::string describe() override { return "line y = " + slope_ + "x + 1"; }
  StepLoss loss(const Shard& shard) override {
    std::vector<float> x, y;
    for (int i = 0; i < 8; ++i) x.push_back(static_cast<float>(data_.uniform(-1, 1)));
    for (float v : x) y.push_back(std::stof(slope_) * v + 1);
    Tensor d = sub(model_->forward(from_vector(x, {8, 1})), from_vector(y, {8, 1}));
    Tensor l = mean(mul(d, d));
    if (shard.step == nan_at_) l = mul(l, from_vector(std::vector<float>{NAN}, {}));
    return {l, 8, 8};
  }
  Evaluation evaluate(EvalStage, int64_t) override {
    NoGradGuard no_grad;
    Tensor d = sub(model_->forward(from_vector(std::vector<float>{-1, 0, 1}, {3, 1})),
                   from_vector(std::vector<float>{1 - std::stof(slope_), 1, 1 + std::stof(slope_)}, {3, 1}));
    return {{{"fit", 1 / (1 + mean(mul(d, d)).item())}}, "(3 points)", {}};
  }
  std::string final_line(const RunSummary& r) const override { return fmt::format("steps={}", r.steps); }
  std::string kind() const override { return "line"; }
  Metadata identity() const override { return {{"slope", slope_}}; }
  Metadata state() const override { return {{"data", data_.state()}}; }
  void set_state(const Metadata& m, const std::string&) override { data_.set_state(m.at("data")); }
  std::vector<double> weights() const {
    std::vector<double> w;
    for (const auto& [name, p] : model_->named_parameters())
      for (double v : p.to_vector()) w.push_back(v);
    return w;
  }

 private:
  std::string slope_;
  int64_t nan_at_;
  std::shared_ptr<nn::Linear> model_;
  Generator data_{11};
};

TrainOptions line_recipe(int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.schedule = "constant";
  o.lr = 0.05;
  o.warmup = 0;
  return o;
}

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

std::string tmp(const char* name) {
  const std::string p = std::string(XG_TEST_TMPDIR) + "/" + name;
  std::remove(p.c_str());
  return p;
}

}  // namespace

TEST_CASE("train: fit on a toy job prints the header, evaluations and final line, and writes the metrics CSV") {
  LineJob job;
  TrainOptions recipe = line_recipe(20);
  recipe.lr = 0.2;
  Trainer trainer(job, recipe);
  LoopOptions loop;
  loop.eval_every = 10;
  loop.log_every = 10;
  loop.metrics = tmp("line_metrics.csv");
  std::FILE* out = std::tmpfile();
  loop.out = out;
  const RunSummary r = fit(trainer, loop);
  const std::string text = read_all(out);
  std::fclose(out);
  CHECK(r.steps == 20);
  CHECK(text.rfind("line y = 3x + 1 | 2 parameters | constant lr 0.2", 0) == 0);
  CHECK(text.find("eval step 10: fit ") != std::string::npos);
  CHECK(text.find("final eval step 20: fit ") != std::string::npos);
  REQUIRE(text.size() >= 16);
  CHECK(text.substr(text.size() - 16) == "\nfinal steps=20\n");
  std::FILE* csv = std::fopen(loop.metrics.c_str(), "r");
  REQUIRE(csv);
  const std::string rows = read_all(csv);
  std::fclose(csv);
  CHECK(rows.rfind("step,loss,lr,fit,tokens_per_s,elapsed_s,train_s\n10,", 0) == 0);
  CHECK(rows.find("\n20,") != std::string::npos);
  CHECK(r.final.metrics.at(0).second > 0.5);  // it learnt: the mean squared error is below 1
}

TEST_CASE("train: a run stopped and resumed ends with the weights of the run never stopped") {
  LineJob straight;
  Trainer a(straight, line_recipe(12));
  LoopOptions quiet;
  quiet.eval_every = 100;
  std::FILE* out = std::tmpfile();
  quiet.out = out;
  fit(a, quiet);

  // The same run in two sessions: 5 steps with a checkpoint, then a fresh
  // process (new job, new trainer) resumes it to step 12.
  const std::string ck = tmp("line_resume.safetensors");
  LineJob first;
  Trainer b(first, line_recipe(12));
  for (int i = 0; i < 5; ++i) b.step();
  b.save(ck);
  LineJob second;
  Trainer c(second, line_recipe(12));
  LoopOptions resume = quiet;
  resume.checkpoint = ck;
  resume.resume = true;
  fit(c, resume);
  std::fclose(out);
  CHECK(c.steps_done() == 12);
  CHECK(second.weights() == straight.weights());  // bit for bit: optimiser moments, data generator and step restored
  CHECK(second.weights() != first.weights());
}

TEST_CASE("train: resuming a checkpoint of another run lists the keys that differ") {
  const std::string ck = tmp("line_other.safetensors");
  LineJob three;
  Trainer t(three, line_recipe(4));
  t.step();
  t.save(ck);
  LineJob four("4");
  Trainer u(four, line_recipe(4));
  LoopOptions l;
  l.checkpoint = ck;
  l.resume = true;
  std::FILE* out = std::tmpfile();
  l.out = out;
  const std::string msg = XG_THROW_MESSAGE(fit(u, l), std::exception);
  std::fclose(out);
  CHECK(msg.find("slope 3 in the file, 4 here") != std::string::npos);
  CHECK(u.steps_done() == 0);
}

TEST_CASE("train: warmup_cosine ends at lr x min_lr_ratio, which a resumed run must share (files without it meant a tenth)") {
  auto cosine = [](double ratio) {
    TrainOptions o = line_recipe(4);
    o.schedule = "warmup_cosine";
    o.lr = 0.1;
    o.min_lr_ratio = ratio;
    return o;
  };
  auto resume_error = [](Trainer& t, const std::string& ck) {
    LoopOptions l;
    l.checkpoint = ck;
    l.resume = true;
    std::FILE* out = std::tmpfile();
    l.out = out;
    std::string msg;
    try {
      fit(t, l);
    } catch (const std::exception& e) {
      msg = e.what();
    }
    std::fclose(out);
    return msg;
  };
  LineJob a;
  Trainer to_zero(a, cosine(0));
  for (int i = 0; i < 4; ++i) to_zero.step();
  CHECK(to_zero.current_lr() == doctest::Approx(0.0));
  LineJob b;
  Trainer to_tenth(b, cosine(0.1));
  for (int i = 0; i < 4; ++i) to_tenth.step();
  CHECK(to_tenth.current_lr() == doctest::Approx(0.01));
  CHECK(a.weights() != b.weights());

  const std::string ck = tmp("line_min_lr.safetensors");
  LineJob c;
  Trainer zero_run(c, cosine(0));
  zero_run.step();
  zero_run.save(ck);
  LineJob d;
  Trainer tenth_run(d, cosine(0.1));
  CHECK(resume_error(tenth_run, ck).find("min_lr_ratio 0 in the file, 0.1 here") != std::string::npos);
  CHECK(tenth_run.steps_done() == 0);

  // A file written before the option existed: no key, and its cosine ended
  // at a tenth. A default run resumes it; a run to 0 is another run.
  LineJob e;
  Trainer old(e, cosine(0.1));
  old.step();
  old.save(ck);
  Metadata meta;
  const auto tensors = load_tensors(ck, &meta);
  REQUIRE(meta.erase("min_lr_ratio") == 1);
  save_tensors(ck, tensors, meta);
  LineJob f;
  Trainer to_zero_again(f, cosine(0));
  CHECK(resume_error(to_zero_again, ck).find("min_lr_ratio 0.1 in the file, 0 here") != std::string::npos);
  LineJob g;
  Trainer same(g, cosine(0.1));
  CHECK(resume_error(same, ck).empty());
  CHECK(same.steps_done() == 4);
}

TEST_CASE("train: a clock-bounded schedule counts its warm-up in steps, then follows the clock or the steps") {
  auto clocked = [](double limit) {
    TrainOptions o = line_recipe(1000);
    o.schedule = "warmup_cosine";
    o.warmup = 10;
    o.time_limit = limit;
    o.clock_schedule = true;
    return o;
  };
  // A clock far shorter than a step: the warm-up still counts steps, and
  // the clock ends the run within it (the rule before counted the clock's
  // place in --steps, and put the first step at the schedule's end).
  LineJob a;
  Trainer brief(a, clocked(1e-9));
  brief.step();
  CHECK(brief.schedule_position() == 1);
  CHECK(brief.current_lr() == doctest::Approx(0.05 / 10));  // the first of 10 warm-up steps
  CHECK(brief.finished());
  // Past the warm-up, the place is warmup + (steps - warmup) x seconds / limit
  // when the clock is further along than the steps: a checkpoint at step 12
  // that says half the time has gone.
  const std::string ck = tmp("line_clock.safetensors");
  LineJob b;
  Trainer twelve(b, clocked(1e6));
  for (int i = 0; i < 12; ++i) twelve.step();
  CHECK(twelve.schedule_position() == 12);  // the steps are further along than a few seconds of 1e6
  twelve.save(ck);
  Metadata meta;
  const auto tensors = load_tensors(ck, &meta);
  meta["train_seconds"] = "500000";
  save_tensors(ck, tensors, meta);
  LineJob c;
  Trainer half(c, clocked(1e6));
  half.load(ck);
  CHECK(half.steps_done() == 12);
  CHECK(half.schedule_position() == 10 + (1000 - 10) / 2);
  CHECK_FALSE(half.finished());
}

TEST_CASE("train: fit stops at the first evaluation reaching the target") {
  LineJob job;
  Trainer trainer(job, line_recipe(1000));
  LoopOptions l;
  l.eval_every = 10;
  l.target_metric = "fit";
  l.target = 0.9;
  std::FILE* out = std::tmpfile();
  l.out = out;
  const RunSummary r = fit(trainer, l);
  std::fclose(out);
  CHECK(r.steps < 1000);
  CHECK(r.steps % 10 == 0);
  CHECK(r.final.metrics.at(0).second >= 0.9);
  l.target_metric = "accuracy";  // not a metric of the job: an error naming the ones it has
  LineJob other;
  Trainer t2(other, line_recipe(1000));
  out = std::tmpfile();
  l.out = out;
  CHECK(XG_THROW_MESSAGE(fit(t2, l), std::invalid_argument).find("'accuracy' is not one of the evaluation's: fit") !=
        std::string::npos);
  std::fclose(out);
}

TEST_CASE("train: a non-finite loss stops fit before the update and says which step the checkpoint holds") {
  const std::string ck = tmp("line_nan.safetensors");
  LineJob job("3", 4);
  Trainer trainer(job, line_recipe(10));
  LoopOptions l;
  l.checkpoint = ck;
  l.checkpoint_every = 2;
  std::FILE* out = std::tmpfile();
  l.out = out;
  const std::string msg = XG_THROW_MESSAGE(fit(trainer, l), optim::NonFiniteError);
  std::fclose(out);
  CHECK(msg.rfind("step 4: the loss is nan; stopped before updating the parameters", 0) == 0);
  CHECK(msg.find(ck + " holds step 2") != std::string::npos);
  CHECK(trainer.steps_done() == 3);
}

namespace {

// Everything a Trainer holds that a load may change.
struct Held {
  std::vector<double> weights;
  std::map<std::string, std::vector<double>> optim;
  Metadata job;
  int64_t steps;
  bool operator==(const Held& o) const {
    return weights == o.weights && optim == o.optim && job == o.job && steps == o.steps;
  }
};
Held held(LineJob& job, Trainer& t) {
  Held h{job.weights(), {}, job.state(), t.steps_done()};
  for (const auto& [k, v] : t.optimizer().state_dict()) h.optim[k] = v.to_vector();
  return h;
}

}  // namespace

TEST_CASE("train: a checkpoint that fails to load in any part changes nothing (model, optimiser, job, step)") {
  const std::string ck = tmp("line_whole.safetensors");
  LineJob saved;
  Trainer s(saved, line_recipe(12));
  for (int i = 0; i < 5; ++i) s.step();
  s.save(ck);
  Metadata meta;
  const auto good = load_tensors(ck, &meta);

  LineJob job;
  Trainer t(job, line_recipe(12));
  for (int i = 0; i < 2; ++i) t.step();
  const Held before = held(job, t);
  // Each copy is a well-formed file (save_tensors writes its checksums) with one bad part.
  auto refused = [&](const char* name, std::map<std::string, Tensor> tensors, Metadata m) {
    const std::string bad = tmp(name);
    save_tensors(bad, tensors, m);
    CHECK_THROWS(t.load(bad));
    CHECK(held(job, t) == before);
  };
  {
    auto tensors = good;  // the model: a weight of the wrong shape
    tensors["model.weight"] = zeros({2, 2});
    refused("line_bad_model.safetensors", tensors, meta);
  }
  {
    auto tensors = good;  // the optimiser: a moment of the wrong shape, after the model would have loaded
    for (auto& [k, v] : tensors)
      if (k.rfind("optim.", 0) == 0 && v.numel() == 1 && k.find("exp_avg") != std::string::npos) v = zeros({3});
    refused("line_bad_optim.safetensors", tensors, meta);
  }
  {
    auto m = meta;  // the job's own state: its data generator
    m["data"] = "not a generator";
    refused("line_bad_job.safetensors", good, m);
  }
  {
    auto m = meta;  // the loop's state: the step
    m["step"] = "-3";
    refused("line_bad_step.safetensors", good, m);
  }
  {
    auto tensors = good;  // a NaN weight: refused by name, unless allowed
    Tensor w = tensors.at("model.weight").clone();
    w.data<float>()[0] = NAN;
    tensors["model.weight"] = w;
    const std::string bad = tmp("line_nan.safetensors");
    save_tensors(bad, tensors, meta);
    CHECK(XG_THROW_MESSAGE(t.load(bad), FormatError) ==
          "checkpoint " + bad + ": tensor 'model.weight' holds nan at element 0 (of 1): refusing a non-finite checkpoint");
    CHECK(held(job, t) == before);
    t.load(bad, /*allow_non_finite=*/true);
    CHECK(std::isnan(job.weights()[0]));
  }
  t.load(ck);  // the good file loads whole
  CHECK(t.steps_done() == 5);
  CHECK(job.weights() == saved.weights());
}

TEST_CASE("train: check_outputs refuses before any work what would write nowhere or destroy a file") {
  const std::string dir = XG_TEST_TMPDIR;
  const std::string a = tmp("outputs_a.csv"), link = tmp("outputs_link.csv");
  { std::FILE* f = std::fopen(a.c_str(), "w"); std::fputs("keep", f); std::fclose(f); }
  REQUIRE(::symlink(a.c_str(), link.c_str()) == 0);
  check_outputs({{"checkpoint", a}, {"metrics", ""}, {"--out", dir, true}});  // "" is not written
  CHECK(XG_THROW_MESSAGE(check_outputs({{"checkpoint", a}, {"metrics", a}}), std::runtime_error) ==
        "checkpoint " + a + " and metrics " + a + " are the same file: one would destroy the other");
  CHECK(XG_THROW_MESSAGE(check_outputs({{"checkpoint", a}, {"metrics", link}}), std::runtime_error) ==
        "checkpoint " + a + " and metrics " + link + " are the same file: one would destroy the other");
  CHECK(XG_THROW_MESSAGE(check_outputs({{"metrics", dir}}), std::runtime_error) ==
        "metrics " + dir + " is a directory, not a file");
  CHECK(XG_THROW_MESSAGE(check_outputs({{"checkpoint", "/dev/null"}}), std::runtime_error) ==
        "checkpoint /dev/null is not a regular file (a device, pipe or socket): refusing to replace it");
  CHECK(XG_THROW_MESSAGE(check_outputs({{"metrics", a + "/x.csv"}}), std::runtime_error) ==
        "metrics " + a + "/x.csv: the folder " + a + " does not exist");
  CHECK(XG_THROW_MESSAGE(check_outputs({{"--out", a, true}}), std::runtime_error) == "--out " + a + " is not a folder");
  CHECK(XG_THROW_MESSAGE(check_outputs({{"--out", dir + "/none", true}}), std::runtime_error) ==
        "--out " + dir + "/none: no such folder");
  std::FILE* f = std::fopen(a.c_str(), "r");
  char buf[8] = {};
  CHECK(std::fread(buf, 1, 7, f) == 4);
  std::fclose(f);
  CHECK(std::string(buf) == "keep");  // nothing written

  // fit() makes these checks before step 1.
  LineJob job;
  Trainer t(job, line_recipe(5));
  LoopOptions loop;
  loop.checkpoint = a;
  loop.metrics = link;
  std::FILE* out = std::tmpfile();
  loop.out = out;
  CHECK_THROWS_AS(fit(t, loop), std::runtime_error);
  std::fclose(out);
  CHECK(t.steps_done() == 0);
  std::remove(link.c_str());
}

TEST_CASE("train: rank_seed is SplitMix64 of the seed, rank and step (the dropout streams of checkpoints resumed)") {
  // The formula written out: one mix of seed + (rank + 1) golden increments + step << 20.
  auto written_out = [](uint64_t seed, int rank, int64_t step) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(rank) + 1) + (static_cast<uint64_t>(step) << 20);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  for (uint64_t seed : {0ULL, 1ULL, 12345ULL, ~0ULL})
    for (int rank : {1, 2, 7})
      for (int64_t step : {int64_t{0}, int64_t{5}, int64_t{1} << 30}) CHECK(rank_seed(seed, rank, step) == written_out(seed, rank, step));
  CHECK(rank_seed(1, 1, 0) != rank_seed(1, 2, 0));
}
