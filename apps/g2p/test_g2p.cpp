// Grapheme-to-phoneme: the CMUdict parser (and its line-numbered errors), the
// held-out split, edit distance, word and phoneme error rates, and a tiny
// model that learns a small dictionary written by the test.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "apps/g2p/g2p.h"
#include "autograd/serialize.h"
#include "tests/helpers.h"
#include "train/checkpoint.h"

using namespace xg;
using namespace xg::g2p;
using train::Trainer;
using xgt::contains;

namespace {
// A job and its trainer, built in that order.
struct Run {
  G2PJob job;
  Trainer trainer;
  Run(const G2POptions& o, const train::TrainOptions& r) : job(o), trainer(job, r) {}
};
// The default recipe over `steps` steps of the schedule, no clock, no averaging unless asked.
train::TrainOptions recipe(int64_t steps, int64_t warmup, double average = 0) {
  train::TrainOptions r = default_recipe();
  r.steps = steps;
  r.warmup = warmup;
  r.time_limit = 0;  // the schedule by steps only: runs compare step for step
  r.average = average;
  return r;
}
CmuDict parse(const std::string& text) {
  std::istringstream in(text);
  return parse_cmudict(in, "dict");
}
std::vector<std::string> phones(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> v;
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}
}  // namespace

TEST_CASE("g2p: Festival's lexicon format, stress on vowels, several entries of one word merged, ax read as ah0") {
  CmuDict d = parse(
      "MNCL\n"
      "(\"a\" dt (((ax) 0)))\n"
      "(\"a\" n (((ey) 1)))\n"
      "(\"a\" nil (((ey) 1)))\n"
      "\n"
      "(\"Adversity\" nil (((ae d) 0) ((v er) 1) ((s ih) 0) ((t iy) 0)))\n");
  CHECK(d.entries == 4);
  CHECK(d.prons.size() == 2);
  // Festival's "ax" is CMUdict's AH0; the duplicate is kept once.
  CHECK(d.prons.at("a") == std::vector<std::vector<std::string>>{{"ah0"}, {"ey1"}});
  CHECK(d.prons.at("adversity") == std::vector<std::vector<std::string>>{phones("ae0 d v er1 s ih0 t iy0")});
  CHECK(strip_stress("er1") == "er");
  CHECK(is_vowel("ow2"));
  CHECK_FALSE(is_vowel("hh"));
}

TEST_CASE("g2p: a malformed line is an error naming its line and column, never a crash") {
  auto msg = [](const std::string& body) { return XG_THROW_MESSAGE(parse("MNCL\n(\"ok\" nil (((ow) 1)))\n" + body), FormatError); };
  CHECK(msg("(\"b\" nil (((b iy) 1))\n") == "dict: line 3: expected ')' at column 22, got the end of the line");
  CHECK(msg("(\"b nil (((b iy) 1)))\n") == "dict: line 3: a word without its closing '\"' at column 3, got 'b'");
  CHECK(msg("(\"b\" nil (((b iy) 7)))\n") == "dict: line 3: a stress of 0, 1 or 2 at column 20, got ')'");
  CHECK(msg("(\"b\" nil (((B iy) 1)))\n") == "dict: line 3: a phone of lower-case letters at column 14, got ' '");
  CHECK(msg("(\"b\" nil ((() 1)))\n") == "dict: line 3: a syllable with no phone at column 14, got ' '");
  CHECK(msg("(\"b\" nil ())\n") == "dict: line 3: a pronunciation with no syllable at column 13, got the end of the line");
  CHECK(msg("(\"b\" nil (((b iy) 1))) extra\n") == "dict: line 3: the end of the entry at column 24, got 'e'");
  CHECK(msg("garbage\n") == "dict: line 3: expected '(' at column 1, got 'g'");
  CHECK(XG_THROW_MESSAGE(parse("MNCL\n"), FormatError) == "dict: no dictionary entry in 1 lines");
  CHECK(contains(XG_THROW_MESSAGE(load_cmudict("/nonexistent-xgrad-dict"), std::runtime_error),
                 "(Debian's festlex-cmu package installs it: apt-get install festlex-cmu)"));
}

