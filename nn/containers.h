// Sequential (chains forward) and ModuleList (holds modules for a loop),
// children named "0", "1", ... in insertion order; ModuleDict (children by
// name); ParameterList and ParameterDict (parameters by index or name).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace xg::nn {

// What Sequential and ModuleList share: modules kept in order, registered
// as the children "0", "1", ... (PyTorch's names, so its state-dict keys).
class OrderedModules : public Module {
 public:
  // Modules of any types, in order, as LibTorch's Sequential(a, b, c): each a
  // temporary (Sequential(Linear(4, 8), ReLU()), moved in) or a
  // std::shared_ptr (kept, shared with the caller). A single Sequential (or
  // ModuleList) passed with std::move is moved, not nested, as LibTorch's copy is.
  template <class... A, class = std::enable_if_t<(sizeof...(A) > 0) && (is_module_arg<A>() && ...)>>
  explicit OrderedModules(A&&... modules) {
    (push_back(to_shared(std::forward<A>(modules))), ...);
  }
  void push_back(std::shared_ptr<Module> m);  // registers m under the next name ("0", "1", ...); null throws
  // push_back of a module made as a temporary (moved in): seq->push_back(ReLU()).
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, std::decay_t<M>>>>
  void push_back(M&& m) {
    push_back(to_shared(std::forward<M>(m)));
  }
  size_t size() const { return modules_.size(); }  // number of modules

 protected:
  OrderedModules() = default;                     // empty
  std::vector<std::shared_ptr<Module>> modules_;  // the modules, in order
};

// Modules applied one after the other.
class Sequential : public OrderedModules {
 public:
  using OrderedModules::OrderedModules;  // Sequential(Linear(4, 8), ReLU(), ...), as OrderedModules takes them
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);  // push_back of each, in order
  // push_back of an M made from `args`; returns this Sequential, so that
  // appends chain as PyTorch's append does: seq->append<Linear>(4, 8).append<ReLU>().
  template <class M, class... Args,
            class = std::enable_if_t<std::is_base_of_v<Module, M> && std::is_constructible_v<M, Args&&...>>>
  Sequential& append(Args&&... args) {
    push_back(std::make_shared<M>(std::forward<Args>(args)...));
    return *this;
  }
  // x -> m0.forward(x) -> m1.forward(...) -> ...; empty: the identity.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }  // "Sequential"
};

// Modules kept in order, for a loop of the owner's forward (no forward of
// its own).
class ModuleList : public OrderedModules {
 public:
  using OrderedModules::OrderedModules;  // modules in order, as Sequential's constructor takes them
  ModuleList() = default;
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
};

// Modules by name, in insertion order (torch.nn.ModuleDict): each child's
// tensors are "KEY.weight" and so on.
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  // insert() of each, in order
  ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> items);
  // Registers m under `key` (a name as register_module takes it; a key
  // already there throws std::invalid_argument naming it).
  void insert(const std::string& key, std::shared_ptr<Module> m);
  size_t size() const { return modules_.size(); }                 // number of modules
  bool contains(const std::string& key) const;                    // whether `key` is there
  const std::shared_ptr<Module>& operator[](const std::string& key) const;  // std::out_of_range naming the keys
  std::vector<std::string> keys() const;                          // in insertion order
  // Typed access: throws std::invalid_argument if the module is not an M.
  template <class M>
  std::shared_ptr<M> at(const std::string& key) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[key]);
    if (!p) throw std::invalid_argument(describe() + ": '" + key + "' is a " + (*this)[key]->type_name() +
                                        ", not the requested type");
    return p;
  }
  auto begin() const { return modules_.begin(); }  // (key, module) pairs in insertion order
  auto end() const { return modules_.end(); }      // end of that iteration
  std::string type_name() const override { return "ModuleDict"; }  // "ModuleDict"

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules_;
};

// Parameters in order, named "0", "1", ... (torch.nn.ParameterList).
class ParameterList : public Module {
 public:
  ParameterList() = default;
  // append() of each, in order
  ParameterList(std::initializer_list<Tensor> params);
  Tensor& append(Tensor p);  // registers p (a leaf) under the next name; returns it
  size_t size() const { return names_; }  // number of parameters
  Tensor& operator[](size_t i);           // bounds-checked (std::out_of_range naming the index and size)
  std::string type_name() const override { return "ParameterList"; }  // "ParameterList"

 private:
  size_t names_ = 0;
  std::vector<Tensor*> params_;
};

// Parameters by name, in insertion order (torch.nn.ParameterDict).
class ParameterDict : public Module {
 public:
  ParameterDict() = default;
  // insert() of each, in order
  ParameterDict(std::initializer_list<std::pair<std::string, Tensor>> params);
  Tensor& insert(const std::string& key, Tensor p);  // registers p under `key`; returns it
  size_t size() const { return keys_.size(); }      // number of parameters
  bool contains(const std::string& key) const;      // whether `key` is there
  Tensor& operator[](const std::string& key);       // std::out_of_range naming the keys
  const std::vector<std::string>& keys() const { return keys_; }  // in insertion order
  std::string type_name() const override { return "ParameterDict"; }  // "ParameterDict"

 private:
  std::vector<std::string> keys_;
  std::vector<Tensor*> params_;
};

}  // namespace xg::nn
