// Options in LibTorch's form: the required arguments in the constructor, in
// PyTorch's order, and a named setter for each of the others that returns
// the options, so that calls chain. A Python keyword argument becomes a
// setter of the same name: F.smooth_l1_loss(x, y, beta=0.5) is
// smooth_l1_loss(x, y, SmoothL1LossOptions().beta(0.5)).
#pragma once

#include <string>

namespace xg {

// Declares an option `name` of type T: the setter name(value) returns the
// options, the getter name() reads it. Follow it with its default:
//   XG_ARG(double, beta) = 1.0;
#define XG_ARG(T, name)                                             \
 public:                                                            \
  auto name(const T& new_##name)->decltype(*this) {                 \
    this->name##_ = new_##name;                                     \
    return *this;                                                   \
  }                                                                 \
  const T& name() const noexcept { return this->name##_; }          \
                                                                    \
 private:                                                           \
  T name##_

// What a loss returns: every element's loss (none), their mean (mean, the
// default) or their sum (sum), as PyTorch's reduction='none'|'mean'|'sum';
// batchmean, kl_div's alone, the sum divided by the batch size.
enum class Reduction { none, mean, sum, batchmean };
const char* reduction_name(Reduction r);  // "none", "mean", "sum", "batchmean"

}  // namespace xg
