// Image classification on Fashion-MNIST as a train::Job: a ResNet, a Vision
// Transformer or a small CNN (models/), batches from data::DataLoader with
// random crops and flips, test accuracy and a confusion matrix.
// apps/vision/main.cpp is the program.
//
//   xg::vision::VisionOptions o;                  // ResNet-20 on /usr/share/datasets/fashion-mnist
//   xg::vision::VisionJob job(o);
//   xg::train::fit(job, xg::vision::default_recipe("resnet"), {});   // "final steps=N test_accuracy=..."
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "apps/vision/fashion_mnist.h"
#include "data/data.h"
#include "models/image_model.h"
#include "train/trainer.h"

namespace xg::vision {

// The program's recipe and preprocessing (apps/vision/recipe.json, which
// the PyTorch twin bench/vision.py reads too), read once.
struct ModelRecipe {
  double lr = 0, min_lr_ratio = 0;  // AdamW's peak learning rate, and the cosine's end as a fraction of it
  double erase = 0;                 // the probability of random erasing
  double dropout = 0;               // of the CNN's and the ViT's dropout layers
};
struct Recipe {
  double pixel_mean = 0, pixel_std = 0;  // the training set's mean and deviation of a pixel in [0, 1]
  int64_t steps = 0, warmup = 0;         // the schedule's steps and warm-up steps
  double weight_decay = 0, clip_norm = 0;
  ModelRecipe resnet, vit, cnn;                     // each model's own
  const ModelRecipe& of(models::ImageKind m) const;  // `m`'s
};
const Recipe& recipe();

struct VisionOptions {
  VisionOptions();  // the models' dropout as the recipe's
  std::string data = kFashionMnistDir;  // the IDX files (fashion_mnist.h)
  models::ImageKind model = models::ImageKind::resnet;  // the family trained (--model resnet | vit | cnn)
  models::ResNetConfig resnet;          // each family's configuration; in_channels 1, classes 10
  models::ViTConfig vit;
  models::CNNConfig cnn;
  int64_t batch_size = 128;   // images a step, split over processes under mpirun
  int64_t eval_images = 2000; // test images per periodic evaluation (0: all; the final one reads all)
  int64_t train_images = 0;   // > 0: the first N training images only (smoke runs)
  bool augment = true;        // random crop (padding 2) and horizontal flip of training images
  double erase = 0;           // with augment: the probability of random erasing (data::random_erasing) after normalisation
  double label_smoothing = 0; // the loss's targets: this much spread evenly over the 10 classes (cross_entropy's)
  bool sync_bn = false;       // under mpirun: batch norm over every process's images (dist::sync_batch_norm)
  uint64_t seed = 1;          // initialisation, dropout, data order and augmentation
  // Throws std::invalid_argument naming the first bad field; with
  // `option_names`, as the vision program's options name them (--erase).
  void validate(bool option_names = false) const;
  // The chosen family's configuration, seeded with `seed`.
  models::ImageModelConfig model_config() const;
};

// AdamW with a warm-up and a cosine: the recipe of `model` (recipe()).
train::TrainOptions default_recipe(models::ImageKind model);
// The random-erasing probability of `model`'s recipe (VisionOptions::erase).
double default_erase(models::ImageKind model);

// The program's classifier: forward (N,1,28,28) normalised -> (N,10) logits.
using Classifier = models::ImageModel;
// The classifier of the options (models::make_image_model of model_config()).
Classifier build_classifier(const VisionOptions& o);
// The classifier a checkpoint of VisionJob holds, its weights loaded
// (train::load_for_inference, then models::load_image_model).
Classifier load_classifier(const std::string& checkpoint);

// Accuracy and confusion of a classifier on images (eval mode, no gradient).
struct TestResult {
  int64_t images = 0, correct = 0;
  std::array<std::array<int64_t, 10>, 10> confusion{};  // [true][predicted]
  std::vector<int64_t> predicted;                        // per image, in order
  double accuracy() const { return images ? static_cast<double>(correct) / static_cast<double>(images) : 0.0; }
  // The matrix as lines: a header of predicted classes, then one row per true class.
  std::vector<std::string> confusion_lines() const;
};
// Scores every image of `images` (a set, or a Subset of it), in order, in
// batches of `batch`.
TestResult test_classifier(nn::Module& model, std::shared_ptr<const data::Dataset> images, int64_t batch = 500);

class VisionJob : public train::Job {
 public:
  explicit VisionJob(const VisionOptions& o);  // loads both splits, builds the model
  nn::Module& model() override { return *classifier_.module; }
  Generator* dropout_generator() override { return classifier_.dropout; }
  std::string describe() override;
  train::StepLoss loss(const train::Shard& shard) override;
  train::Evaluation evaluate(train::EvalStage stage, int64_t step) override;
  std::string final_line(const train::RunSummary& run) const override;
  std::string kind() const override { return "vision"; }
  // Keys that checkpoints written before them lack, with the value they meant.
  Metadata identity_defaults() const override;
  std::string item_unit() const override { return "img"; }
  Metadata identity() const override;
  const Classifier& classifier() const { return classifier_; }

 private:
  VisionOptions opts_;
  std::shared_ptr<const data::ByteImageDataset> train_data_, test_data_;
  Classifier classifier_;
  std::unique_ptr<data::DataLoader> loader_;  // made at the first step, for that step's shard
};

// What a model's input is, as checkpoint metadata (for xg_export's manifest,
// so that a runtime can prepare images without this program):
// input.layout NCHW, input.scale 1/255 (bytes to [0, 1]), input.mean and
// input.std (the recipe's: x = (scale * byte - mean) / std), and
// classes, the class names by label joined by ','.
Metadata input_metadata();

// The normalisation every image gets, and the training augmentation: crop
// and flip, then with erase > 0 random erasing of that probability.
data::Transform eval_transform();
data::Transform train_transform(bool augment, double erase = 0);

}  // namespace xg::vision
