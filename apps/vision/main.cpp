// Image classification on Fashion-MNIST (apps/vision/vision.h is the job,
// train/ the loop).
//
//   vision train [--model resnet|vit|cnn] [--steps N] [--time-limit S] [--checkpoint PATH [--resume]] ...
//   mpirun -np 2 vision train ...     data parallel: --batch is split across the processes
//   vision evaluate --checkpoint PATH        accuracy and confusion matrix on the 10,000 test images
//   vision predict --checkpoint PATH [--first I] [--count N]
//   vision picture --checkpoint PATH --out DIR
//
// Exit codes: 0 done, 1 a runtime error (missing data, a bad checkpoint, a
// non-finite loss), 2 a usage error.
#include <fmt/format.h>

#include "apps/common/program.h"
#include "apps/vision/cli.h"
#include "apps/vision/pictures.h"
#include "autograd/autograd.h"
#include "train/checkpoint.h"

namespace {

int run_checkpoint_command(const xg::vision::VisionCommand& cmd) {
  using namespace xg::vision;
  if (cmd.mode == "picture") xg::train::check_outputs({{"--out", cmd.out_dir, true}});
  const Classifier c = load_classifier(cmd.checkpoint);
  const auto test = load_fashion_mnist(cmd.job.data, false);
  const bool predict = cmd.mode == "predict";
  const TestResult r = test_classifier(*c.module, predict ? xg::data::Subset::range(test, cmd.first, cmd.first + cmd.count)
                                                          : std::shared_ptr<const xg::data::Dataset>(test));
  if (cmd.mode == "evaluate") {
    fmt::print("{} | test_accuracy={:.4f} ({} test images)\n", c.module->type_name(), r.accuracy(), r.images);
    for (const std::string& line : r.confusion_lines()) fmt::print("{}\n", line);
  } else if (predict) {
    for (int64_t k = 0; k < r.images; ++k) {
      const int64_t i = cmd.first + k;
      const int64_t p = r.predicted[static_cast<size_t>(k)], t = test->targets()[static_cast<size_t>(i)];
      fmt::print("image {}: predicted {}, true {}{}\n", i, kClassNames[static_cast<size_t>(p)],
                 kClassNames[static_cast<size_t>(t)], p == t ? "" : " (wrong)");
    }
  } else {
    write_pictures(c, *test, r, cmd.out_dir);
    fmt::print("wrote {}/confusion.txt, grid.txt, grid_labels.txt{}\n", cmd.out_dir, c.vit ? ", attention.txt" : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  xg::vision::VisionCommand cmd;
  const xg::cli::Parsed parsed = xg::vision::parse_vision_command(argc, argv, cmd);
  return xg::cli::run_program("vision", argc, argv, parsed, cmd.threads, [&] {
    if (cmd.mode != "train") return run_checkpoint_command(cmd);
    xg::vision::VisionJob job(cmd.job);
    xg::train::fit(job, cmd.train, cmd.loop);
    return 0;
  });
}
