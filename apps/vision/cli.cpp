#include "apps/vision/cli.h"

#include "apps/common/cli.h"
#include "autograd/autograd.h"

namespace xg::vision {

using namespace train;
using namespace cli;

VisionCommand::VisionCommand() : train(default_recipe(models::ImageKind::resnet)) {
  loop.eval_every = 500;
  loop.log_every = 100;
}

namespace {

// --model and each model's own options.
void add_vision_model_options(CLI::App& t, VisionOptions& o) {
  using L = OptionLimits;
  add_choice(t, "--model", o.model, models::image_kinds(),
             "resnet: He et al.'s CIFAR ResNet; vit: a Vision Transformer; cnn: 2 conv + 2 FC");
  add_int(t, "--depth", o.resnet.depth, 8, 1202, "--model resnet: layers, 6n+2 (20, 32, 44, 56, 110)");
  add_int(t, "--width", o.resnet.width, 1, 1024, "--model resnet: channels of the first stage");
  add_flag(t, "--preact", o.resnet.preact, "--model resnet: the pre-activation variant");
  add_int(t, "--patch", o.vit.patch, 1, 28, "--model vit: patch side, dividing 28 (4, 7, 14)");
  add_model_options(t, o.vit, "--model vit: encoder blocks (--dropout: also --model cnn's)");
  t.get_option("--dropout")->default_str(fmt::format("{:g} (vit), {:g} (cnn)", o.vit.dropout, o.cnn.dropout));
  add_int(t, "--hidden", o.cnn.hidden, 1, L::d_model, "--model cnn: width of the first fully connected layer");
}

// The train subcommand: the data, each model's options, the recipe's and the loop's.
CLI::App* add_train_command(CLI::App& app, VisionCommand& cmd, TrainWords& words, bool& no_augment) {
  using L = OptionLimits;
  VisionOptions& o = cmd.job;
  CLI::App& t = *app.add_subcommand(
      "train", "train a model; the last line is: final steps=N test_accuracy=... train_seconds=...");
  add_path(t, "--data", o.data, "directory of the IDX files", "DIR")->default_str(o.data);
  add_vision_model_options(t, o);
  add_int(t, "--batch", o.batch_size, 1, L::batch, "images a step (B), split over processes under mpirun");
  add_int(t, "--eval-images", o.eval_images, 0, 10000, "test images per evaluation (0: all; the final one reads all)");
  add_int(t, "--train-images", o.train_images, 0, 60000, "train on the first N images only (0: all)");
  add_flag(t, "--no-augment", no_augment, "no random crop and flip of training images");
  add_real(t, "--erase", o.erase, 0, 1,
           "probability of random erasing of a training image after crop, flip and normalisation: a box of 2-33% of "
           "it set to 0, the data's mean (torchvision's RandomErasing; 0: off)")
      ->default_str(fmt::format("{:g} (resnet), {:g} (vit, cnn)", default_erase(models::ImageKind::resnet),
                                default_erase(models::ImageKind::vit)));
  add_smoothing(t, o.label_smoothing);
  add_flag(t, "--sync-bn", o.sync_bn,
           "under mpirun: batch norm over every process's images, so that N processes train as one");
  add_train_options(t, cmd.train, words,
                    "seconds of training: the schedule runs over whichever ends first, --steps or this, so a run "
                    "the clock ends still ends its cosine; the warm-up counts steps; 0: --steps only");
  t.get_option("--min-lr-ratio")
      ->default_str(fmt::format("{:g} (resnet, vit), {:g} (cnn)",
                                default_recipe(models::ImageKind::resnet).min_lr_ratio,
                                default_recipe(models::ImageKind::cnn).min_lr_ratio));
  add_threads(t, cmd.threads);
  add_loop_options(t, cmd.loop, "continue from --checkpoint when that file exists (same options, else an error)");
  return &t;
}

// A subcommand that reads a checkpoint: --checkpoint, --data, --threads.
CLI::App* add_checkpoint_command(CLI::App& app, const char* name, const char* help, VisionCommand& cmd,
                                 int64_t& threads) {
  CLI::App& s = *app.add_subcommand(name, help);
  add_path(s, "--checkpoint", cmd.checkpoint, "checkpoint written by vision train")->required();
  add_path(s, "--data", cmd.job.data, "directory of the IDX files", "DIR")->default_str(cmd.job.data);
  add_int(s, "--threads", threads, 0, available_cores(), "threads of xgrad's pool (0: every core)");
  return &s;
}

}  // namespace

Parsed parse_vision_command(int argc, const char* const* argv, VisionCommand& cmd) {
  VisionOptions& o = cmd.job;
  TrainWords words;
  int64_t other_threads = 0;
  bool no_augment = false;
  CLI::App *train = nullptr, *evaluate = nullptr, *predict = nullptr;
  auto setup = [&](CLI::App& app) {
    app.description(
        "Image classification on Fashion-MNIST (apt-get install dataset-fashion-mnist): `train` learns a ResNet, a "
        "Vision Transformer or a small CNN and reports test accuracy; `evaluate` prints a checkpoint's accuracy and "
        "confusion matrix; `predict` labels test images; `picture` writes the data of the pictures "
        "(scripts/plot_vision.sh draws them).");
    app.require_subcommand(1);
    train = add_train_command(app, cmd, words, no_augment);
    evaluate = add_checkpoint_command(app, "evaluate", "print a checkpoint's test accuracy and confusion matrix", cmd,
                                      other_threads);
    predict =
        add_checkpoint_command(app, "predict", "print the predicted and true class of test images", cmd, other_threads);
    add_int(*predict, "--first", cmd.first, 0, 9999, "the first test image");
    add_int(*predict, "--count", cmd.count, 1, 10000, "test images");
    CLI::App& picture = *add_checkpoint_command(
        app, "picture",
        "write the confusion matrix and a grid of test images with their predictions (and a ViT's attention) as "
        "text files for gnuplot",
        cmd, other_threads);
    add_path(picture, "--out", cmd.out_dir, "directory for the files (must exist)", "DIR")->required();
  };
  auto check = [&] {
    cmd.mode = train->parsed() ? "train" : evaluate->parsed() ? "evaluate" : predict->parsed() ? "predict" : "picture";
    if (cmd.mode != "train") {
      cmd.threads = other_threads;
      return;
    }
    if (train->count("--lr") == 0) cmd.train.lr = default_recipe(o.model).lr;
    // The recipe's cosine end, or, for another --schedule, none (the option's
    // neutral value: the ResNet's and the ViT's 0 would be refused there).
    if (train->count("--min-lr-ratio") == 0)
      cmd.train.min_lr_ratio =
          words.schedule == "warmup_cosine" ? default_recipe(o.model).min_lr_ratio : TrainOptions::kMinLrRatio;
    if (train->count("--erase") == 0 && !no_augment) o.erase = default_erase(o.model);
    if (train->count("--dropout") > 0) o.cnn.dropout = o.vit.dropout;  // --dropout serves both models
    o.augment = !no_augment;
    o.seed = cmd.train.seed;
    check_loop_options(cmd.loop);
    if (o.model == models::ImageKind::vit) check_heads(o.vit);
    check_train_options(cmd.train, words);
    o.validate(true);
  };
  return parse_with("vision", argc, argv, setup, check);
}

}  // namespace xg::vision
