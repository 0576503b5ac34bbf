// The programs' command lines and the decode path, as the library parses and
// runs them: one regression test per finding of issue 13 (F2-F10, F14), each
// asserting the exact message.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "apps/seq2seq/cli.h"
#include "apps/seq2seq/seq2seq.h"
#include "autograd/serialize.h"
#include "tests/helpers.h"
#include "train/checkpoint.h"
#include "apps/common/program.h"

using namespace xg;
using namespace xg::seq2seq;
using xg::cli::Parsed;

namespace {

Parsed train_args(std::vector<std::string> args, TrainCommand* out = nullptr) {
  args.insert(args.begin(), "train_tasks");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  TrainCommand cmd;
  Parsed p = parse_train_command(static_cast<int>(argv.size()), argv.data(), cmd);
  if (out) *out = cmd;
  return p;
}

Parsed decode_args(std::vector<std::string> args, DecodeCommand* out = nullptr) {
  args.insert(args.begin(), "decode");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  DecodeCommand cmd;
  Parsed p = parse_decode_command(static_cast<int>(argv.size()), argv.data(), cmd);
  if (out) *out = cmd;
  return p;
}

std::string refused(const Parsed& p) {
  CHECK_FALSE(p.run);
  CHECK(p.exit_code == 2);
  return p.message;
}

// A tiny trained checkpoint, its metadata rewritten by `edit`.
std::string checkpoint(const std::string& name,
                       const std::function<void(std::map<std::string, std::string>&)>& edit = {}) {
  Seq2SeqOptions o;
  o.task.vocab = 8;
  o.task.max_len = 4;
  o.model.layers = 1;
  o.model.d_model = 8;
  o.model.heads = 2;
  o.model.d_ff = 16;
  o.eval_size = 4;
  o.batch_size = 4;
  const std::string path = std::string(XG_TEST_TMPDIR) + "/" + name;
  Seq2SeqJob job(o);
  train::Trainer(job, default_recipe()).save(path);
  if (edit) {
    std::map<std::string, std::string> meta;
    auto tensors = load_tensors(path, &meta);
    edit(meta);
    save_tensors(path, tensors, meta);
  }
  return path;
}

}  // namespace

TEST_CASE("cli: defaults parse, and every option lands in the options") {
  TrainCommand c;
  Parsed p = train_args({"--task", "reverse", "--layers", "3", "--d-model", "48", "--heads", "6", "--lr", "0.5",
                         "--eval-every", "7", "--log-every=3", "--resume", "--checkpoint", "x.safetensors",
                         "--no-samples", "--seed", "9"},
                        &c);
  REQUIRE(p.run);
  CHECK(c.job.task.task == Task::reverse);
  CHECK(c.job.model.layers == 3);
  CHECK(c.job.model.d_model == 48);
  CHECK(c.train.lr == 0.5);
  CHECK(c.loop.eval_every == 7);
  CHECK(c.loop.log_every == 3);
  CHECK(c.loop.resume);
  CHECK(c.job.samples == 0);
  CHECK(c.train.seed == 9);
  CHECK(c.job.seed == 9);
  CHECK(train_args({}).run);
  Parsed help = train_args({"--help"});
  CHECK_FALSE(help.run);
  CHECK(help.exit_code == 0);
  CHECK(xgt::contains(help.message, "--eval-every INT=100"));
}

TEST_CASE("cli: F2, zero evaluation and log intervals are refused, and fit() refuses a zero interval") {
  CHECK(refused(train_args({"--eval-every", "0"})) ==
        "train_tasks: --eval-every 0: expected a whole number from 1 to 1000000000 (try --help)");
  CHECK(refused(train_args({"--log-every", "0"})) ==
        "train_tasks: --log-every 0: expected a whole number from 1 to 1000000000 (try --help)");
  train::LoopOptions o;
  o.eval_every = 0;
  CHECK(XG_THROW_MESSAGE(o.validate(), std::invalid_argument) == "eval_every 0: expected 1..1099511627776");
  o.eval_every = 1;
  o.log_every = 0;
  CHECK(XG_THROW_MESSAGE(o.validate(), std::invalid_argument) == "log_every 0: expected 1..1099511627776");
}

