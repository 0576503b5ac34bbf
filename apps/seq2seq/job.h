// An encoder-decoder (the Transformer, or the recurrent RNNSeq2Seq) on the copy or reverse task, as a
// train::Job: fresh random batches, evaluation by greedy decoding of a
// held-out set, checkpoints that decode reads.
//
//   xg::seq2seq::TaskJob job(xg::seq2seq::TaskJobOptions{});   // the copy task, a small model
//   xg::train::Trainer trainer(job, xg::seq2seq::default_recipe());
//   xg::train::fit(trainer);                                    // prints progress, "final task=copy ..."
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/seq2seq/tasks.h"
#include "train/trainer.h"

namespace xg::seq2seq {

struct TaskJobOptions {
  TaskConfig task;
  models::TransformerConfig model;  // vocab sizes and max_len are taken from `task`
  std::string model_kind = "transformer";  // transformer | rnn (then `rnn` is the model)
  models::RNNSeq2SeqConfig rnn;            // vocab sizes are taken from `task`
  int64_t batch_size = 64;          // sequences a step (B), split over processes under mpirun
  int64_t eval_size = 1000;         // held-out sequences
  double label_smoothing = 0.1;
  int64_t samples = 3;              // sample decodes printed at each evaluation
  uint64_t seed = 1;                // initialisation, dropout, data and the held-out set
  // Throws std::invalid_argument naming the first bad field and its range.
  void validate() const;
};

// The Transformer paper's recipe: Adam (0.9, 0.98, 1e-9), the noam schedule
// with 200 warm-up steps, label smoothing (TaskJobOptions), clipping at 1.
train::TrainOptions default_recipe();

class TaskJob : public train::Job {
 public:
  explicit TaskJob(const TaskJobOptions& o);  // validates; checks the model fits in memory
  nn::Module& model() override { return model_->module(); }
  models::Seq2SeqModel& seq2seq() { return *model_; }  // the model, of either family
  Generator* dropout_generator() override { return &model_->dropout_generator(); }
  int64_t model_width() const override { return model_->width(); }
  std::string describe() override;
  train::StepLoss loss(const train::Shard& shard) override;
  train::Evaluation evaluate(train::EvalStage stage, int64_t step) override;
  std::string final_line(const train::RunSummary& run) const override;
  std::string kind() const override { return "seq2seq"; }
  Metadata identity() const override;
  Metadata state() const override;
  void set_state(const Metadata& metadata, const std::string& path) override;

  // Greedy decoding of the held-out set, with n_samples (input, output) pairs.
  EvalResult evaluate_all(int64_t n_samples);
  const TaskJobOptions& options() const { return opts_; }
  const std::vector<Example>& eval_set() const { return eval_set_; }

 private:
  TaskJobOptions opts_;
  std::unique_ptr<models::Seq2SeqModel> model_;
  Generator data_gen_;
  std::vector<Example> eval_set_;
  std::optional<std::pair<int64_t, train::Evaluation>> last_eval_;  // (step, evaluation)
};

// What a checkpoint of TaskJob says about its model and task, read from its
// metadata and checked against limits before anything is built from it.
// Throws FormatError naming the file, the key and the range.
struct CheckpointInfo {
  models::Seq2SeqConfig model;  // either family, with pad_id kPad
  TaskConfig task;  // vocab, task and the training lengths min_len..max_len
  int64_t step = 0;
};
CheckpointInfo read_checkpoint_info(const Metadata& metadata, const std::string& path);

}  // namespace xg::seq2seq
