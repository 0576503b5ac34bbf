// Grapheme-to-phoneme on CMUdict (cmudict.h) with the encoder-decoder
// Transformer, as a train::Job: batches of one spelling length, greedy and
// beam-search evaluation by word and phoneme error rates, and the
// Pronouncer that reads its checkpoints. apps/g2p/main.cpp is the program.
//
//   xg::g2p::G2PJob job(xg::g2p::G2POptions{});          // reads the dictionary
//   xg::train::Trainer trainer(job, xg::g2p::default_recipe());
//   xg::train::fit(trainer, loop);                        // progress, evaluations, "final ... wer=..."
//   xg::g2p::Pronouncer("g2p.safetensors").pronounce("hello");  // {"hh", "ah", "l", "ow"}
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/encoder_decoder.h"
#include "apps/g2p/cmudict.h"
#include "models/seq2seq_model.h"
#include "train/trainer.h"

namespace xg::g2p {

using models::Example;

struct G2POptions {
  std::string dict = kCmudictPath;
  models::TransformerConfig model;  // vocabularies are taken from the dictionary
  models::Seq2SeqKind model_kind = models::Seq2SeqKind::transformer;  // rnn: then `rnn` is the model
  models::RNNSeq2SeqConfig rnn;     // vocabularies are taken from the dictionary
  int64_t batch_size = 128;         // (word, pronunciation) pairs a step, split over processes under mpirun
  // true: every batch holds words of one spelling length (little padding; each
  // pair still drawn with probability 1/pairs); false: pairs drawn uniformly.
  bool length_batches = true;
  // false (the default): the model learns and outputs phones without stress
  // digits ("er"; CMUdict's 39 phones, Festival's "ax" read as "ah0"), the
  // form of the published CMUdict figures; a word's pronunciations that
  // differ only in stress become one training pair. true: phones keep their
  // stress ("er1", 54 phones), and the scores with stress mean something.
  bool keep_stress = false;
  double label_smoothing = 0.1;
  int64_t eval_words = 1000;        // held-out words decoded greedily at each evaluation (0: all)
  int64_t beam = 4;                 // the final evaluation's beam, over every held-out word
  int64_t max_words = 0;            // > 0: train on the first N training words only (smoke runs)
  uint64_t seed = 1;                // initialisation, dropout, batches
  G2POptions();                     // N=3, d_model 256, 4 heads, d_ff 1024, dropout 0.1, pre-norm
  void validate() const;            // throws std::invalid_argument naming the first bad field
};

// The default run: AdamW (0.9, 0.98) with weight decay 0.01, a warm-up of
// 1,000 steps then a cosine from 1.5e-3 to 1.5e-4 over 60,000 steps or a time
// limit of 3,000 s, whichever ends first (clock_schedule: a run of under an
// hour with its evaluations on a 2-core machine), clipping at 1, the mean
// of 8 snapshots over the last 20% scored, bf16 where the CPU has
// AVX512_BF16 (else f32).
train::TrainOptions default_recipe();

// The model, its width and dropout generator, the data generator's state
// and the loss of a process's share (shard_loss) come from
// apps::EncoderDecoderJob.
class G2PJob : public apps::EncoderDecoderJob {
 public:
  explicit G2PJob(const G2POptions& o);  // reads the dictionary, builds the model
  std::string describe() override;
  train::StepLoss loss(const train::Shard& shard) override;
  train::Evaluation evaluate(train::EvalStage stage, int64_t step) override;
  std::string final_line(const train::RunSummary& run) const override;
  std::string kind() const override { return "g2p"; }
  Metadata identity() const override;
  Metadata summarised() const override { return {{"phones", "phones differ"}, {"letters", "letters differ"}}; }

  // The next training batch (advances the data generator): `length_batches`
  // decides whether it holds one spelling length or any.
  std::vector<Example> draw_batch();
  // n words spread evenly over the (alphabetical) list of held-out words, or
  // of training words (n 0: all), decoded greedily (beam 1, batched) or by
  // beam search. Training words against held-out ones tell a model that has
  // not yet fitted its data (both high) from one that generalises poorly.
  enum class Words { held_out, training };
  G2PScores evaluate_words(int64_t n, int64_t beam, Words which = Words::held_out);

  const G2POptions& options() const { return opts_; }
  const std::vector<std::string>& test_words() const { return test_words_; }
  const std::vector<std::string>& train_words() const { return train_words_; }  // alphabetical
  int64_t train_pairs() const { return static_cast<int64_t>(train_.size()); }
  const std::string& letters() const { return letters_; }
  const std::vector<std::string>& phones() const { return phones_; }

 private:
  // The constructor's steps, in order: the letters and phones (stress
  // dropped unless kept), the held-out and training split (returns the
  // longest word or pronunciation), the batches' buckets, the model.
  void read_alphabets();
  size_t split_words();
  void cut_buckets();
  void build_model(size_t longest);
  G2POptions opts_;
  CmuDict dict_;
  std::string letters_;              // the alphabet, sorted
  std::vector<std::string> phones_;  // sorted; with stress digits when keep_stress
  std::vector<Example> train_;       // sorted by spelling length
  std::vector<std::pair<int64_t, int64_t>> buckets_;  // [begin, end) of train_, in order: one spelling length (or a few)
  std::vector<std::string> test_words_, train_words_;
  models::Seq2SeqConfig config_;  // the run's model, vocabularies filled in
  std::optional<G2PScores> check_;  // the last check evaluation (greedy, all held-out words)
  G2PScores train_scores_;          // the final evaluation's training words
};

// What `g2p pronounce` needs from a checkpoint: alphabet, phones, the model
// (the mean of the snapshots for a finished run that averaged); model()
// comes from apps::CheckpointDecoder.
class Pronouncer : public apps::CheckpointDecoder {
 public:
  explicit Pronouncer(const std::string& checkpoint);
  // Phones of a word (lower-cased first) by beam search (beam 1 included);
  // throws std::invalid_argument naming a character outside the training
  // alphabet, and the alphabet.
  std::vector<std::string> pronounce(const std::string& word, int64_t beam = 4);
  std::vector<int64_t> encode(const std::string& word) const;  // source ids (same checks)
  const std::vector<std::string>& phones() const { return phones_; }

 private:
  std::string letters_;
  std::vector<std::string> phones_;
};

}  // namespace xg::g2p
