// Where a training step of apps/vision's models spends its time: the step of
// `vision train` (its data loader and transforms, its model, cross-entropy,
// backward, clipping at 1 and AdamW) run under an OpProfile, which adds up
// each op's forward and backward time by module; the work between ops is
// charged by name (the batch's loading, the optimiser). Prints the table
// and the step's images per second.
//
//   vision_profile [--model resnet|cnn|vit] [--threads T] [--steps S] [--warmup W] [--batch N] [--precision f32|bf16]
//                  [--conv-layout automatic|plain|blocked] [--blocked-activations on|off]
#include <chrono>
#include <optional>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "apps/vision/fashion_mnist.h"
#include "apps/vision/vision.h"
#include "autograd/autocast.h"
#include "autograd/profile.h"
#include "autograd/serialize.h"
#include "autograd/xg.h"
#include "data/loader.h"
#include "engine/conv.h"
#include "optim/adam.h"
#include "optim/clip.h"

using namespace xg;

namespace {

struct Args {
  std::string model = "resnet", precision = "f32", layout = "automatic", keep = "on";
  long threads = 1, steps = 10, warmup = 3, batch = 128;
};

// Option k's value v, a whole number within [lo, hi] ("1.5", "1e3", "nan" are refused).
long whole(const std::string& k, const std::string& v, long lo, long hi) {
  return static_cast<long>(parse_whole_number(k, v, lo, hi));
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(k + ": a value is missing");
    const std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--precision") a.precision = v;
    else if (k == "--conv-layout") a.layout = v;
    else if (k == "--blocked-activations") a.keep = v;
    else if (k == "--threads") a.threads = whole(k, v, 1, 1024);
    else if (k == "--steps") a.steps = whole(k, v, 1, 1'000'000);
    else if (k == "--warmup") a.warmup = whole(k, v, 0, 1'000'000);
    else if (k == "--batch") a.batch = whole(k, v, 1, 1 << 16);
    else throw std::invalid_argument("unknown option " + k);
  }
  return a;
}

// The training step of train::Trainer with the vision recipe, in named parts.
struct Step {
  nn::Module& model;
  data::DataLoader& loader;
  optim::AdamW& opt;
  std::vector<Tensor> params;

  void run(int64_t step, OpProfile* prof) {
    auto mark = [&](const char* phase, const char* what) {
      if (prof) prof->mark(phase, what);
    };
    mark("between", "step start");
    const data::Batch b = loader.batch(step);
    mark("data", "loader.batch");
    Tensor loss = cross_entropy(model.forward(b.input), b.target);
    mark("forward", "(after the last op)");
    loss.backward();
    mark("between", "backward tail");
    optim::clip_grad_norm(params, 1.0);
    mark("optimizer", "clip_grad_norm");
    opt.step();
    mark("optimizer", "adamw step");
    opt.zero_grad();
    mark("optimizer", "zero_grad");
  }
};

int run(const Args& a) {
  set_num_threads(static_cast<int>(a.threads));
  if (a.layout != "automatic" && a.layout != "plain" && a.layout != "blocked")
    throw std::invalid_argument("--conv-layout " + a.layout + ": expected automatic, plain or blocked");
  if (a.keep != "on" && a.keep != "off")
    throw std::invalid_argument("--blocked-activations " + a.keep + ": expected on or off");
  engine::set_blocked_activations(a.keep == "on");
  engine::set_conv_layout(a.layout == "plain"     ? engine::ConvLayout::plain
                          : a.layout == "blocked" ? engine::ConvLayout::blocked
                                                  : engine::ConvLayout::automatic);
  vision::VisionOptions o;
  o.model = models::image_kind(a.model, "--model");
  o.batch_size = a.batch;
  const vision::Classifier c = vision::build_classifier(o);
  data::LoaderOptions lo;
  lo.batch_size = a.batch, lo.seed = 1, lo.drop_last = true;
  data::DataLoader loader(vision::load_fashion_mnist(o.data, true), lo, vision::train_transform(true));
  const train::TrainOptions recipe = vision::default_recipe(o.model);
  optim::AdamOptions ao;
  ao.lr = recipe.lr, ao.weight_decay = recipe.weight_decay;
  optim::AdamW opt(optim::weight_decay_groups(c.module->named_parameters(), recipe.weight_decay), optim::AdamWOptions(ao));
  Step step{*c.module, loader, opt, c.module->parameters()};
  c.module->train();
  Autocast cast(parse_precision(a.precision));
  for (long s = 1; s <= a.warmup; ++s) step.run(s, nullptr);
  OpProfile prof;
  const auto t0 = std::chrono::steady_clock::now();
  for (long s = 1; s <= a.steps; ++s) step.run(a.warmup + s, &prof);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("# vision_profile --model {} --threads {} --batch {} --precision {} --conv-layout {} --blocked-activations {}: {} steps after {} warm-up, "
             "{:.1f} ms/step, {:.1f} img/s\n",
             a.model, a.threads, a.batch, a.precision, a.layout, a.keep, a.steps, a.warmup, 1e3 * secs / a.steps,
             a.batch * a.steps / secs);
  fmt::print("{}", prof.table(a.steps));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vision_profile: %s\n", e.what());
    return 2;
  }
}
