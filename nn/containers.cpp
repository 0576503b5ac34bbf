#include "nn/containers.h"

namespace xg::nn {

void OrderedModules::push_back(std::shared_ptr<Module> m) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(m)));
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

Tensor Sequential::forward(const Tensor& x) {
  const auto named = scope();
  Tensor h = x;
  for (auto& m : modules_) h = m->forward(h);
  return h;
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  if (i >= modules_.size())
    throw std::out_of_range(describe() + ": index " + std::to_string(i) + " out of range for size " +
                            std::to_string(modules_.size()));
  return modules_[i];
}

ModuleDict::ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> items) {
  for (const auto& [k, m] : items) insert(k, m);
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  register_module(key, m);  // checks the name, its uniqueness and m
  modules_.emplace_back(key, std::move(m));
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : modules_)
    if (k == key) return true;
  return false;
}

const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& key) const {
  for (const auto& kv : modules_)
    if (kv.first == key) return kv.second;
  std::string names;
  for (const auto& [k, m] : modules_) names += (names.empty() ? "" : ", ") + k;
  throw std::out_of_range(describe() + ": no module '" + key + "' (keys: " + names + ")");
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> v;
  for (const auto& [k, m] : modules_) v.push_back(k);
  return v;
}

ParameterList::ParameterList(std::initializer_list<Tensor> params) {
  for (const Tensor& p : params) append(p);
}

Tensor& ParameterList::append(Tensor p) {
  Tensor& t = register_parameter(std::to_string(names_++), std::move(p));
  params_.push_back(&t);
  return t;
}

Tensor& ParameterList::operator[](size_t i) {
  if (i >= params_.size())
    throw std::out_of_range(describe() + ": index " + std::to_string(i) + " out of range for " +
                            std::to_string(params_.size()) + " parameters");
  return *params_[i];
}

ParameterDict::ParameterDict(std::initializer_list<std::pair<std::string, Tensor>> params) {
  for (const auto& [k, p] : params) insert(k, p);
}

Tensor& ParameterDict::insert(const std::string& key, Tensor p) {
  Tensor& t = register_parameter(key, std::move(p));
  keys_.push_back(key);
  params_.push_back(&t);
  return t;
}

bool ParameterDict::contains(const std::string& key) const {
  for (const std::string& k : keys_)
    if (k == key) return true;
  return false;
}

Tensor& ParameterDict::operator[](const std::string& key) {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return *params_[i];
  std::string names;
  for (const std::string& k : keys_) names += (names.empty() ? "" : ", ") + k;
  throw std::out_of_range(describe() + ": no parameter '" + key + "' (keys: " + names + ")");
}

}  // namespace xg::nn
