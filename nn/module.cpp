#include "nn/module.h"

#include <algorithm>
#include <unordered_set>

#include "autograd/serialize.h"

namespace xg::nn {

void Module::check_name(const std::string& name, const char* what) const {
  auto fail = [&](const char* why) {
    throw std::invalid_argument(std::string(what) + ": name '" + name + "' in " + describe() + " " + why);
  };
  if (name.empty()) fail("is empty");
  if (name.find('.') != std::string::npos) fail("must not contain '.'");
  auto taken = [&](const auto& list) {
    for (const auto& e : list)
      if (e.name == name) return true;
    return false;
  };
  bool dup = taken(params_) || taken(buffers_);
  for (const auto& c : children_) dup = dup || c.first == name;
  if (dup) fail("is already registered");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name, "register_parameter");
  if (!t.defined()) throw std::invalid_argument("register_parameter: '" + name + "' is undefined");
  if (!t.is_leaf())
    throw std::invalid_argument("register_parameter: '" + name +
                                "' is the result of an op, not a leaf (detach() it first)");
  t.requires_grad_(true);
  params_.push_back({name, std::move(t), true});
  return params_.back().tensor;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_name(name, "register_buffer");
  if (!t.defined()) throw std::invalid_argument("register_buffer: '" + name + "' is undefined");
  buffers_.push_back({name, std::move(t), persistent});
  return buffers_.back().tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_name(name, "register_module");
  if (child.get() == this) throw std::invalid_argument("register_module: '" + name + "' is the module itself");
  child->set_path(path_.empty() ? name : path_ + "." + name);
  children_.emplace_back(name, std::move(child));
}

Module::Module(Module&& other)
    : params_((other.check_movable(), std::move(other.params_))),
      buffers_(std::move(other.buffers_)),
      children_(std::move(other.children_)),
      training_(other.training_) {}

void Module::check_movable() const {
  if (!path_.empty())
    throw std::logic_error(describe() + ": a module registered in a parent cannot be moved out of it (the parent " +
                           "would keep an empty shell); share it through its std::shared_ptr instead");
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, child] : children_) child->set_path(path_ + "." + name);
}

std::string Module::describe() const {
  return path_.empty() ? type_name() : type_name() + " '" + path_ + "'";
}

void Module::require_input(const Tensor& x, const std::vector<int64_t>& ranks, int64_t channels,
                           const std::string& layout, int64_t side) const {
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  const bool rank_ok = ranks.size() == 0 ? x.dim() >= 2 : std::find(ranks.begin(), ranks.end(), x.dim()) != ranks.end();
  const bool ok = rank_ok && (channels < 0 || x.size(1) == channels) &&
                  (side <= 0 || (x.size(x.dim() - 2) == side && x.size(x.dim() - 1) == side));
  if (ok) return;
  std::string want = layout;
  if (channels >= 0) want += " with C=" + std::to_string(channels);
  if (side > 0) want += " and H=W=" + std::to_string(side);
  throw ShapeError(describe() + ": expected an input " + want + ", got " + shape_str(x.shape()));
}

void Module::collect_tensors(const std::string& prefix, bool params, bool persistent_only,
                             std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& e : params ? params_ : buffers_)
    if (!persistent_only || e.persistent) out.emplace_back(prefix + e.name, e.tensor);
  for (const auto& [name, child] : children_)
    child->collect_tensors(prefix + name + ".", params, persistent_only, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> all, out;
  collect_tensors("", true, false, all);
  std::unordered_set<const TensorImpl*> seen;
  for (auto& p : all)
    if (seen.insert(p.second.impl().get()).second) out.push_back(std::move(p));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& p : named_parameters()) out.push_back(p.second);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_tensors("", false, false, out);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

void Module::zero_grad() {
  for (auto& p : parameters()) p.zero_grad();
}

void Module::to(Dtype d) {
  for (auto& p : parameters()) {
    p.zero_grad();
    p.convert_(d);
  }
  // Integer buffers (a count of batches) stay integers, as in PyTorch.
  for (auto& b : named_buffers())
    if (b.second.dtype() != i64) b.second.convert_(d);
  std::vector<Module*> todo{this};
  while (!todo.empty()) {
    Module* m = todo.back();
    todo.pop_back();
    m->on_dtype(d);
    for (auto& [name, child] : m->children_) todo.push_back(child.get());
  }
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> all;
  collect_tensors("", true, true, all);
  collect_tensors("", false, true, all);
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : all) out.emplace(name, t.detach());
  return out;
}

void Module::upgrade_tree(std::map<std::string, Tensor>& state, const std::string& prefix) const {
  upgrade_state_dict(state, prefix);
  for (const auto& [name, child] : children_) child->upgrade_tree(state, prefix + name + ".");
}

std::map<std::string, Tensor> Module::upgrade(std::map<std::string, Tensor> state, const std::string& prefix) const {
  upgrade_tree(state, prefix);
  return state;
}

LoadResult Module::load_state_dict(const std::map<std::string, Tensor>& given, bool strict) {
  const std::map<std::string, Tensor> state = upgrade(given);
  std::map<std::string, Tensor> own = state_dict();
  LoadResult result;
  std::vector<std::string> problems;
  for (const auto& [key, t] : own) {
    auto it = state.find(key);
    if (it == state.end()) {
      result.missing_keys.push_back(key);
      if (strict)
        problems.push_back("missing key '" + key + "' (model has " + shape_str(t.shape()) + " " +
                           dtype_name(t.dtype()) + ")");
      continue;
    }
    const Tensor& src = it->second;
    if (!src.defined()) {
      problems.push_back("key '" + key + "' is an undefined tensor");
    } else if (src.shape() != t.shape()) {
      problems.push_back("key '" + key + "': shape " + shape_str(src.shape()) + " in the state dict, " +
                         shape_str(t.shape()) + " in the model");
    }
  }
  for (const auto& [key, t] : state)
    if (!own.count(key)) {
      result.unexpected_keys.push_back(key);
      if (strict)
        problems.push_back("unexpected key '" + key + "'" +
                           (t.defined() ? " (" + shape_str(t.shape()) + ")" : std::string()));
    }
  if (!problems.empty()) {
    std::string msg = "load_state_dict into " + describe() + ": ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    throw std::invalid_argument(msg);
  }
  // Values convert to the model's dtype, as PyTorch's copy_ does.
  for (auto& [key, t] : own) {
    auto it = state.find(key);
    if (it == state.end()) continue;
    const Tensor& src = it->second;
    t.copy_(src.dtype() == t.dtype() ? src : src.detach().to(t.dtype()));
  }
  return result;
}

void Module::save(const std::string& path) const {
  save_tensors(path, state_dict(), {{"format", "xgrad"}, {"module", type_name()}});
}

LoadResult Module::load(const std::string& path, bool strict) {
  std::map<std::string, Tensor> state = load_tensors(path);
  try {
    return load_state_dict(state, strict);
  } catch (const std::invalid_argument& e) {
    throw FormatError(path + ": " + e.what());
  }
}

Tensor Module::forward(const Tensor&) {
  throw std::logic_error(describe() + " has no single-input forward(x)");
}

const char* batch_layout(size_t spatial_axes) {
  return spatial_axes == 1 ? "(N,C,L)" : spatial_axes == 2 ? "(N,C,H,W)" : "(N,C,D,H,W)";
}

}  // namespace xg::nn
