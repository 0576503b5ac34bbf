// The character language model: the fortune split, the byte vocabulary, the
// batch windows, bits per character, checkpoints and sampling, on a small
// corpus written by the test (the real one is exercised by the CTest runs of
// char_lm).
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include "apps/char_lm/char_lm.h"
#include "autograd/serialize.h"
#include "tests/helpers.h"
#include "train/checkpoint.h"

using namespace xg;
using namespace xg::char_lm;
using train::Trainer;
using xgt::contains;

namespace {

// A directory of two fortune files, an index and a link, as Debian ships them.
std::string write_corpus(const std::string& name, int records_per_file = 60) {
  const std::string dir = std::string(XG_TEST_TMPDIR) + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  for (const char* file : {"beta", "alpha"}) {
    std::ofstream out(dir + "/" + file, std::ios::binary);
    for (int i = 0; i < records_per_file; ++i)
      out << "The " << file << " fortune number " << i << " says: all is " << (i % 3 ? "well" : "fine") << ".\n%\n";
  }
  std::ofstream(dir + "/alpha.dat") << "binary index, not text \x01\x02";
  ::symlink("alpha", (dir + "/alpha.u8").c_str());
  return dir;
}

CharLMOptions tiny(const std::string& dir) {
  CharLMOptions o;
  o.data = dir;
  o.model.layers = 1;
  o.model.d_model = 16;
  o.model.heads = 2;
  o.model.d_ff = 32;
  o.model.max_len = 16;
  o.batch_size = 4;
  return o;
}

train::TrainOptions tiny_recipe() {
  train::TrainOptions o = default_recipe();
  o.steps = 40;
  o.warmup = 2;
  o.lr = 1e-2;
  return o;
}

}  // namespace

TEST_CASE("text: FNV-1a and SplitMix64 give their published values") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(splitmix64(0) == 0xe220a8397b1dcdafull);
}

TEST_CASE("text: load_fortunes splits records by their hash, skips indexes and links, names a missing directory") {
  const std::string dir = write_corpus("corpus_split");
  TextSplit s = load_fortunes(dir, 50);
  CHECK(s.files == 2);
  CHECK(s.train_records + s.valid_records == 120);
  CHECK(s.valid_records > 20);
  CHECK(s.train_records > 20);
  CHECK(s.train.find("index") == std::string::npos);  // alpha.dat was not read
  // Each record sits in the split its hash names, once, followed by "%\n".
  for (int i = 0; i < 60; ++i) {
    const std::string rec = "The alpha fortune number " + std::to_string(i) + " says: all is " +
                            (i % 3 ? "well" : "fine") + ".\n";
    const bool valid = fnv1a64(rec) % 100 < 50;
    CHECK((valid ? s.valid : s.train).find(rec + "%\n") != std::string::npos);
    CHECK((valid ? s.train : s.valid).find(rec) == std::string::npos);
  }
  CHECK(load_fortunes(dir, 0).valid.empty());
  CHECK(load_fortunes(dir, 100).train.empty());
  CHECK(XG_THROW_MESSAGE(load_fortunes(dir + "/none"), std::runtime_error) ==
        "load_fortunes: no fortune file in " + dir + "/none (install Debian's fortunes package: apt-get install fortunes)");
  CHECK(XG_THROW_MESSAGE(load_fortunes(dir, 101), std::invalid_argument) ==
        "load_fortunes: valid_percent 101: expected 0 to 100");
}

TEST_CASE("text: CharVocab encodes, decodes, round-trips its stored form and names what it cannot read") {
  CharVocab v("hello, world\n");
  CHECK(v.size() == 10);  // \n space , d e h l o r w
  const std::string text = "hello\nworld";
  CHECK(v.decode(v.encode(text)) == text);
  CHECK(v.encode("\n ,")[0] == 0);  // ids follow byte order: '\n' is the smallest
  CHECK(XG_THROW_MESSAGE(v.encode("hex"), std::invalid_argument) ==
        "character 'x' (byte 120) at position 2 is not in the vocabulary of 10 characters");
  CHECK(XG_THROW_MESSAGE(v.encode("h\t"), std::invalid_argument) ==
        "byte 9 at position 1 is not in the vocabulary of 10 characters");
  CHECK(XG_THROW_MESSAGE(v.decode({0, 10}), std::invalid_argument) == "CharVocab::decode: id 10 is outside [0, 10)");
  CharVocab back = CharVocab::from_string(v.to_string());
  CHECK(back.to_string() == v.to_string());
  CHECK(back.encode(text) == v.encode(text));
  CHECK(XG_THROW_MESSAGE(CharVocab::from_string("10 32 32"), std::invalid_argument) ==
        "CharVocab: '32' in the stored vocabulary is not a byte value above the previous one (expected increasing "
        "numbers 0 to 255)");
  CHECK_THROWS_AS(CharVocab::from_string("10 256"), std::invalid_argument);
  CHECK_THROWS_AS(CharVocab::from_string("x"), std::invalid_argument);
  CHECK_THROWS_AS(CharVocab::from_string(""), std::invalid_argument);
}