TEST_CASE("g2p: edit distance, and word / phoneme error rates with and without stress") {
  CHECK(edit_distance(phones("k ae1 t"), phones("k ae1 t")) == 0);
  CHECK(edit_distance(phones("k ae1 t"), phones("k ae0 t")) == 1);
  CHECK(edit_distance(phones("k ae1 t s"), phones("k t")) == 2);
  CHECK(edit_distance({}, phones("a b c")) == 3);
  // word 1: right with stress; word 2: right only without stress; word 3: one phone wrong of 4,
  // but it matches its second pronunciation better (one deletion of 3).
  const std::vector<std::vector<std::string>> out = {phones("k ae1 t"), phones("d ao0 g"), phones("t ah0 m ey1")};
  const std::vector<std::vector<std::vector<std::string>>> refs = {
      {phones("k ae1 t")}, {phones("d ao1 g")}, {phones("t ax0 m ey1 t ow0"), phones("t ah0 m ey1 t")}};
  G2PScores s = score_g2p(out, refs);
  CHECK(s.words == 3);
  CHECK(s.wer == doctest::Approx(1.0 / 3));
  CHECK(s.wer_stress == doctest::Approx(2.0 / 3));
  CHECK(s.per == doctest::Approx(1.0 / (3 + 3 + 5)));
  CHECK(s.per_stress == doctest::Approx(2.0 / (3 + 3 + 5)));
  CHECK(XG_THROW_MESSAGE(score_g2p(out, {}), std::invalid_argument) == "score_g2p: 3 outputs for 0 words");
}

TEST_CASE("g2p: the held-out split is a hash of the word: about 10%, and the same whatever the order") {
  int held = 0;
  for (int i = 0; i < 20000; ++i) held += g2p_held_out("word" + std::to_string(i));
  CHECK(held > 1800);
  CHECK(held < 2200);
  CHECK(g2p_held_out("adversity") == g2p_held_out(std::string("adversity")));
}