TEST_CASE("cli: F3, integers are digits in range: no fraction, exponent, nan or wrap-around") {
  CHECK(refused(train_args({"--layers", "1.5"})) ==
        "train_tasks: --layers 1.5: expected a whole number from 1 to 64 (try --help)");
  CHECK(refused(train_args({"--steps", "1e30"})) ==
        "train_tasks: --steps 1e30: expected a whole number from 1 to 1000000000 (try --help)");
  CHECK(refused(train_args({"--batch", "nan"})) ==
        "train_tasks: --batch nan: expected a whole number from 1 to 65536 (try --help)");
  CHECK(refused(train_args({"--batch", "0x10"})) ==
        "train_tasks: --batch 0x10: expected a whole number from 1 to 65536 (try --help)");
  CHECK(refused(train_args({"--seed", "99999999999999999999"})) ==
        "train_tasks: --seed 99999999999999999999: expected a whole number from 0 to 4611686018427387903 (try --help)");
}

TEST_CASE("cli: F4, --resume is a flag with one meaning, and needs a checkpoint") {
  CHECK(refused(train_args({"--resume"})) == "train_tasks: --resume needs --checkpoint PATH");
  TrainCommand c;
  REQUIRE(train_args({"--resume=true", "--checkpoint", "c"}, &c).run);
  CHECK(c.loop.resume);
  REQUIRE(train_args({"--resume=false", "--checkpoint", "c"}, &c).run);
  CHECK_FALSE(c.loop.resume);
  CHECK(xgt::contains(refused(train_args({"--resume=maybe", "--checkpoint", "c"})), "--resume"));
  // "--resume 0" was once read as "no"; now the 0 is an argument nobody asked for.
  CHECK(refused(train_args({"--resume", "0", "--checkpoint", "c"})) ==
        "train_tasks: The following argument was not expected: 0 (try --help)");
}

TEST_CASE("cli: F5, real options are finite and in range") {
  CHECK(refused(train_args({"--smoothing", "nan"})) ==
        "train_tasks: --smoothing nan: expected a number from 0 to 0.999 (try --help)");
  CHECK(refused(train_args({"--dropout", "1"})) ==
        "train_tasks: --dropout 1: expected a number from 0 to 0.99 (try --help)");
  CHECK(refused(train_args({"--lr", "inf"})) == "train_tasks: --lr inf: expected a number above 0, at most 1e+30 (try --help)");
  CHECK(refused(train_args({"--target", "-0.5"})) ==
        "train_tasks: --target -0.5: expected a number from 0 to 1 (try --help)");
  Seq2SeqOptions o;
  o.label_smoothing = std::nan("");
  CHECK(XG_THROW_MESSAGE(o.validate(), std::invalid_argument) ==
        "label_smoothing nan: expected a number from 0 to 0.999");
}

TEST_CASE("cli: F7, an unwritable checkpoint path fails before step 1 and creates nothing") {
  train::LoopOptions loop;
  loop.checkpoint = "/nonexistent-xgrad-dir/x.safetensors";
  CHECK(XG_THROW_MESSAGE(train::check_outputs({{"checkpoint", loop.checkpoint}}), std::runtime_error) ==
        "checkpoint /nonexistent-xgrad-dir/x.safetensors: the folder /nonexistent-xgrad-dir does not exist");
  Seq2SeqOptions o;
  o.model.layers = 1;
  o.model.d_model = 8;
  o.model.heads = 2;
  o.model.d_ff = 16;
  o.eval_size = 4;
  Seq2SeqJob job(o);
  train::Trainer t(job, default_recipe());
  loop.metrics = std::string(XG_TEST_TMPDIR) + "/f7_metrics.csv";
  std::remove(loop.metrics.c_str());
  std::FILE* sink = std::tmpfile();
  loop.out = sink;
  CHECK_THROWS_AS(train::fit(t, loop), std::runtime_error);
  std::fclose(sink);
  CHECK(t.steps_done() == 0);
  CHECK(::access(loop.metrics.c_str(), F_OK) != 0);
  CHECK(XG_THROW_MESSAGE(train::check_outputs({{"checkpoint", XG_TEST_TMPDIR}}), std::runtime_error) ==
        std::string("checkpoint ") + XG_TEST_TMPDIR + " is a directory, not a file");
}

