#include "apps/common/cli.h"

#include <limits>

#include "autograd/autograd.h"
#include "engine/gemm.h"

namespace xg::cli {

void add_train_options(CLI::App& app, train::TrainOptions& o, TrainWords& words, const std::string& time_limit_help) {
  using L = OptionLimits;
  words.precision = precision_name(o.precision);
  words.schedule = o.schedule;
  add_int(app, "--steps", o.steps, 1, L::steps, "steps of the schedule, and the most steps run");
  add_real(app, "--time-limit", o.time_limit, 0, 1e9, time_limit_help);
  add_word(app, "--schedule", words.schedule, {"noam", "constant", "warmup_linear", "warmup_cosine"},
           "learning-rate schedule (warmup_cosine: linear warm-up, then a cosine down to --lr x --min-lr-ratio at the end)");
  add_real(app, "--lr", o.lr, 0, 1e30, "noam: the factor; otherwise the peak learning rate", true);
  add_real(app, "--min-lr-ratio", o.min_lr_ratio, 0, 1, "warmup_cosine: the learning rate at its end as a fraction of --lr");
  add_int(app, "--warmup", o.warmup, 0, L::steps, "warm-up steps (noam: at least 1; below --steps for a schedule that ends)");
  add_real(app, "--beta1", o.beta1, 0, 0.999999, "Adam's first-moment decay");
  add_real(app, "--beta2", o.beta2, 0, 0.999999, "Adam's second-moment decay");
  add_real(app, "--eps", o.eps, 0, 1, "Adam's epsilon (above 0: a parameter whose gradient is 0 would divide 0 by 0)",
           true);
  add_real(app, "--weight-decay", o.weight_decay, 0, 10,
           "AdamW weight decay on matrices, none on biases, norms and embeddings (0: Adam)");
  add_real(app, "--clip", o.clip_norm, 0, 1e6, "gradient norm clip (0: off)");
  add_flag(app, "--zero", o.zero,
           "under mpirun, keep Adam's state for each process's shard of the parameters only (ZeRO stage 1): "
           "the same weights, 1/N of the optimiser's memory");
  add_flag(app, "--bf16-exchange", o.bf16_exchange,
           "under mpirun, exchange float32 gradients as bf16 (half the bytes; the gradients rounded to bf16)");
  add_real(app, "--bucket-mb", o.bucket_mb, 1.0 / 1024, 4096,
           "under mpirun, MB of gradients each allreduce exchanges (PyTorch DDP's bucket_cap_mb; smaller hides "
           "more of a slow link)");
  add_int(app, "--seed", o.seed, 0, std::numeric_limits<int64_t>::max() / 2, "random seed");
  add_real(app, "--average", o.average, 0, 0.99,
           "score and save the mean of the weights at 8 points over this last fraction of the schedule "
           "(checkpoint averaging; 0: the final weights)");
  add_precision(app, words.precision);
  add_flag(app, "--detect-anomaly", o.detect_anomaly,
           "check every op's output and gradient for NaN/Inf and stop at the first, naming the op and module "
           "(slower; without it a non-finite loss or gradient norm still stops the run, naming the step)");
}

void check_train_options(train::TrainOptions& o, const TrainWords& words) {
  o.precision = parse_precision(words.precision);
  o.schedule = words.schedule;
  o.validate(/*option_names=*/true);
}

void add_loop_options(CLI::App& app, train::LoopOptions& l, const std::string& resume_help) {
  using L = OptionLimits;
  add_int(app, "--eval-every", l.eval_every, 1, L::steps, "steps between evaluations");
  add_int(app, "--log-every", l.log_every, 1, L::steps, "steps between progress lines when not on a terminal");
  add_path(app, "--checkpoint", l.checkpoint, "checkpoint file (safetensors), checked writable before step 1");
  add_int(app, "--checkpoint-every", l.checkpoint_every, 0, L::steps, "steps between checkpoints (0: at the end only)");
  add_flag(app, "--resume", l.resume, resume_help);
  add_path(app, "--metrics", l.metrics, "CSV file of evaluation rows (appended to when resuming)");
}

void check_loop_options(const train::LoopOptions& l) {
  l.validate(/*option_names=*/true);
}

CLI::Option* add_threads(CLI::App& app, int64_t& threads) {
  return add_int(app, "--threads", threads, 1, available_cores(),
                 "threads of xgrad's pool, which runs every kernel and splits every matrix product; at most the "
                 "cores this process may use (default: all of them; under mpirun, this process's share of the "
                 "host's cores)")
      ->default_str("cores per process");
}

}  // namespace xg::cli
