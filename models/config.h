// What every model configuration of models/ shares: the limits a checkpoint's
// configuration is read within, and the memory check before building one.
#pragma once

#include <cstdint>
#include <string>

#include "autograd/serialize.h"

namespace xg::models {

// Bounds on a configuration read from a checkpoint: far above any model this
// library trains on a CPU, far below what would overflow or exhaust memory
// on reading.
struct ModelLimits {
  // The largest value accepted for the configuration field of that name.
  static constexpr int64_t vocab = 1 << 24, layers = 1024, d_model = 1 << 16, heads = 1024, d_ff = 1 << 18,
                           max_len = 1 << 20;
  static constexpr int64_t depth = 1202;         // of a ResNet (the paper's deepest)
  static constexpr int64_t channels = 1 << 14;   // of any convolution or hidden layer of an image model
  static constexpr int64_t classes = 1 << 20;    // of an image classifier
  static constexpr int64_t image = 1 << 14;      // side of an image or patch in pixels
};

// Refuses (std::invalid_argument) a model of `parameters` parameters whose
// training state (parameters, gradients and two Adam moments: 16 bytes a
// parameter) exceeds this machine's memory: allocation would otherwise
// succeed and the machine page until it runs out.
// validate() of a configuration read from checkpoint `path`, its refusal
// as a FormatError naming the file.
template <class Config>
void validate_read(const Config& c, const std::string& path) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + path + ": " + e.what());
  }
}

// Every model's constructor calls it first.
void check_fits_in_memory(double parameters);
// What a model's constructor throws when an allocation fails all the same:
// std::runtime_error "out of memory building WHAT (N parameters)".
[[noreturn]] void out_of_memory(const std::string& what, double parameters);

}  // namespace xg::models
