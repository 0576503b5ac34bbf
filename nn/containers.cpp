#include "nn/containers.h"

namespace xg::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(m)));
}

Tensor Sequential::forward(const Tensor& x) {
  const auto named = scope();
  Tensor h = x;
  for (auto& m : modules_) h = m->forward(h);
  return h;
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(m)));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  if (i >= modules_.size())
    throw std::out_of_range(describe() + ": index " + std::to_string(i) + " out of range for size " +
                            std::to_string(modules_.size()));
  return modules_[i];
}

}  // namespace xg::nn