TEST_CASE("cli: F9, decode's numbers are checked: beam, alpha, max-len") {
  CHECK(refused(decode_args({"--checkpoint", "c", "--beam", "abc"})) ==
        "decode: --beam abc: expected a whole number from 1 to 64 (try --help)");
  CHECK(refused(decode_args({"--checkpoint", "c", "--beam", "100000"})) ==
        "decode: --beam 100000: expected a whole number from 1 to 64 (try --help)");
  CHECK(refused(decode_args({"--checkpoint", "c", "--beam", "0"})) ==
        "decode: --beam 0: expected a whole number from 1 to 64 (try --help)");
  CHECK(refused(decode_args({"--checkpoint", "c", "--beam", "-2"})) ==
        "decode: --beam -2: expected a whole number from 1 to 64 (try --help)");
  CHECK(refused(decode_args({"--checkpoint", "c", "--alpha", "-5"})) ==
        "decode: --alpha -5: expected a number from 0 to 10 (try --help)");
  CHECK(refused(decode_args({"--checkpoint", "c", "--max-len", "1e9"})) ==
        "decode: --max-len 1e9: expected a whole number from 0 to 1048576 (try --help)");
  CHECK(refused(decode_args({})) == "decode: --checkpoint is required (try --help)");
  DecodeCommand c;
  REQUIRE(decode_args({"--checkpoint", "c", "--beam", "4", "3 4 5", "6"}, &c).run);
  CHECK(c.beam == 4);
  CHECK(c.inputs == std::vector<std::string>{"3 4 5", "6"});
}

TEST_CASE("decode: F10, a checkpoint's configuration is checked before any model is built") {
  const std::string big = checkpoint("f10_big.safetensors", [](auto& m) { m["cfg.d_model"] = "200000000"; });
  CHECK(XG_THROW_MESSAGE(Decoder{big}, FormatError) ==
        "checkpoint " + big + ": metadata 'cfg.d_model' is '200000000', expected a whole number from 1 to 65536");
  const std::string deep = checkpoint("f10_deep.safetensors", [](auto& m) { m["cfg.layers"] = "1000000"; });
  CHECK(XG_THROW_MESSAGE(Decoder{deep}, FormatError) ==
        "checkpoint " + deep + ": metadata 'cfg.layers' is '1000000', expected a whole number from 1 to 1024");
  // Within the limits but not what the file holds: refused by the count, before building.
  const std::string wide = checkpoint("f10_wide.safetensors", [](auto& m) {
    m["cfg.d_model"] = "65536";
    m["cfg.heads"] = "2";
  });
  CHECK(XG_THROW_MESSAGE(Decoder{wide}, FormatError) ==
        "checkpoint " + wide +
            ": its configuration (layers 1, d_model 65536, d_ff 16, vocab 8) has 51545899040 parameters but the file "
            "holds 1568 model values");
  const std::string text = checkpoint("f10_text.safetensors", [](auto& m) { m["cfg.layers"] = "1e6"; });
  CHECK(XG_THROW_MESSAGE(Decoder{text}, FormatError) ==
        "checkpoint " + text + ": metadata 'cfg.layers' is '1e6', expected a whole number from 1 to 1024");
  Decoder ok(checkpoint("f10_ok.safetensors"));
  CHECK(ok.info().task.max_len == 4);
  CHECK(ok.model().module().num_parameters() == 1568);
}

TEST_CASE("decode: F14, every line decodes to one line, bad tokens are named, long inputs are flagged") {
  Decoder d(checkpoint("f14.safetensors"));
  CHECK(d.parse("").empty());
  CHECK(d.decode({}).empty());  // the program prints an empty line for it
  CHECK(d.parse(" 3  4 ") == std::vector<int64_t>{3, 4});
  CHECK(XG_THROW_MESSAGE(d.parse("3 x"), std::invalid_argument) == "'x' is not a symbol id: symbols are 3..7");
  CHECK(XG_THROW_MESSAGE(d.parse("8"), std::invalid_argument) == "'8' is not a symbol id: symbols are 3..7");
  CHECK(XG_THROW_MESSAGE(d.parse("-3"), std::invalid_argument) == "'-3' is not a symbol id: symbols are 3..7");
  CHECK(d.length_warning({3, 4, 5, 6}).empty());
  CHECK(d.length_warning({3, 4, 5, 6, 7}) ==
        "5 tokens, longer than the 1..4 the model was trained on: expect wrong output");
  const auto out = d.decode({3, 4, 5}, 2, 0.6, 3);
  CHECK(out.size() <= 3);
}
