// The command line of vision (train, evaluate, predict, picture).
#pragma once

#include <string>

#include "apps/vision/vision.h"
#include "train/loop.h"

namespace xg::cli {
struct Parsed;
}

namespace xg::vision {

// vision train [options] | vision evaluate|predict|picture --checkpoint PATH [options]
struct VisionCommand {
  std::string mode;  // "train", "evaluate", "predict" or "picture"
  VisionOptions job;
  train::TrainOptions train;  // default_recipe(job.model)
  train::LoopOptions loop;    // evaluations every 500 steps, progress every 100
  int64_t threads = 0;        // 0: every core this process may use
  // evaluate, predict, picture
  std::string checkpoint;
  int64_t first = 0, count = 10;  // predict: test images [first, first + count)
  std::string out_dir;            // picture: where the text files go
  VisionCommand();
};
cli::Parsed parse_vision_command(int argc, const char* const* argv, VisionCommand& cmd);

}  // namespace xg::vision
