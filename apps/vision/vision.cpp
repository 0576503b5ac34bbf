#include "apps/vision/vision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "apps/common/smoothing.h"
#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/require.h"
#include "distributed/sync_batch_norm.h"
#include "recipe_json.h"
#include "train/checkpoint.h"

namespace xg::vision {

const ModelRecipe& Recipe::of(models::ImageKind m) const {
  return m == models::ImageKind::vit ? vit : m == models::ImageKind::cnn ? cnn : resnet;
}

const Recipe& recipe() {
  static const Recipe r = [] {
    const nlohmann::json j = nlohmann::json::parse(detail::kRecipeJson);
    Recipe out;
    out.pixel_mean = j.at("input").at("mean"), out.pixel_std = j.at("input").at("std");
    const auto& s = j.at("schedule");
    out.steps = s.at("steps"), out.warmup = s.at("warmup");
    out.weight_decay = s.at("weight_decay"), out.clip_norm = s.at("clip_norm");
    auto model = [&](models::ImageKind kind) {
      const auto& m = j.at("models").at(models::image_kind_word(kind));
      return ModelRecipe{m.at("lr"), m.at("min_lr_ratio"), m.at("erase"), m.at("dropout")};
    };
    out.resnet = model(models::ImageKind::resnet);
    out.vit = model(models::ImageKind::vit);
    out.cnn = model(models::ImageKind::cnn);
    return out;
  }();
  return r;
}

VisionOptions::VisionOptions() {
  vit.dropout = recipe().vit.dropout;
  cnn.dropout = recipe().cnn.dropout;
}

void VisionOptions::validate(bool option_names) const {
  auto need = [option_names](bool ok, const std::string& what) {
    require(ok, what, option_names ? "" : "VisionOptions: ");
  };
  need(batch_size >= 1, fmt::format("batch_size {}: expected at least 1", batch_size));
  train::check_batch_per_process(batch_size, "image");
  need(eval_images >= 0, fmt::format("eval_images {}: expected 0 (all) or more", eval_images));
  need(train_images >= 0, fmt::format("train_images {}: expected 0 (all) or more", train_images));
  need(erase >= 0 && erase <= 1, fmt::format("erase {}: expected a probability from 0 to 1", erase));
  need(erase == 0 || augment,
       option_names ? fmt::format("--erase {:g} is an augmentation, and --no-augment turns them off", erase)
                    : fmt::format("erase {}: random erasing is an augmentation, and augment is off", erase));
  apps::check_label_smoothing(label_smoothing, option_names ? "" : "VisionOptions: ");
  model_config().validate();
}

models::ImageModelConfig VisionOptions::model_config() const {
  models::ImageModelConfig c = models::ImageModelConfig::choose(model, resnet, vit, cnn);
  c.set_seed(seed);
  return c;
}

train::TrainOptions default_recipe(models::ImageKind model) {
  const Recipe& r = recipe();
  train::TrainOptions o;
  o.steps = r.steps;
  o.schedule = "warmup_cosine";
  o.lr = r.of(model).lr;
  o.warmup = r.warmup;
  o.weight_decay = r.weight_decay;
  o.clip_norm = r.clip_norm;
  o.clock_schedule = true;  // a --time-limit run still ends its cosine
  o.min_lr_ratio = r.of(model).min_lr_ratio;
  return o;
}

double default_erase(models::ImageKind model) { return recipe().of(model).erase; }

data::Transform eval_transform() { return data::normalize({recipe().pixel_mean}, {recipe().pixel_std}); }

data::Transform train_transform(bool augment, double erase) {
  if (!augment) return eval_transform();
  std::vector<data::Transform> steps{data::random_crop({28, 28}, 2), data::random_horizontal_flip(0.5), eval_transform()};
  // After normalisation, as torchvision's recipes place it: the erased
  // pixels take the value 0, the data's mean.
  if (erase > 0) steps.push_back(data::random_erasing(erase));
  return data::compose(std::move(steps));
}

Classifier build_classifier(const VisionOptions& o) { return models::make_image_model(o.model_config()); }

Classifier load_classifier(const std::string& checkpoint) {
  train::InferenceCheckpoint ck = train::load_for_inference(checkpoint, "vision", "vision train");
  return models::load_image_model(ck.metadata, ck.weights, checkpoint);
}

std::vector<std::string> TestResult::confusion_lines() const {
  std::vector<std::string> lines{"  true \\ predicted:" + fmt::format("{:>6}", "")};
  for (int p = 0; p < 10; ++p) lines[0] += fmt::format("{:>6}", p);
  for (int t = 0; t < 10; ++t) {
    std::string row = fmt::format("  {:>2} {:<20}", t, kClassNames[static_cast<size_t>(t)]);
    for (int p = 0; p < 10; ++p) row += fmt::format("{:>6}", confusion[static_cast<size_t>(t)][static_cast<size_t>(p)]);
    lines.push_back(row);
  }
  return lines;
}

TestResult test_classifier(nn::Module& model, std::shared_ptr<const data::Dataset> images, int64_t batch) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  TestResult r;
  data::for_each_batch(std::move(images), batch, [&](const data::Batch& b) {
    const std::vector<int64_t> guess = argmax(model.forward(b.input), -1);
    for (size_t i = 0; i < guess.size(); ++i) {
      const int64_t truth = b.target.data<int64_t>()[i];
      r.confusion[static_cast<size_t>(truth)][static_cast<size_t>(guess[i])] += 1;
      r.correct += guess[i] == truth;
      r.predicted.push_back(guess[i]);
    }
    r.images += static_cast<int64_t>(guess.size());
  }, eval_transform());
  model.train(was_training);
  return r;
}

