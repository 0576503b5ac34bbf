// The op table's entries (tests/optable/optable.py) on the C++ side: each
// op by its name, its attributes read from the program step by PyTorch's
// keyword names. xg_difftest runs them in programs and gradchecks them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tensor.h"

namespace xg::optable {

using json = nlohmann::json;

bool has(const std::string& op);  // whether the table has `op`
// The op of step `s` on its arguments (arg(i): the i-th, undefined past those given).
Tensor run(const std::string& op, const json& s, const std::function<Tensor(size_t)>& arg);
std::vector<std::string> names();  // every entry's name, sorted
// A loss's `reduction` keyword ("none", "mean" (absent), "sum", "batchmean");
// anything else throws naming it.
Reduction reduction_of(const json& s);
// interpolate's options from PyTorch's keyword arguments (size, scale_factor, mode, ...).
InterpolateOptions interpolate_options(const json& s);

}  // namespace xg::optable
