// Parameter initialisers, as in torch.nn.init. Each writes the values in
// place (no tape) from the given seeded Generator, element 0 first, so one
// seed always gives one model.
#pragma once

#include <utility>

#include "autograd/tensor.h"

namespace xg::nn::init {

// (fan_in, fan_out) as PyTorch computes them: for a weight (out, in, k...)
// fan_in = in * prod(k), fan_out = out * prod(k). Needs at least 2 dims.
std::pair<int64_t, int64_t> fans(const Tensor& t);

void uniform_(Tensor& t, Generator& gen, double lo = 0.0, double hi = 1.0);   // U(lo, hi); lo > hi throws
void normal_(Tensor& t, Generator& gen, double mean = 0.0, double std = 1.0);  // N(mean, std); std < 0 throws
void zeros_(Tensor& t);                   // every element 0
void ones_(Tensor& t);                    // every element 1
void constant_(Tensor& t, double value);  // every element `value`
// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(Tensor& t, Generator& gen, double gain = 1.0);
// N(0, s), s = gain * sqrt(2 / (fan_in + fan_out)).
void xavier_normal_(Tensor& t, Generator& gen, double gain = 1.0);
// Leaky-ReLU slope a, mode fan_in: gain = sqrt(2 / (1 + a^2));
// uniform: U(-b, b), b = gain * sqrt(3 / fan_in); normal: N(0, gain / sqrt(fan_in)).
void kaiming_uniform_(Tensor& t, Generator& gen, double a = 0.0);
void kaiming_normal_(Tensor& t, Generator& gen, double a = 0.0);

}  // namespace xg::nn::init

namespace xg::nn {
using init::kaiming_normal_;
using init::kaiming_uniform_;
using init::normal_;
using init::ones_;
using init::uniform_;
using init::xavier_normal_;
using init::xavier_uniform_;
using init::zeros_;
}  // namespace xg::nn
