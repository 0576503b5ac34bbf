// The copy/reverse tasks end to end: data, a short deterministic training run,
// and resuming from a checkpoint with identical losses.
#include <cstdio>
#include <thread>

#include "apps/seq2seq/seq2seq.h"
#include "autograd/autograd.h"
#include "autograd/serialize.h"
#include "tests/helpers.h"
#include "tests/transformer_layout.h"

using namespace xg;
using namespace xg::seq2seq;
using train::Trainer;

namespace {
Seq2SeqOptions small(Task task) {
  Seq2SeqOptions o;
  o.task.task = task;
  o.task.vocab = 8;
  o.task.min_len = 1;
  o.task.max_len = 5;
  o.model.layers = 1;
  o.model.d_model = 32;
  o.model.heads = 2;
  o.model.d_ff = 64;
  o.model.dropout = 0.1;
  o.batch_size = 32;
  o.eval_size = 200;
  o.seed = 7;
  return o;
}
train::TrainOptions recipe(uint64_t seed = 7) {
  train::TrainOptions o = default_recipe();
  o.warmup = 50;
  o.seed = seed;
  return o;
}
}  // namespace

TEST_CASE("train: tasks make the right targets and padded batches") {
  TaskConfig c;
  c.task = Task::reverse;
  c.min_len = 2;
  c.max_len = 4;
  Generator g(1);
  std::vector<Example> ex;
  for (int i = 0; i < 50; ++i) {
    Example e = sample(c, g);
    CHECK(e.src.size() >= 2);
    CHECK(e.src.size() <= 4);
    CHECK(std::vector<int64_t>(e.src.rbegin(), e.src.rend()) == e.tgt);
    for (int64_t t : e.src) CHECK((t >= kFirstSymbol && t < c.vocab));
    ex.push_back(e);
  }
  TrainBatch b = make_batch({Example{{3, 4, 5}, {5, 4, 3}}, Example{{6}, {6}}});
  CHECK(b.src.ids == std::vector<int64_t>{3, 4, 5, 6, 0, 0});
  CHECK(b.tgt_in.ids == std::vector<int64_t>{1, 5, 4, 3, 1, 6, 0, 0});
  CHECK(b.tgt_out.ids == std::vector<int64_t>{5, 4, 3, 2, 6, 2, 0, 0});
  CHECK(b.target_tokens == 6);
  CHECK_THROWS_AS(parse_task("sort"), std::invalid_argument);
}

TEST_CASE("train: a short deterministic training run learns the copy task") {
  set_num_threads(1);
  Seq2SeqJob job(small(Task::copy));
  Trainer t(job, recipe());
  double first = t.step(), last = 0;
  for (int i = 1; i < 600; ++i) last = t.step();
  EvalResult r = job.evaluate_all(0);
  INFO("first loss " << first << ", last loss " << last << ", exact " << r.exact_match << ", token acc "
                     << r.token_acc);
  CHECK(first > 1.8);   // about log(8) at the start
  CHECK(last < 0.9);    // label smoothing 0.1 keeps it above ~0.5
  CHECK(r.exact_match > 0.8);
  CHECK(r.token_acc > 0.9);
}

TEST_CASE("train: resuming from a checkpoint gives the same losses as an uninterrupted run") {
  set_num_threads(1);
  Seq2SeqOptions o = small(Task::reverse);
  const int n = 16;
  std::vector<double> straight;
  {
    Seq2SeqJob job(o);
    Trainer t(job, recipe());
    for (int i = 0; i < n; ++i) straight.push_back(t.step());
  }
  std::string path = std::string(XG_TEST_TMPDIR) + "/resume.safetensors";
  std::vector<double> resumed;
  {
    Seq2SeqJob job(o);
    Trainer t(job, recipe());
    for (int i = 0; i < n / 2; ++i) resumed.push_back(t.step());
    t.save(path);
  }
  {
    Seq2SeqOptions other = o;
    other.seed = 999;  // everything that matters must come from the checkpoint
    Seq2SeqJob job(other);
    Trainer t(job, recipe(999));
    t.load(path);
    CHECK(t.steps_done() == n / 2);
    for (int i = n / 2; i < n; ++i) resumed.push_back(t.step());
  }
  REQUIRE(resumed.size() == straight.size());
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(resumed[i] == straight[i]);  // bit-identical, not approximately
  }
}

TEST_CASE("train: resuming with another task or model names only the keys that differ (F8)") {
  Seq2SeqOptions o = small(Task::copy);
  std::string path = std::string(XG_TEST_TMPDIR) + "/other_model.safetensors";
  {
    Seq2SeqJob job(o);
    Trainer(job, recipe()).save(path);
  }
  const std::string head = "checkpoint " + path + " was written by a different run: ";
  const std::string tail = " (train with the same options, or choose another --checkpoint)";
  Seq2SeqOptions wider = o;
  wider.model.d_model = 64;
  Seq2SeqJob wide_job(wider);
  Trainer t(wide_job, recipe());
  CHECK(XG_THROW_MESSAGE(t.load(path), std::invalid_argument) == head + "cfg.d_model 32 in the file, 64 here" + tail);
  Seq2SeqOptions other = o;
  other.task.task = Task::reverse;
  Seq2SeqJob other_job(other);
  train::TrainOptions constant = recipe();
  constant.schedule = "constant";
  Trainer c(other_job, constant);
  CHECK(XG_THROW_MESSAGE(c.load(path), std::invalid_argument) ==
        head + "schedule noam in the file, constant here; task copy in the file, reverse here" + tail);
  std::map<std::string, std::string> meta;
  load_tensors(path, &meta);
  CheckpointInfo info = read_checkpoint_info(meta, path);
  CHECK(info.model.kind() == models::Seq2SeqKind::transformer);
  REQUIRE(info.model.transformer());
  CHECK(info.model.transformer()->d_model == 32);
  CHECK(info.task.max_len == 5);
  CHECK(info.task.task == Task::copy);
}

