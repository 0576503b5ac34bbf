// An encoder-decoder (the Transformer, or the recurrent RNNSeq2Seq) on the
// copy or reverse task, as a train::Job: fresh random batches, evaluation by
// greedy decoding of a held-out set; and the Decoder that reads its
// checkpoints (decode, attention_map).
//
//   xg::seq2seq::Seq2SeqJob job(xg::seq2seq::Seq2SeqOptions{});  // the copy task, a small model
//   xg::train::Trainer trainer(job, xg::seq2seq::default_recipe());
//   xg::train::fit(trainer);                                     // prints progress, "final task=copy ..."
//   xg::seq2seq::Decoder("copy.safetensors").decode({3, 4, 5});  // {3, 4, 5} once it has learnt
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/encoder_decoder.h"
#include "apps/seq2seq/tasks.h"
#include "train/trainer.h"

namespace xg::seq2seq {

struct Seq2SeqOptions {
  TaskConfig task;
  models::TransformerConfig model;  // vocab sizes and max_len are taken from `task`
  models::Seq2SeqKind model_kind = models::Seq2SeqKind::transformer;  // rnn: then `rnn` is the model
  models::RNNSeq2SeqConfig rnn;     // vocab sizes are taken from `task`
  int64_t batch_size = 64;          // sequences a step (B), split over processes under mpirun
  int64_t eval_size = 1000;         // held-out sequences
  double label_smoothing = 0.1;
  int64_t samples = 3;              // sample decodes printed at each evaluation
  uint64_t seed = 1;                // initialisation, dropout, data and the held-out set
  // Throws std::invalid_argument naming the first bad field and its range.
  void validate() const;
};

// The Transformer paper's recipe: Adam (0.9, 0.98, 1e-9), the noam schedule
// with 200 warm-up steps, label smoothing (Seq2SeqOptions), clipping at 1.
train::TrainOptions default_recipe();

// The model, its width and dropout generator, the data generator's state
// and the loss of a process's share (shard_loss) come from
// apps::EncoderDecoderJob.
class Seq2SeqJob : public apps::EncoderDecoderJob {
 public:
  explicit Seq2SeqJob(const Seq2SeqOptions& o);  // validates; checks the model fits in memory
  std::string describe() override;
  train::StepLoss loss(const train::Shard& shard) override;
  train::Evaluation evaluate(train::EvalStage stage, int64_t step) override;
  std::string final_line(const train::RunSummary& run) const override;
  std::string kind() const override { return "seq2seq"; }
  Metadata identity() const override;

  // Greedy decoding of the held-out set, with n_samples (input, output) pairs.
  EvalResult evaluate_all(int64_t n_samples);
  const Seq2SeqOptions& options() const { return opts_; }

 private:
  Seq2SeqOptions opts_;
  std::vector<Example> eval_set_;
  std::optional<std::pair<int64_t, train::Evaluation>> last_eval_;  // (step, evaluation)
};

// What a checkpoint of Seq2SeqJob says about its model and task, read from its
// metadata and checked against limits before anything is built from it.
// Throws FormatError naming the file, the key and the range.
struct CheckpointInfo {
  models::Seq2SeqConfig model;  // either family, with pad_id kPad
  TaskConfig task;  // vocab, task and the training lengths min_len..max_len
  int64_t step = 0;
};
CheckpointInfo read_checkpoint_info(const Metadata& metadata, const std::string& path);

// Decoding with a checkpoint of Seq2SeqJob (train_tasks): the checkpoint is
// validated (configuration limits, parameter count against the file) before
// any model is built, and each input line gives exactly one output line.
// model() and decode(src, beam, alpha, max_len) come from
// apps::CheckpointDecoder: beam 1 is greedy; max_len 0 is 2 * |src| + 5,
// and any limit is capped by the model's positions.
class Decoder : public apps::CheckpointDecoder {
 public:
  // Throws FormatError naming the file and the bad field.
  explicit Decoder(const std::string& checkpoint);
  const CheckpointInfo& info() const { return info_; }

  // Token ids of one line ("3 4 5"); throws std::invalid_argument naming the
  // token and the symbol range, or a length past the model's positions.
  std::vector<int64_t> parse(const std::string& line) const;
  // "" or a warning when src is longer than the sequences the model was trained on.
  std::string length_warning(const std::vector<int64_t>& src) const;

 private:
  CheckpointInfo info_;
};

}  // namespace xg::seq2seq
