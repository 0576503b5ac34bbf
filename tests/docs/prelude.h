// What the C++ blocks of README.md and docs/ may take as given: the public
// headers, `using namespace xg`, and the names the prose introduces (a model,
// a job, a batch). scripts/check_doc_blocks.py compiles every block against
// it; nothing here is defined, since the blocks are compiled, not linked.
#pragma once

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/format.h"
#include "autograd/xg.h"
#include "data/data.h"
#include "distributed/data_parallel.h"
#include "distributed/sync_batch_norm.h"
#include "models/cnn.h"
#include "models/resnet.h"
#include "models/transformer.h"
#include "models/vit.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "train/loop.h"

using namespace xg;

namespace doc_context {

// "Your model": any module with a loss over this process's slice of a batch.
struct MyModel : nn::Module {
  Tensor loss(const Tensor& batch);
};

// "Your application" (train/job.h).
struct MyJob : train::Job {
  nn::Module& model() override;
  std::string describe() override;
  train::StepLoss loss(const train::Shard& shard) override;
  train::Evaluation evaluate(train::EvalStage stage, int64_t step) override;
  std::string final_line(const train::RunSummary& run) const override;
  std::string kind() const override;
  Metadata identity() const override;
};

}  // namespace doc_context
using namespace doc_context;

extern Generator gen;
extern Tensor x, x64, loss, my_slice_of_the_batch;
extern std::vector<int64_t> labels;
extern int64_t steps, step;
extern Tensor inputs;                // (N, ...) examples, stacked
extern std::vector<int64_t> targets;  // one class id each
extern models::Transformer model;
extern models::Batch src, tgt_in, tgt_out;
extern optim::Adam adam;
