// Sequential (chains forward) and ModuleList (holds modules for a loop).
// Children are named "0", "1", ... in insertion order.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace xg::nn {

// Modules applied one after the other.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);  // push_back of each, in order
  void push_back(std::shared_ptr<Module> m);  // registers m under the next name ("0", "1", ...); null throws
  size_t size() const { return modules_.size(); }  // number of modules
  // x -> m0.forward(x) -> m1.forward(...) -> ...; empty: the identity.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }  // "Sequential"

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Modules kept in order, for a loop of the owner's forward (no forward of
// its own).
class ModuleList : public Module {
 public:
  ModuleList() = default;
  void push_back(std::shared_ptr<Module> m);  // registers m under the next name ("0", "1", ...); null throws
  size_t size() const { return modules_.size(); }  // number of modules
  bool empty() const { return modules_.empty(); }  // size() == 0
  // Bounds-checked (std::out_of_range naming the index and size).
  const std::shared_ptr<Module>& operator[](size_t i) const;
  // Typed access: throws std::invalid_argument if module i is not an M.
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    if (!p) throw std::invalid_argument(describe() + ": element " + std::to_string(i) + " is a " +
                                        (*this)[i]->type_name() + ", not the requested type");
    return p;
  }
  auto begin() const { return modules_.begin(); }  // iteration over the modules in order
  auto end() const { return modules_.end(); }      // end of that iteration
  std::string type_name() const override { return "ModuleList"; }  // "ModuleList"

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace xg::nn