TEST_CASE("train: a checkpoint of the earlier parameter layout decodes as it did, and refuses to resume by name") {
  set_num_threads(1);
  Seq2SeqOptions o = small(Task::copy);
  const std::string dir = XG_TEST_TMPDIR, today = dir + "/layout_today.safetensors", old = dir + "/layout_old.safetensors";
  {
    Seq2SeqJob job(o);
    Trainer t(job, recipe());
    for (int i = 0; i < 5; ++i) t.step();
    t.save(today);
  }
  std::map<std::string, std::string> meta;
  const auto tensors = load_tensors(today, &meta);
  const auto earlier = xgt::earlier_layout(tensors, o.model.d_model, "model.");
  REQUIRE(earlier.count("model.decoder.0.cross_attn.w_k.weight"));
  save_tensors(old, earlier, meta);
  Decoder a(today), b(old);
  for (const char* line : {"3 4 5", "7 6 5 4 3"}) {
    CHECK(a.decode(a.parse(line)) == b.decode(b.parse(line)));
    CHECK(a.decode(a.parse(line), 3) == b.decode(b.parse(line), 3));  // beam 3
  }
  Seq2SeqJob job(o);
  Trainer t(job, recipe());
  const std::string msg = XG_THROW_MESSAGE(t.load(old), FormatError);
  CHECK(xgt::contains(msg, "checkpoint " + old + " holds the model in an earlier layout of its parameters (decoder.0."));
  CHECK(xgt::contains(msg, "training cannot resume from it"));
  CHECK(t.steps_done() == 0);
}

TEST_CASE("train: a NaN injected into a weight mid-training stops the step, named by step or by op") {
  set_num_threads(1);
  Seq2SeqOptions o = small(Task::copy);
  o.model.dropout = 0;
  Seq2SeqJob job(o);
  Trainer t(job, recipe());
  for (int i = 0; i < 3; ++i) t.step();
  Tensor w;
  for (auto& [name, p] : job.model().named_parameters())
    if (name == "decoder.layers.0.self_attn.in_proj_weight") w = p;
  REQUIRE(w.defined());
  w.detach().set({0, 0}, std::nan(""));
  const std::map<std::string, Tensor> before = job.model().state_dict();
  std::vector<Tensor> kept;
  for (auto& [name, p] : before) kept.push_back(p.clone());
  // Default: the step is named, and the parameters are left as they were.
  std::string m = XG_THROW_MESSAGE(t.step(), optim::NonFiniteError);
  CHECK(m.find("step 4: the loss is nan") != std::string::npos);
  CHECK(t.steps_done() == 3);
  size_t i = 0;
  for (auto& [name, p] : job.model().state_dict()) {
    CAPTURE(name);
    CHECK(bit_equal(p, kept[i++]));  // no update was applied
  }
  // Anomaly mode: the first op to make a NaN, and its module.
  train::TrainOptions ra = recipe();
  ra.detect_anomaly = true;
  Seq2SeqJob job_a(o);
  Trainer ta(job_a, ra);
  ta.step();
  for (auto& [name, p] : job_a.model().named_parameters())
    if (name == "decoder.layers.0.self_attn.in_proj_weight") p.detach().set({0, 0}, std::nan(""));
  m = XG_THROW_MESSAGE(ta.step(), AnomalyError);
  // the weight's slice for the query projection is the first op to hold the NaN
  CHECK(m.find("slice (in MultiheadAttention(embed_dim=32, num_heads=2) 'decoder.layers.0.self_attn')") != std::string::npos);
  CHECK(!anomaly_enabled());  // the guard ended with the step
}

TEST_CASE("threads: two models trained from two threads at once match the same runs one after the other") {
  // Separate graphs on separate threads are supported: grad mode, autocast,
  // anomaly mode and the op name scope are per thread; the allocator is
  // locked; a thread that finds the pool busy runs its kernels itself.
  for (int pool : {1, 2}) {
    CAPTURE(pool);
    set_num_threads(pool);
    auto run = [](uint64_t seed, std::vector<double>& losses) {
      Seq2SeqOptions o = small(seed % 2 ? Task::copy : Task::reverse);
      o.seed = seed;
      Seq2SeqJob job(o);
      Trainer t(job, recipe(seed));
      for (int i = 0; i < 6; ++i) losses.push_back(t.step());
    };
    std::vector<double> seq_a, seq_b, par_a, par_b;
    run(11, seq_a);
    run(12, seq_b);
    std::thread ta([&] { run(11, par_a); });
    std::thread tb([&] { run(12, par_b); });
    ta.join();
    tb.join();
    REQUIRE(par_a.size() == seq_a.size());
    for (size_t i = 0; i < seq_a.size(); ++i) {
      CAPTURE(i);
      // At one thread every kernel runs the same code in the same order: equal
      // to the bit. At two, a thread that finds the pool busy runs whole
      // kernels itself: equal to float32 rounding.
      if (pool == 1) {
        CHECK(par_a[i] == seq_a[i]);
        CHECK(par_b[i] == seq_b[i]);
      } else {
        CHECK(par_a[i] == doctest::Approx(seq_a[i]).epsilon(1e-5));
        CHECK(par_b[i] == doctest::Approx(seq_b[i]).epsilon(1e-5));
      }
    }
  }
  set_num_threads(1);
}
