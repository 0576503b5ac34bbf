// The module table's classes (tests/optable/optable.py, MODULES) on the C++
// side: each torch.nn class name builds the xgrad module of that name from
// PyTorch's keyword arguments, and calls its forward on the inputs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/module.h"

namespace xg::optable {

// A module and how to call it (forward of one, two or three inputs).
struct ModuleCall {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor(const std::vector<Tensor>&)> call;
};

// The module of torch.nn class `cls` built from `kwargs` (PyTorch's names;
// tensor arguments such as a loss's weight in `tensors`); throws
// std::invalid_argument naming an unknown class.
ModuleCall make_module(const std::string& cls, const nlohmann::json& kwargs, const std::map<std::string, Tensor>& tensors);
std::vector<std::string> module_names();  // every class the table builds, sorted

}  // namespace xg::optable