VisionJob::VisionJob(const VisionOptions& o)
    : opts_((o.validate(), o)),
      train_data_(load_fashion_mnist(o.data, true, o.train_images)),
      test_data_(load_fashion_mnist(o.data, false)),
      classifier_(build_classifier(o)) {
  if (opts_.sync_bn) dist::sync_batch_norm(*classifier_.module);
  if (opts_.batch_size > train_data_->size())
    throw std::invalid_argument(fmt::format("VisionJob: batch_size {} is above the {} training images",
                                            opts_.batch_size, train_data_->size()));
}

std::string VisionJob::describe() {
  std::string model = classifier_.module->type_name();
  const double dropout = classifier_.config.dropout();
  return fmt::format("data={} ({} train / {} test images{}) | {} | batch {}", opts_.data, train_data_->size(),
                     test_data_->size(),
                     !opts_.augment ? "" : opts_.erase > 0 ? fmt::format(", crop, flip and erasing p={:g}", opts_.erase) : ", crop and flip",
                     model, opts_.batch_size) +
         (dropout > 0 ? fmt::format(" | dropout {:g}", dropout) : "") +
         (opts_.label_smoothing > 0 ? fmt::format(" | label smoothing {:g}", opts_.label_smoothing) : "");
}

train::StepLoss VisionJob::loss(const train::Shard& shard) {
  if (!loader_) {
    data::LoaderOptions lo;
    lo.batch_size = opts_.batch_size, lo.seed = opts_.seed, lo.drop_last = true;
    lo.rank = shard.rank, lo.world = shard.world;
    loader_ = std::make_unique<data::DataLoader>(train_data_, lo, train_transform(opts_.augment, opts_.erase));
  }
  const data::Batch b = loader_->batch(shard.step);
  const Tensor logits = classifier_.module->forward(b.input);
  return {cross_entropy(logits, b.target, CrossEntropyLossOptions().label_smoothing(opts_.label_smoothing)), b.input.size(0), b.global_size};
}

train::Evaluation VisionJob::evaluate(train::EvalStage stage, int64_t /*step*/) {
  const int64_t limit = stage == train::EvalStage::periodic ? opts_.eval_images : 0;
  std::shared_ptr<const data::Dataset> images = test_data_;
  if (limit > 0) images = data::Subset::range(test_data_, 0, limit);
  // In batches of the training batch: their activations fit in the blocks the
  // training step freed, so an evaluation does not raise the run's peak
  // memory (larger batches need blocks of their own beside those).
  const TestResult r = test_classifier(*classifier_.module, images, opts_.batch_size);
  train::Evaluation e;
  e.metrics = {{"test_accuracy", r.accuracy()}};
  e.about = fmt::format("({} test images)", r.images);
  if (stage == train::EvalStage::final) e.lines = r.confusion_lines();
  return e;
}

std::string VisionJob::final_line(const train::RunSummary& run) const {
  return fmt::format("steps={} test_accuracy={:.4f} train_seconds={:.1f}{}", run.steps,
                     run.final.metrics.empty() ? NAN : run.final.metrics[0].second, run.session_train_seconds,
                     run.timed_out ? " (time limit)" : "");
}

// What must match for a run to continue another: the model and what
// decides the data (the trainer adds the schedule's keys).
Metadata VisionJob::identity() const {
  Metadata m = classifier_.config.to_metadata();
  m["seed"] = std::to_string(opts_.seed);
  m["batch"] = std::to_string(opts_.batch_size);
  m["train_images"] = std::to_string(opts_.train_images);
  m["augment"] = opts_.augment ? "1" : "0";
  m["erase"] = fmt::format("{}", opts_.erase);
  m["smoothing"] = fmt::format("{}", opts_.label_smoothing);
  m["sync_bn"] = opts_.sync_bn ? "1" : "0";
  for (const auto& [key, value] : input_metadata()) m[key] = value;
  return m;
}

Metadata input_metadata() {
  std::string classes;
  for (const char* c : kClassNames) classes += (classes.empty() ? "" : ",") + std::string(c);
  return {{"input.layout", "NCHW"},
          {"input.scale", fmt::format("{}", 1.0 / 255)},
          {"input.mean", fmt::format("{}", recipe().pixel_mean)},
          {"input.std", fmt::format("{}", recipe().pixel_std)},
          {"classes", classes}};
}

Metadata VisionJob::identity_defaults() const {
  Metadata m = input_metadata();  // written since the manifest carries them; their values never changed
  m["erase"] = "0";               // runs saved before --erase and --smoothing existed had neither
  m["smoothing"] = "0";
  return m;
}

}  // namespace xg::vision