TEST_CASE("text: window_start stays inside the text and depends on seed, step and row") {
  std::set<int64_t> seen;
  for (int64_t step = 1; step <= 50; ++step)
    for (int64_t b = 0; b < 4; ++b) {
      const int64_t s = window_start(7, step, 4, b, 1000, 16);
      CHECK(s >= 0);
      CHECK(s + 16 < 1000);
      seen.insert(s);
    }
  CHECK(seen.size() > 150);  // 200 draws from 984 starts: few repeats
  CHECK(window_start(7, 3, 4, 1, 1000, 16) == window_start(7, 3, 4, 1, 1000, 16));
  CHECK(window_start(7, 3, 4, 1, 1000, 16) != window_start(8, 3, 4, 1, 1000, 16));
  CHECK(XG_THROW_MESSAGE(window_start(1, 1, 1, 0, 16, 16), std::invalid_argument) ==
        "window_start: a text of 16 characters has no window of 16 + 1");
}

TEST_CASE("char_lm: an untrained model scores about log2(V) bits per character, training lowers it") {
  CharLMJob lm(tiny(write_corpus("corpus_train")));
  Trainer t(lm, tiny_recipe());
  const double v = static_cast<double>(lm.vocab().size());
  const double before = lm.evaluate_bpc(0);
  // Near-uniform predictions from small initial weights: log2(V) plus what the
  // spread of the initial logits costs (0.06 bits measured here); in nats it
  // would be 1.4 bits lower.
  CHECK(before > std::log2(v));
  CHECK(before < std::log2(v) + 0.15);
  for (int i = 0; i < 40; ++i) t.step();
  const double after = lm.evaluate_bpc(0);
  CHECK(after < before - 1.0);
  CHECK(t.steps_done() == 40);
  CHECK(t.finished());
  // evaluate_bpc(n) reads the first n characters: a prefix scores differently from all
  CHECK(lm.evaluate_bpc(40) != doctest::Approx(after));
}

TEST_CASE("char_lm: a resumed run continues the same data order and reaches the same parameters") {
  const std::string dir = write_corpus("corpus_resume");
  const std::string ck = std::string(XG_TEST_TMPDIR) + "/char_lm_resume.safetensors";
  CharLMJob a(tiny(dir));
  Trainer ta(a, tiny_recipe());
  for (int i = 0; i < 5; ++i) ta.step();
  ta.save(ck);
  const double a6 = ta.step(), a7 = ta.step();
  CharLMJob b(tiny(dir));
  Trainer tb(b, tiny_recipe());
  tb.load(ck);
  CHECK(tb.steps_done() == 5);
  CHECK(tb.step() == a6);
  CHECK(tb.step() == a7);
  CharLMOptions other = tiny(dir);
  other.batch_size = 5;
  other.model.d_model = 32;
  CharLMJob c(other);
  Trainer tc(c, tiny_recipe());
  const std::string msg = XG_THROW_MESSAGE(tc.load(ck), std::invalid_argument);
  CHECK(contains(msg, "was written by a different run: batch 4 in the file, 5 here; cfg.d_model 16 in the file, 32 here"));
  // sampling from the checkpoint alone: the vocabulary's characters, reproducible by seed
  CharSampler s(ck);
  const std::string x = s.sample("The ", 30, {0.8, 0, 1.0}, 5);
  CHECK(x.size() == 30);
  for (char ch : x) CHECK(a.vocab().contains(static_cast<unsigned char>(ch)));
  CHECK(s.sample("The ", 30, {0.8, 0, 1.0}, 5) == x);
  CHECK(XG_THROW_MESSAGE(s.sample("Q!", 5, {}, 1), std::invalid_argument) ==
        "character 'Q' (byte 81) at position 0 is not in the vocabulary of " + std::to_string(a.vocab().size()) +
            " characters");
  CHECK(XG_THROW_MESSAGE(train::load_for_inference(ck, "g2p", "g2p train"), FormatError) ==
        "checkpoint " + ck + " was not written by g2p train (no kind=g2p in its metadata)");
  // more characters than the context holds: the window slides
  CHECK(s.sample("", 50, {1.0, 0, 1.0}, 2).size() == 50);
  std::remove(ck.c_str());
}

TEST_CASE("char_lm: options are checked and name the bad field") {
  train::TrainOptions r = tiny_recipe();
  r.warmup = 40;
  CHECK(XG_THROW_MESSAGE(r.validate(), std::invalid_argument) == "warmup 40 must be below steps 40");
  r = tiny_recipe();
  r.time_limit = std::nan("");
  CHECK(XG_THROW_MESSAGE(r.validate(), std::invalid_argument) ==
        "time_limit nan: expected a finite number from 0 to 1000000000000");
  CharLMOptions o = tiny("unused");
  o.batch_size = 0;
  CHECK(XG_THROW_MESSAGE(CharLMJob{o}, std::invalid_argument) == "CharLMOptions: batch_size 0: expected at least 1");
  o = tiny(write_corpus("corpus_small", 1));
  o.model.max_len = 512;
  CHECK(contains(XG_THROW_MESSAGE(CharLMJob{o}, std::invalid_argument), "training characters are too few for a context of 512"));
}
