#include "apps/common/encoder_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace xg::apps {

void EncoderDecoderJob::set_state(const Metadata& meta, const std::string& path) {
  Generator g;
  g.set_state(train::metadata_string(meta, "data_gen", path));
  data_gen_ = g;
}

train::StepLoss EncoderDecoderJob::shard_loss(std::vector<models::Example> batch, const train::Shard& shard,
                                              double label_smoothing) {
  const int64_t n = static_cast<int64_t>(batch.size());
  int64_t all_tokens = 0;
  for (const models::Example& e : batch) all_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  batch = std::vector<models::Example>(batch.begin() + shard.begin(n), batch.begin() + shard.end(n));
  const models::TrainBatch b = models::make_batch(batch);
  return {model_->loss(b, label_smoothing), b.target_tokens, all_tokens};
}

int64_t output_limit(const models::Seq2SeqConfig& config, size_t src_len, int64_t max_len) {
  const int64_t limit =
      max_len > 0 ? max_len : static_cast<int64_t>(src_len) * models::kOutputPerSourceToken + models::kOutputExtra;
  return std::min(limit, config.max_positions() - 1);
}

void CheckpointDecoder::load(const std::string& checkpoint, const std::string& kind, const std::string& program,
                             const std::function<models::Seq2SeqConfig(const train::InferenceCheckpoint&)>& read) {
  train::InferenceCheckpoint ck = train::load_for_inference(checkpoint, kind, program);
  config_ = read(ck);
  config_.set_pad_id(models::kPad);
  model_ = models::make_seq2seq(config_);
  model_->module().load_state_dict(ck.weights);
  model_->module().eval();
}

std::vector<int64_t> CheckpointDecoder::decode(const std::vector<int64_t>& src, int64_t beam, double alpha,
                                               int64_t max_len) {
  if (src.empty()) return {};
  if (beam < 1) throw std::invalid_argument(fmt::format("beam {}: expected at least 1", beam));
  const int64_t limit = output_limit(config_, src.size(), max_len);
  if (beam > 1) return model_->beam(src, limit, beam, alpha);
  return model_->greedy(models::Batch{src, 1, static_cast<int64_t>(src.size())}, limit)[0];
}

}  // namespace xg::apps
