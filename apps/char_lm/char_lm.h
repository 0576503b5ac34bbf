// A character-level language model (models::GPT) trained on Debian's
// fortunes, as a train::Job: windows of the text drawn by a formula of the
// seed and the step, evaluation in bits per character, sampling.
// apps/char_lm/main.cpp is the program; bench/char_lm.py its PyTorch twin
// (same model, data order and schedule).
//
//   xg::char_lm::CharLMJob job(xg::char_lm::CharLMOptions{});     // reads /usr/share/games/fortunes
//   xg::train::Trainer trainer(job, xg::char_lm::default_recipe());
//   xg::train::fit(trainer);                                       // "eval step N: val_bpc ..."
//   fmt::print("{}\n", job.sample("Q: ", 200, {0.8, 40}, 1));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/char_lm/text.h"
#include "models/gpt.h"
#include "nn/sampling.h"
#include "train/trainer.h"

namespace xg::char_lm {

struct CharLMOptions {
  std::string data = kFortunesDir;  // a directory of fortune files (text.h)
  models::GPTConfig model;          // vocab is taken from the data; max_len is the context (T)
  int64_t batch_size = 32;          // B windows of T + 1 characters a step
  int64_t eval_chars = 65536;       // validation characters per periodic evaluation (0: all)
  int64_t train_chars = 0;          // > 0: train on the first N characters of the split only (smoke runs)
  int64_t sample_chars = 120;       // characters sampled at each evaluation (0: none)
  uint64_t seed = 1;                // initialisation, dropout and the data order
  CharLMOptions();                  // a 4-layer, d_model 128 model over a 128-character context
  void validate() const;            // throws std::invalid_argument naming the first bad field
};

// nanoGPT's recipe: AdamW (0.9, 0.95), weight decay 0.1 on matrices, a
// warm-up of 200 steps then a cosine from 2e-3 down to 2e-4 over 5000 steps,
// clipping at 1.
train::TrainOptions default_recipe();

class CharLMJob : public train::Job {
 public:
  explicit CharLMJob(const CharLMOptions& o);  // loads and splits the data, builds the model
  nn::Module& model() override { return *model_; }
  models::GPT& gpt() { return *model_; }
  Generator* dropout_generator() override { return &model_->dropout_generator(); }
  std::string describe() override;
  train::StepLoss loss(const train::Shard& shard) override;
  train::Evaluation evaluate(train::EvalStage stage, int64_t step) override;
  std::string loss_note(double loss) const override;
  std::string final_line(const train::RunSummary& run) const override;
  std::string kind() const override { return "char_lm"; }
  Metadata identity() const override;
  Metadata summarised() const override { return {{"vocab", "vocab differs"}}; }

  // Bits per character on the first `chars` characters of the validation
  // split (0: all of it), in windows of the context length, each character
  // predicted from the ones before it in its window. No gradient, eval mode.
  double evaluate_bpc(int64_t chars);
  // `n` characters generated after `prompt` (which must use the vocabulary's
  // characters only; an empty prompt starts after a fortune's "%\n").
  std::string sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed);

  const CharLMOptions& options() const { return opts_; }
  const CharVocab& vocab() const { return vocab_; }
  const TextSplit& data() const { return data_; }

 private:
  CharLMOptions opts_;
  TextSplit data_;
  CharVocab vocab_;
  std::vector<int64_t> train_ids_, valid_ids_;
  std::shared_ptr<models::GPT> model_;
};

// Loads only what sampling needs from a checkpoint of CharLMJob: the
// configuration, the vocabulary and the weights (no data, no optimiser).
struct CharSampler {
  explicit CharSampler(const std::string& checkpoint);
  std::string sample(const std::string& prompt, int64_t n, const nn::SamplingOptions& s, uint64_t seed);
  std::unique_ptr<CharVocab> vocab;
  std::shared_ptr<models::GPT> model;
};

}  // namespace xg::char_lm
