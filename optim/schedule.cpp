#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "optim/optimizer.h"

namespace xg::optim {

namespace {
void check_step(int64_t step) {
  if (step <= 0) throw std::invalid_argument("schedule: steps count from 1, got " + std::to_string(step));
}
}  // namespace

void Schedule::apply(Optimizer& opt, int64_t step) const {
  const double v = lr(step);
  if (!std::isfinite(v))
    throw std::invalid_argument("schedule: learning rate at step " + std::to_string(step) + " is " +
                                std::to_string(v) + " (not finite); check the schedule's parameters");
  opt.set_lr(v);
}

Noam::Noam(int64_t d_model, int64_t warmup, double factor) : d_model_(d_model), warmup_(warmup), factor_(factor) {
  if (d_model <= 0 || warmup <= 0 || !(factor >= 0) || !std::isfinite(factor))
    throw std::invalid_argument("Noam: need d_model > 0, warmup > 0, a finite factor >= 0; got " + std::to_string(d_model) +
                                ", " + std::to_string(warmup) + ", " + std::to_string(factor));
}

double Noam::lr(int64_t step) const {
  check_step(step);
  const double s = static_cast<double>(step);
  return factor_ / std::sqrt(static_cast<double>(d_model_)) *
         std::min(1 / std::sqrt(s), s * std::pow(static_cast<double>(warmup_), -1.5));
}

Constant::Constant(double lr) : lr_(lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw std::invalid_argument("Constant: learning rate must be finite and >= 0, got " + std::to_string(lr));
}

double Constant::lr(int64_t step) const {
  check_step(step);
  return lr_;
}

WarmupLinearDecay::WarmupLinearDecay(double peak, int64_t warmup, int64_t total)
    : peak_(peak), warmup_(warmup), total_(total) {
  if (!(peak >= 0) || !std::isfinite(peak) || warmup < 0 || total <= warmup)
    throw std::invalid_argument("WarmupLinearDecay: need a finite peak >= 0 and 0 <= warmup < total; got " +
                                std::to_string(peak) + ", " + std::to_string(warmup) + ", " + std::to_string(total));
}

double WarmupLinearDecay::lr(int64_t step) const {
  check_step(step);
  if (step <= warmup_) return peak_ * static_cast<double>(step) / static_cast<double>(warmup_);
  if (step >= total_) return 0;
  return peak_ * static_cast<double>(total_ - step) / static_cast<double>(total_ - warmup_);
}

WarmupCosine::WarmupCosine(double peak, int64_t warmup, int64_t total, double min_lr)
    : peak_(peak), min_(min_lr), warmup_(warmup), total_(total) {
  if (!(peak >= 0) || !std::isfinite(peak) || !(min_lr >= 0) || !(min_lr <= peak) || warmup < 0 || total <= warmup)
    throw std::invalid_argument("WarmupCosine: need finite 0 <= min_lr <= peak and 0 <= warmup < total; got peak " +
                                std::to_string(peak) + ", min_lr " + std::to_string(min_lr) + ", warmup " +
                                std::to_string(warmup) + ", total " + std::to_string(total));
}

double WarmupCosine::lr(int64_t step) const {
  check_step(step);
  if (step <= warmup_) return peak_ * static_cast<double>(step) / static_cast<double>(warmup_);
  if (step >= total_) return min_;
  const double progress = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return min_ + 0.5 * (peak_ - min_) * (1 + std::cos(M_PI * progress));
}

}  // namespace xg::optim
