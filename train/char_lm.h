// A character-level language model (models::GPT) trained on Debian's
// fortunes: the training state, its checkpoints, the loop (progress line,
// evaluations in bits per character, metrics CSV, checkpoints, a wall-clock
// limit) and sampling. examples/char_lm.cpp is a thin program around it;
// bench/char_lm.py is its PyTorch twin (same model, data order and schedule).
//
//   xg::train::CharLMOptions o;  o.steps = 2000;
//   xg::train::CharLM lm(o);                     // reads /usr/share/games/fortunes
//   xg::train::run_char_lm(lm);                  // prints progress and "eval step N: val_bpc ..."
//   fmt::print("{}\n", lm.sample("Q: ", 200, {0.8, 40}, 1));
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "autograd/autocast.h"
#include "models/gpt.h"
#include "optim/optim.h"
#include "train/text.h"

namespace xg::train {

struct CharLMOptions {
  std::string data = kFortunesDir;  // a directory of fortune files (train/text.h)
  models::GPTConfig model;          // vocab is taken from the data; max_len is the context (T)
  int64_t batch_size = 32;          // B windows of T + 1 characters a step
  int64_t steps = 5000;             // the schedule's length, and the most steps
  double time_limit = 0;            // > 0: stop once training has taken this many seconds
  double lr = 2e-3;                 // peak of the warm-up + cosine schedule (down to lr / 10 at `steps`)
  int64_t warmup = 200;
  double weight_decay = 0.1;        // AdamW on matrices only (optim::weight_decay_groups)
  double clip_norm = 1.0;           // <= 0: off
  uint64_t seed = 1;                // initialisation, dropout and the data order
  int64_t eval_every = 500;
  int64_t eval_chars = 65536;       // validation characters per periodic evaluation (0: all)
  int64_t train_chars = 0;          // > 0: train on the first N characters of the split only (smoke runs)
  std::string checkpoint;           // "" = none
  int64_t checkpoint_every = 0;     // 0 = at the end only
  bool resume = false;
  Precision precision = Precision::f32;
  CharLMOptions();                  // a 4-layer, d_model 128 model over a 128-character context
  void validate() const;            // throws std::invalid_argument naming the first bad field
};

class CharLM {
 public:
  explicit CharLM(const CharLMOptions& o);  // loads and splits the data, builds model and optimiser
  double step();                            // one AdamW step; returns the batch's mean loss in nats
  int64_t steps_done() const { return step_; }
  double current_lr() const;
  // Bits per character on the first `chars` characters of the validation
  // split (0: all of it), in windows of the context length, each character
  // predicted from the ones before it in its window. No gradient, eval mode.
  double evaluate_bpc(int64_t chars);
  // `n` characters generated after `prompt` (which must use the vocabulary's
  // characters only; an empty prompt starts after a fortune's "%\n").
  std::string sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed);
  void save(const std::string& path) const;  // atomic (save_tensors)
  // Restores model, optimiser and step; the data order continues from there.
  // Throws std::invalid_argument listing the options that differ.
  void load(const std::string& path);

  const CharLMOptions& options() const { return opts_; }
  const CharVocab& vocab() const { return vocab_; }
  const TextSplit& data() const { return data_; }
  models::GPT& model() { return *model_; }
  int64_t tokens_per_step() const { return opts_.batch_size * opts_.model.max_len; }

 private:
  CharLMOptions opts_;
  TextSplit data_;
  CharVocab vocab_;
  std::vector<int64_t> train_ids_, valid_ids_;
  std::shared_ptr<models::GPT> model_;
  std::unique_ptr<optim::AdamW> opt_;
  std::unique_ptr<optim::WarmupCosine> schedule_;
  int64_t step_ = 0;
};

// Loads only what sampling needs from a checkpoint written by CharLM::save:
// the configuration, the vocabulary and the weights (no data, no optimiser).
struct CharSampler {
  explicit CharSampler(const std::string& checkpoint);
  std::string sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed);
  std::unique_ptr<CharVocab> vocab;
  std::shared_ptr<models::GPT> model;
};

struct CharLMLoop {
  int64_t log_every = 100;  // steps between progress lines when `out` is not a terminal
  std::string metrics;      // CSV: step,loss,lr,val_bpc,tokens_per_s,elapsed_s ("" = none)
  int64_t sample_chars = 120;  // characters sampled at each evaluation (0: none)
  std::FILE* out = stdout;
};

struct CharLMResult {
  int64_t steps = 0;
  double val_bpc = 0;      // the last evaluation's (on all of the validation split)
  double train_seconds = 0;
  bool timed_out = false;  // stopped by time_limit before `steps`
};

// Trains until options().steps or time_limit, evaluating every eval_every
// steps on eval_chars characters and, at the end, on the whole validation
// split ("final ... val_bpc=..."). Checkpoints as the task loop does
// (writable check before step 1, resume, nothing saved after a non-finite loss).
CharLMResult run_char_lm(CharLM& lm, const CharLMLoop& loop = {});

}  // namespace xg::train