TEST_CASE("g2p: a tiny model learns a small dictionary, checkpoints, and pronounces from the checkpoint") {
  // Words made of two syllables from a fixed table: the spelling decides the sound.
  const std::vector<std::pair<std::string, std::string>> syl = {{"ba", "b aa1"}, {"ko", "k ow0"}, {"mi", "m iy1"},
                                                                {"tu", "t uw0"}, {"sa", "s aa0"}, {"ne", "n eh1"}};
  const std::string path = std::string(XG_TEST_TMPDIR) + "/tiny_cmudict.out";
  {
    std::ofstream out(path);
    out << "MNCL\n";
    for (const auto& [s1, p1] : syl)
      for (const auto& [s2, p2] : syl) {
        auto syllable = [](const std::string& p) {
          std::istringstream in(p);
          std::string c, v;
          in >> c >> v;
          return "((" + c + " " + v.substr(0, 2) + ") " + v.substr(2) + ")";
        };
        out << "(\"" << s1 << s2 << "\" nil (" << syllable(p1) << " " << syllable(p2) << "))\n";
      }
  }
  G2POptions o;
  o.dict = path;
  o.model.layers = 1;
  o.model.d_model = 32;
  o.model.heads = 2;
  o.model.d_ff = 64;
  o.model.dropout = 0;
  o.batch_size = 16;
  train::TrainOptions r = recipe(300, 20);
  r.lr = 3e-3;
  Run run(o, r);
  G2PJob& g2p = run.job;
  CHECK(g2p.letters() == "abeikmnostu");
  CHECK(g2p.test_words() == std::vector<std::string>{"basa", "mine", "neko", "nemi", "saba", "tuko"});
  CHECK(g2p.train_pairs() == 30);
  const G2PScores before = g2p.evaluate_words(0, 1);
  for (int i = 0; i < 300; ++i) run.trainer.step();
  const G2PScores after = g2p.evaluate_words(0, 2);
  CHECK(before.wer > 0.9);
  CHECK(after.per < before.per);
  CHECK(after.per < 0.3);
  // The training words: the other 30, none held out, scored the same way.
  CHECK(g2p.train_words().size() == 30);
  for (const auto& w : g2p.train_words()) CHECK(!g2p_held_out(w));
  const G2PScores fit = g2p.evaluate_words(0, 1, G2PJob::Words::training);
  CHECK(fit.words == 30);
  CHECK(fit.per < 0.3);
  CHECK(g2p.evaluate_words(7, 1, G2PJob::Words::training).words == 7);

  const std::string ck = std::string(XG_TEST_TMPDIR) + "/tiny_g2p.safetensors";
  run.trainer.save(ck);
  Pronouncer p(ck);
  const std::string word = g2p.test_words().empty() ? "bako" : g2p.test_words()[0];
  const auto said = p.pronounce(word, 2);
  CHECK(!said.empty());
  CHECK(XG_THROW_MESSAGE(p.pronounce("bax", 2), std::invalid_argument) ==
        "'bax': character 'x' at position 2 is outside the training alphabet 'abeikmnostu'");
  CHECK(XG_THROW_MESSAGE(p.pronounce("", 2), std::invalid_argument) == "an empty word has no pronunciation");
  G2POptions other = o;
  other.batch_size = 8;
  Run g2(other, r);
  CHECK(contains(XG_THROW_MESSAGE(g2.trainer.load(ck), std::invalid_argument), "batch 16 in the file, 8 here"));
  // each program refuses the other's checkpoint by name
  CHECK(XG_THROW_MESSAGE(train::load_for_inference(ck, "char_lm", "char_lm train"), FormatError) ==
        "checkpoint " + ck + " was not written by char_lm train (no kind=char_lm in its metadata)");
  std::remove(ck.c_str());
}


TEST_CASE("g2p: batches of one spelling length still draw every pair with probability 1 / pairs") {
  // Words of 2 to 6 letters, 40 / 80 / 120 / 160 / 200 of each length (before
  // the held-out split); one pronunciation each.
  const std::string path = std::string(XG_TEST_TMPDIR) + "/lengths_cmudict.out";
  std::map<size_t, int> pairs_of_length;  // training pairs, by spelling length
  {
    std::ofstream out(path);
    out << "MNCL\n";
    for (size_t len = 2; len <= 6; ++len)
      for (int i = 0; i < 40 * static_cast<int>(len - 1); ++i) {
        std::string w;
        for (int v = i; w.size() < len; v /= 26) w += static_cast<char>('a' + v % 26);  // i in base 26
        out << "(\"" << w << "\" nil (((b aa) 1)))\n";
        if (!g2p_held_out(w)) ++pairs_of_length[len];
      }
  }
  G2POptions o;
  o.dict = path;
  o.model.layers = 1;
  o.model.d_model = 8;
  o.model.heads = 2;
  o.model.d_ff = 8;
  o.batch_size = 8;
  G2PJob g2p(o);
  int total = 0;
  for (auto& [len, n] : pairs_of_length) total += n;
  REQUIRE(g2p.train_pairs() == total);
  std::map<size_t, int> batches_of_length;
  const int draws = 4000;
  for (int d = 0; d < draws; ++d) {
    const auto batch = g2p.draw_batch();
    REQUIRE(batch.size() == 8);
    for (const auto& e : batch) REQUIRE(e.src.size() == batch[0].src.size());  // one length a batch
    ++batches_of_length[batch[0].src.size()];
  }
  // A length comes up in proportion to its pairs (not 1/5 each): within 3
  // standard deviations of a binomial over 4000 draws.
  for (auto& [len, n] : pairs_of_length) {
    const double p = static_cast<double>(n) / total;
    CAPTURE(len);
    CHECK(std::abs(batches_of_length[len] - p * draws) < 3 * std::sqrt(draws * p * (1 - p)));
  }
  o.length_batches = false;
  G2PJob mixed(o);
  int mixed_batches = 0;
  for (int d = 0; d < 50; ++d) {
    const auto batch = mixed.draw_batch();
    for (const auto& e : batch) mixed_batches += e.src.size() != batch[0].src.size() ? 1 : 0;
  }
  CHECK(mixed_batches > 0);
}

