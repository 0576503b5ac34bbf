#include "autograd/autocast.h"

#include <stdexcept>

#include "engine/gemm.h"

namespace xg {

namespace {
thread_local Precision t_precision = Precision::f32;
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "f32"; }

Precision parse_precision(const std::string& s) {
  if (s == "f32" || s == "float32") return Precision::f32;
  if (s == "bf16" || s == "bfloat16") return Precision::bf16;
  throw std::invalid_argument("precision '" + s + "' is not one of f32, bf16");
}

Precision autocast_precision() { return t_precision; }

std::string bf16_unsupported_reason() { return engine::bf16_unsupported_reason(); }

Autocast::Autocast(Precision p) : prev_(t_precision) {
  if (p == Precision::bf16) {
    if (const std::string why = engine::bf16_refusal(); !why.empty()) throw std::runtime_error("Autocast(bf16): " + why);
  }
  t_precision = p;
}

Autocast::~Autocast() { t_precision = prev_; }

}  // namespace xg
