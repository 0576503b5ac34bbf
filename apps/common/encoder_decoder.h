// What the encoder-decoder applications (seq2seq, g2p) share over
// models::Seq2SeqModel, either family: the train::Job parts that only the
// model and the data generator decide, and a checkpoint of such a job
// opened for decoding.
//
//   class MyJob : public xg::apps::EncoderDecoderJob {   // builds model_ in its constructor,
//     ...                                                // draws batches from data_gen_
//     xg::train::StepLoss loss(const xg::train::Shard& s) override { return shard_loss(draw(), s, 0.1); }
//   };
//   class MyDecoder : public xg::apps::CheckpointDecoder {  // load(path, "my", "my train", read) in its constructor
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/seq2seq_model.h"
#include "train/checkpoint.h"
#include "train/job.h"

namespace xg::apps {

// A train::Job over an encoder-decoder whose batches come from one data
// generator, saved in checkpoints as data_gen. An application derives from
// it, builds model_ in its constructor and adds its data, evaluations and
// identity keys.
class EncoderDecoderJob : public train::Job {
 public:
  nn::Module& model() override { return model_->module(); }
  Generator* dropout_generator() override { return &model_->dropout_generator(); }
  int64_t model_width() const override { return model_->width(); }
  Metadata identity() const override { return model_->to_metadata(); }  // the model's keys; an application adds its own
  Metadata state() const override { return {{"data_gen", data_gen_.state()}}; }
  // Restores data_gen; throws FormatError naming `path` when it is missing.
  void set_state(const Metadata& metadata, const std::string& path) override;

 protected:
  explicit EncoderDecoderJob(uint64_t data_seed) : data_gen_(data_seed) {}
  // The loss of this process's rows of `batch` (every process draws the
  // whole batch from the same generator), with the target tokens of those
  // rows and of the whole batch (each example's symbols and its EOS).
  train::StepLoss shard_loss(std::vector<models::Example> batch, const train::Shard& shard, double label_smoothing);

  std::unique_ptr<models::Seq2SeqModel> model_;  // built by the application's constructor
  Generator data_gen_;                           // the training batches
};

// The most output tokens decoded from a source of src_len tokens: max_len,
// or with 0 twice the source plus 5; never past the model's positions (BOS
// takes the first).
int64_t output_limit(const models::Seq2SeqConfig& config, size_t src_len, int64_t max_len = 0);

// A checkpoint of an EncoderDecoderJob opened for decoding: the model its
// metadata describes, built and loaded, in eval mode. An application's
// decoder derives from it and calls load() in its constructor.
class CheckpointDecoder {
 public:
  const models::Seq2SeqConfig& config() const { return config_; }  // the checkpoint's, padding kPad
  models::Seq2SeqModel& model() { return *model_; }  // the checkpoint's model, of either family
  // Decodes one source: beam 1 is greedy, else beam search with length
  // penalty alpha; at most output_limit(config(), |src|, max_len) tokens.
  // Throws std::invalid_argument for a beam below 1.
  std::vector<int64_t> decode(const std::vector<int64_t>& src, int64_t beam = 1, double alpha = 0.6,
                              int64_t max_len = 0);

 protected:
  CheckpointDecoder() = default;
  // Reads `checkpoint` (train::load_for_inference with `kind` and
  // `program`), has `read` give the model's configuration from it (checking
  // the metadata and the weights against the application's, by throwing
  // FormatError) before anything is built, then builds the model with
  // padding kPad and loads the weights.
  void load(const std::string& checkpoint, const std::string& kind, const std::string& program,
            const std::function<models::Seq2SeqConfig(const train::InferenceCheckpoint&)>& read);

 private:
  models::Seq2SeqConfig config_;
  std::unique_ptr<models::Seq2SeqModel> model_;
};

}  // namespace xg::apps