TEST_CASE("g2p: by default the model learns phones without stress, --stress keep keeps the digits") {
  // "record" (noun and verb) differs only in stress once the digits go; so do
  // "a" read with Festival's ax (CMUdict's ah0) and with a stressed ah, while
  // its "ey" stays apart. Words chosen outside the held-out 10%.
  // A fourth word, held out, with phones of the third: the run needs one to
  // evaluate on.
  std::vector<std::string> words;
  std::string held;
  for (int i = 0; words.size() < 3 || held.empty(); ++i) {
    const std::string w = "w" + std::to_string(i);
    if (!g2p_held_out(w) && words.size() < 3) words.push_back(w);
    if (g2p_held_out(w) && held.empty()) held = w;
  }
  const std::string path = std::string(XG_TEST_TMPDIR) + "/stress_cmudict.out";
  std::ofstream(path) << "MNCL\n"
                      << "(\"" << words[0] << "\" n (((r eh) 1) ((k er) 0) ((d) 0)))\n"
                      << "(\"" << words[0] << "\" v (((r eh) 2) ((k er) 1) ((d) 0)))\n"
                      << "(\"" << words[1] << "\" dt (((ax) 0)))\n"
                      << "(\"" << words[1] << "\" n (((ey) 1)))\n"
                      << "(\"" << words[1] << "\" v (((ah) 1)))\n"
                      << "(\"" << words[2] << "\" nil (((b iy) 1)))\n"
                      << "(\"" << held << "\" nil (((b iy) 1)))\n";
  G2POptions o;
  o.dict = path;
  o.model.layers = 1;
  o.model.d_model = 8;
  o.model.heads = 2;
  o.model.d_ff = 8;
  o.batch_size = 2;
  CHECK_FALSE(o.keep_stress);
  Run plain_run(o, recipe(2, 1));
  G2PJob& plain = plain_run.job;
  CHECK(plain.phones() == phones("ah b d eh er ey iy k r"));
  CHECK(plain.train_pairs() == 4);  // record once, a twice (ah, ey), the third word once
  o.keep_stress = true;
  Run stressed_run(o, recipe(2, 1));
  G2PJob& stressed = stressed_run.job;
  CHECK(stressed.phones() == phones("ah0 ah1 b d eh1 eh2 er0 er1 ey1 iy1 k r"));
  CHECK(stressed.train_pairs() == 6);
  // The two are different runs: a checkpoint of one does not resume the other.
  const std::string ck = std::string(XG_TEST_TMPDIR) + "/stress_g2p.safetensors";
  stressed_run.trainer.save(ck);
  CHECK(contains(XG_THROW_MESSAGE(plain_run.trainer.load(ck), std::invalid_argument),
                 "stress keep in the file, drop here"));
  std::remove(ck.c_str());
}

