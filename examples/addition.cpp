// A whole application in one file: the Transformer learns multi-digit
// addition ("123+45" -> "168"). It implements train::Job (the batches, the
// loss, an evaluation, what identifies the run) and gets the rest from
// train/: progress, evaluations, a metrics CSV, checkpoints and resume, the
// non-finite stop, checkpoint averaging and data parallel under mpirun.
// docs/applications.md walks through it.
//
//   ./addition [--digits 3] [--steps 3000] [--checkpoint add.safetensors [--resume]]
//   mpirun -np 2 ./addition ...      the batch is split over the processes
#include <fmt/format.h>
#include "models/seq2seq.h"
#include "apps/common/cli.h"

using namespace xg;

// Tokens: padding, begin and end (models/seq2seq.h), the digits 0..9, '+'.
constexpr int64_t kZero = models::kFirstSymbol, kPlus = kZero + 10, kVocab = kPlus + 1;

std::vector<int64_t> digits_of(int64_t n) {  // most significant first
  std::vector<int64_t> d;
  do d.insert(d.begin(), kZero + n % 10); while ((n /= 10) > 0);
  return d;
}
int64_t ipow(int64_t e) { return e == 0 ? 1 : 10 * ipow(e - 1); }  // 10^e

// Operands of 1..max_digits digits (the length drawn first, then the value).
models::Example random_sum(int64_t max_digits, Generator& g) {
  auto operand = [&] {
    const int64_t len = 1 + static_cast<int64_t>(g.engine()() % max_digits), low = len == 1 ? 0 : ipow(len - 1);
    return low + static_cast<int64_t>(g.engine()() % static_cast<uint64_t>(ipow(len) - low));
  };
  const int64_t a = operand(), b = operand();
  models::Example e{digits_of(a), digits_of(a + b)};
  e.src.push_back(kPlus);
  for (int64_t d : digits_of(b)) e.src.push_back(d);
  return e;
}

std::string text(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += id == kPlus ? '+' : id >= kZero && id < kPlus ? static_cast<char>('0' + id - kZero) : '?';
  return s;
}

class AdditionJob : public train::Job {
 public:
  AdditionJob(models::TransformerConfig c, int64_t digits, int64_t batch, uint64_t seed)
      : digits_(digits), batch_(batch), data_(seed) {
    train::check_batch_per_process(batch, "sum");
    c.src_vocab = c.tgt_vocab = kVocab;
    c.max_len = 2 * digits + 3;  // the longest source and its begin and end
    c.seed = seed;
    model_ = std::make_shared<models::Transformer>(c);  // validates c
    Generator held_out(seed ^ 0xadd);                   // another stream than training's
    for (int i = 0; i < 500; ++i) eval_.push_back(random_sum(digits, held_out));
  }
  nn::Module& model() override { return *model_; }
  Generator* dropout_generator() override { return &model_->dropout_generator(); }
  int64_t model_width() const override { return model_->config().d_model; }
  std::string describe() override {
    const auto& c = model_->config();
    return fmt::format("addition of 1..{}-digit numbers, batch {} | Transformer N={} d_model={} heads={} d_ff={}",
                       digits_, batch_, c.layers, c.d_model, c.heads, c.d_ff);
  }
  // Every process draws the whole batch (the same generator) and keeps its rows.
  train::StepLoss loss(const train::Shard& shard) override {
    std::vector<models::Example> all;
    int64_t tokens = 0;
    for (int64_t i = 0; i < batch_; ++i) {
      all.push_back(random_sum(digits_, data_));
      tokens += static_cast<int64_t>(all.back().tgt.size()) + 1;  // the digits and the end token
    }
    const auto b = models::make_batch({all.begin() + shard.begin(batch_), all.begin() + shard.end(batch_)});
    return {model_->loss(b.src, b.tgt_in, b.tgt_out, 0.0), b.target_tokens, tokens};
  }
  train::Evaluation evaluate(train::EvalStage, int64_t) override {
    const auto got = models::greedy_decode(*model_, models::make_batch(eval_).src, models::kBos, models::kEos,
                                           digits_ + 2);
    double right = 0;
    for (size_t i = 0; i < eval_.size(); ++i) right += got[i] == eval_[i].tgt;
    return {{{"exact_match", right / static_cast<double>(eval_.size())}},
            fmt::format("({} held-out sums)", eval_.size()),
            {fmt::format("  {} = {}", text(eval_[0].src), text(got[0]))}};
  }
  std::string final_line(const train::RunSummary& r) const override {
    return fmt::format("steps={} exact_match={:.3f}", r.steps, r.final.metric("exact_match"));
  }
  std::string kind() const override { return "addition"; }
  Metadata identity() const override {  // a resumed run must have the same model, digits and seed
    Metadata m = model_->config().to_metadata();
    m["digits"] = std::to_string(digits_);
    m["seed"] = std::to_string(model_->config().seed);  // the held-out sums are drawn from it
    return m;
  }
  Metadata state() const override { return {{"data", data_.state()}}; }
  void set_state(const Metadata& m, const std::string& path) override {
    Generator g;
    const auto it = m.find("data");
    try {
      g.set_state(it == m.end() ? "" : it->second);
    } catch (const std::invalid_argument&) {
      throw FormatError("checkpoint " + path + ": no readable 'data' generator state");
    }
    data_ = g;
  }

 private:
  std::shared_ptr<models::Transformer> model_;
  int64_t digits_, batch_;
  Generator data_;
  std::vector<models::Example> eval_;
};

int main(int argc, char** argv) {
  models::TransformerConfig model;  // 2 layers, d_model 64, 4 heads, d_ff 256
  model.dropout = 0;
  int64_t digits = 3, batch = 64, threads = 0;
  train::TrainOptions recipe;
  recipe.steps = 3000;
  train::LoopOptions loop;
  loop.eval_every = 250;
  loop.target_metric = "exact_match";
  loop.target = 0.99;
  cli::TrainWords words;
  auto setup = [&](CLI::App& app) {
    app.description("Teaches the Transformer multi-digit addition; the last line is: final steps=N exact_match=...");
    cli::add_int(app, "--digits", digits, 1, 9, "most digits of each operand");
    cli::add_int(app, "--batch", batch, 1, 1 << 16, "sums per step (B), split over processes under mpirun");
    cli::add_model_options(app, model, "encoder and decoder layers (N)");
    cli::add_real(app, "--target", loop.target, 0, 1, "stop at this held-out exact match (0: run all steps)");
    cli::add_train_options(app, recipe, words, "stop once training has taken this many seconds (0: no limit)");
    cli::add_loop_options(app, loop, "continue from --checkpoint when that file exists");
    cli::add_threads(app, threads);
  };
  auto check = [&] {
    cli::check_heads(model);
    cli::check_loop_options(loop);
    cli::check_train_options(recipe, words);
  };
  const cli::Parsed parsed = cli::parse_with("addition", argc, argv, setup, check);
  return cli::run_program("addition", argc, argv, parsed, threads, [&] {
    AdditionJob job(model, digits, batch, recipe.seed);
    train::fit(job, recipe, loop);
    return 0;
  });
}
