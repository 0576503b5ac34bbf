#include "nn/init.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace xg::nn::init {
namespace {

// t[i] = f() for every element, in order, in t's own dtype.
template <class F>
void fill(Tensor& t, const char* op, F f) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": tensor is undefined");
  const int64_t n = t.numel();
  if (t.dtype() == f32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(f());
  } else {
    double* p = t.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = f();
  }
  t.bump_version();
}

}  // namespace

std::pair<int64_t, int64_t> fans(const Tensor& t) {
  if (!t.defined() || t.dim() < 2)
    throw std::invalid_argument("init: fan_in/fan_out need a tensor of at least 2 dimensions, got " +
                                (t.defined() ? shape_str(t.shape()) : std::string("undefined")));
  int64_t receptive = 1;
  for (int64_t i = 2; i < t.dim(); ++i) receptive *= t.size(i);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

void uniform_(Tensor& t, Generator& gen, double lo, double hi) {
  if (!(lo <= hi))
    throw std::invalid_argument("uniform_: lo " + std::to_string(lo) + " > hi " + std::to_string(hi));
  fill(t, "uniform_", [&] { return gen.uniform(lo, hi); });
}

void normal_(Tensor& t, Generator& gen, double mean, double std) {
  if (!(std >= 0)) throw std::invalid_argument("normal_: std " + std::to_string(std) + " < 0");
  fill(t, "normal_", [&] { return gen.normal(mean, std); });
}

void constant_(Tensor& t, double value) {
  fill(t, "constant_", [&] { return value; });
}
void zeros_(Tensor& t) { constant_(t, 0.0); }
void ones_(Tensor& t) { constant_(t, 1.0); }

void xavier_uniform_(Tensor& t, Generator& gen, double gain) {
  auto [fan_in, fan_out] = fans(t);
  const double b = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(t, gen, -b, b);
}

void xavier_normal_(Tensor& t, Generator& gen, double gain) {
  auto [fan_in, fan_out] = fans(t);
  normal_(t, gen, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

void kaiming_uniform_(Tensor& t, Generator& gen, double a) {
  const double fan_in = static_cast<double>(fans(t).first);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double b = gain * std::sqrt(3.0 / fan_in);
  uniform_(t, gen, -b, b);
}

void kaiming_normal_(Tensor& t, Generator& gen, double a) {
  const double fan_in = static_cast<double>(fans(t).first);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  normal_(t, gen, 0.0, gain / std::sqrt(fan_in));
}

}  // namespace xg::nn::init