namespace {
// A dictionary of two-syllable words (the tiny model's), written once.
std::string syllable_dict() {
  const std::string path = std::string(XG_TEST_TMPDIR) + "/syllable_cmudict.out";
  const std::vector<std::string> syl = {"ba", "ko", "mi", "tu", "sa", "ne"};
  std::ofstream out(path);
  out << "MNCL\n";
  for (const auto& a : syl)
    for (const auto& b : syl)
      out << "(\"" << a << b << "\" nil (((" << a[0] << " aa) 1) ((" << b[0] << " iy) 0)))\n";
  return path;
}
G2POptions tiny_options(const std::string& dict) {
  G2POptions o;
  o.dict = dict;
  o.model.layers = 1;
  o.model.d_model = 16;
  o.model.heads = 2;
  o.model.d_ff = 16;
  o.model.dropout = 0;
  o.batch_size = 4;
  return o;
}
std::vector<std::vector<double>> weights(nn::Module& m) {
  std::vector<std::vector<double>> w;
  for (auto& [name, p] : m.named_parameters()) w.push_back(p.to_vector());
  return w;
}
}  // namespace

TEST_CASE("g2p: the scored model is the mean of 8 snapshots over the last part of the schedule, resumed alike") {
  G2POptions o = tiny_options(syllable_dict());
  const train::TrainOptions r = recipe(40, 2, 0.5);  // snapshots at steps 22, 25, 27, 30, 32, 35, 37, 40
  Run run(o, r);
  Trainer& g2p = run.trainer;
  std::vector<std::vector<double>> sum;
  const std::set<int64_t> due = {22, 25, 27, 30, 32, 35, 37, 40};
  const std::string ck = std::string(XG_TEST_TMPDIR) + "/average_g2p.safetensors";
  const std::string mid = std::string(XG_TEST_TMPDIR) + "/average_g2p_26.safetensors";
  std::vector<std::vector<double>> at26;
  while (!g2p.finished()) {
    g2p.step();
    CHECK(g2p.averaged() == static_cast<int64_t>(std::count_if(due.begin(), due.end(), [&](int64_t s) { return s <= g2p.steps_done(); })));
    if (g2p.steps_done() == 26) {  // two snapshots in, for the resume below
      g2p.save(mid);
      at26 = weights(run.job.model());
    }
    if (!due.count(g2p.steps_done())) continue;
    const auto w = weights(run.job.model());
    if (sum.empty()) sum.assign(w.size(), {});
    for (size_t i = 0; i < w.size(); ++i) {
      sum[i].resize(w[i].size());
      for (size_t j = 0; j < w[i].size(); ++j) sum[i][j] += w[i][j] / 8;
    }
  }
  CHECK(g2p.steps_done() == 40);
  const auto last = weights(run.job.model());
  g2p.use_average();
  const auto mean = weights(run.job.model());
  double moved = 0;
  for (size_t i = 0; i < mean.size(); ++i)
    for (size_t j = 0; j < mean[i].size(); ++j) {
      CHECK(mean[i][j] == doctest::Approx(sum[i][j]).epsilon(1e-5).scale(1e-5));
      moved = std::max(moved, std::abs(mean[i][j] - last[i][j]));
    }
  CHECK(moved > 1e-4);  // the mean is not the last step's weights

  CHECK(XG_THROW_MESSAGE(g2p.step(), std::logic_error) ==
        "Trainer::step: the model holds the mean of the weights (use_average()), not the training state");

  // A run still under way: pronounce takes its last weights, not the mean of two snapshots.
  CHECK(weights(Pronouncer(mid).model().module()) == at26);
  // Resumed from step 26 (two snapshots in), the run ends with the same mean.
  Run resumed_run(o, r);
  Trainer& resumed = resumed_run.trainer;
  resumed.load(mid);
  CHECK(resumed.averaged() == 2);
  while (!resumed.finished()) resumed.step();
  const auto resumed_last = weights(resumed_run.job.model());
  resumed.use_average();
  const auto again = weights(resumed_run.job.model());
  for (size_t i = 0; i < mean.size(); ++i)
    for (size_t j = 0; j < mean[i].size(); ++j) CHECK(again[i][j] == doctest::Approx(mean[i][j]).epsilon(1e-6).scale(1e-6));

  // Saved after use_average(), a finished run: pronounce reads the mean, a
  // resume the last step's weights (the training state).
  resumed.save(ck);
  CHECK(weights(Pronouncer(ck).model().module()) == again);
  Run reloaded(o, r);
  reloaded.trainer.load(ck);
  CHECK(reloaded.trainer.finished());
  CHECK(weights(reloaded.job.model()) == resumed_last);
  CHECK(resumed_last != again);

  // Files that do not hold together are refused, naming what is wrong.
  auto rewrite = [&](auto&& edit) {
    std::map<std::string, std::string> meta;
    auto t = load_tensors(mid, &meta);
    edit(t, meta);
    save_tensors(ck, t, meta);
    Run g(o, r);
    return XG_THROW_MESSAGE(g.trainer.load(ck), FormatError);
  };
  CHECK(rewrite([](auto&, auto& meta) { meta["averaged"] = "3"; }) ==
        "checkpoint " + ck + ": averaged=3, more snapshots than the 2 due by step 26");
  CHECK(rewrite([](auto& t, auto&) { t.erase("average.out_proj.bias"); }) ==
        "checkpoint " + ck + ": averaged=2 but average.out_proj.bias is missing");
  CHECK(rewrite([](auto&, auto& meta) { meta["averaged"] = "0"; }) ==
        "checkpoint " + ck + ": average.decoder.layers.0.linear1.bias with averaged=0");
  CHECK(rewrite([](auto&, auto& meta) { meta["train_seconds"] = "-1"; }) ==
        "checkpoint " + ck + ": train_seconds '-1' is not a number of seconds >= 0");
  std::remove(mid.c_str());

  Run none(o, recipe(40, 2, 0));
  for (int i = 0; i < 5; ++i) none.trainer.step();
  CHECK(none.trainer.averaged() == 0);
  CHECK(XG_THROW_MESSAGE(none.trainer.use_average(), std::logic_error) ==
        "Trainer::use_average: no snapshot of the weights has been taken yet");
  std::remove(ck.c_str());
}

