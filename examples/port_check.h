// What every port program (examples/port_*.cpp) does around its model: read
// the safetensors file its PyTorch script wrote (the state dict, the inputs
// "input.*" and PyTorch's outputs "output.*"), let the program build its
// model, load the state dict and compute its outputs, and compare each with
// PyTorch's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "autograd/xg.h"

namespace port {

using Tensors = std::map<std::string, xg::Tensor>;

// argv[1] is the file. `run(state, inputs)` builds the model, loads `state`
// (the state dict, its keys as PyTorch wrote them) and returns its outputs
// by name ("logits" for "output.logits"). Prints each output's largest
// difference from PyTorch's; returns 0 when every one is within `tolerance`
// relative to the largest |value|, 1 otherwise or on an error, 2 on a wrong
// command line.
inline int check(int argc, char** argv, const char* name, double tolerance,
                 const std::function<Tensors(const Tensors& state, const Tensors& inputs)>& run) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s WEIGHTS.safetensors (written by %s.py)\n", name, name);
    return 2;
  }
  try {
    Tensors state, inputs, want;
    for (auto& [key, t] : xg::load_tensors(argv[1])) {
      if (key.rfind("input.", 0) == 0)
        inputs[key.substr(6)] = t;
      else if (key.rfind("output.", 0) == 0)
        want[key.substr(7)] = t;
      else
        state[key] = t;
    }
    const Tensors got = run(state, inputs);
    bool ok = !want.empty();
    for (const auto& [key, w] : want) {
      const auto it = got.find(key);
      if (it == got.end() || it->second.shape() != w.shape()) {
        std::fprintf(stderr, "%s: output %s missing or of another shape than PyTorch's %s\n", name, key.c_str(),
                     xg::shape_str(w.shape()).c_str());
        return 1;
      }
      const auto g = it->second.to_vector(), v = w.to_vector();
      double diff = 0, scale = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        diff = std::max(diff, std::abs(g[i] - v[i]));
        scale = std::max(scale, std::abs(v[i]));
      }
      std::printf(
          "%s: %zu tensors of PyTorch's state dict loaded; %s %s, largest difference from PyTorch's %.2e "
          "(relative %.2e)\n",
          name, state.size(), key.c_str(), xg::shape_str(w.shape()).c_str(), diff, diff / scale);
      ok = ok && diff <= tolerance * scale;
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace port
