// Learning-rate schedules: pure functions of the (1-based) step.
#pragma once
#include <cstdint>

namespace xg::optim {

class Optimizer;

// A learning rate for each step, from 1.
class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lr(int64_t step) const = 0;  // step <= 0 throws std::invalid_argument
  void apply(Optimizer& opt, int64_t step) const;  // opt.set_lr(lr(step))
};

// The paper's: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); peaks at step = warmup.
class Noam : public Schedule {
 public:
  // d_model and warmup > 0, factor finite and >= 0, else std::invalid_argument.
  Noam(int64_t d_model, int64_t warmup, double factor = 1.0);

  double lr(int64_t step) const override;

 private:
  int64_t d_model_, warmup_;
  double factor_;
};

// The same rate at every step.
class Constant : public Schedule {
 public:
  explicit Constant(double lr);  // finite and >= 0, else std::invalid_argument
  double lr(int64_t step) const override;

 private:
  double lr_;
};

// Linear from 0 to peak over `warmup` steps, then linear to 0 at `total`.
class WarmupLinearDecay : public Schedule {
 public:
  // peak finite and >= 0 and 0 <= warmup < total, else std::invalid_argument.
  WarmupLinearDecay(double peak, int64_t warmup, int64_t total);

  double lr(int64_t step) const override;

 private:
  double peak_;
  int64_t warmup_, total_;
};

// nanoGPT's: linear from 0 to peak over `warmup` steps, then half a cosine
// from peak down to min_lr at `total`, and min_lr after it.
class WarmupCosine : public Schedule {
 public:
  // Finite 0 <= min_lr <= peak and 0 <= warmup < total, else std::invalid_argument.
  WarmupCosine(double peak, int64_t warmup, int64_t total, double min_lr = 0);

  double lr(int64_t step) const override;

 private:
  double peak_, min_;
  int64_t warmup_, total_;
};

}  // namespace xg::optim