TEST_CASE("g2p: with a time limit the schedule runs over whichever ends first, steps or seconds") {
  G2POptions o = tiny_options(syllable_dict());
  train::TrainOptions r = recipe(1000000, 1);
  r.time_limit = 0.3;  // seconds: ends long before a million steps
  CHECK(r.clock_schedule);  // G2P's recipe: the clock ends the schedule
  Run run(o, r);
  Trainer& g2p = run.trainer;
  while (!g2p.finished() && g2p.steps_done() < 50000) {  // a step takes well under a millisecond
    g2p.step();
    CHECK(g2p.schedule_position() >= g2p.steps_done());
  }
  REQUIRE(g2p.finished());
  CHECK(g2p.steps_done() < 50000);
  CHECK(g2p.schedule_position() == 1000000);  // the clock, not the step count, ended it
  CHECK(g2p.train_seconds() >= 0.3);
  CHECK(g2p.current_lr() == doctest::Approx(r.lr / 10));  // the cosine ended
  Run by_steps(o, recipe(10, 1));
  for (int i = 0; i < 3; ++i) by_steps.trainer.step();
  CHECK(by_steps.trainer.schedule_position() == 3);
}

TEST_CASE("g2p: a dictionary whose words are all held out is an error, not a division by zero") {
  const std::string path = std::string(XG_TEST_TMPDIR) + "/held_out_cmudict.out";
  std::string held;
  for (int i = 0; held.empty(); ++i)
    if (g2p_held_out("w" + std::to_string(i))) held = "w" + std::to_string(i);
  std::ofstream(path) << "MNCL\n(\"" << held << "\" nil (((b aa) 1)))\n";
  G2POptions o;
  o.dict = path;
  CHECK(XG_THROW_MESSAGE(G2PJob{o}, std::invalid_argument) ==
        path + ": no word to train on (1 words in the dictionary, 1 held out for testing)");
}
