// xg::nn::Module: a tree of named parameters, buffers and child modules.
// Every parameter gets a dotted path ("decoder.layers.1.self_attn.in_proj_weight")
// used by named_parameters(), state dicts and error messages.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/profile.h"
#include "autograd/tensor.h"
#include "autograd/trace.h"

namespace xg::nn {

// What load_state_dict() did not match: PyTorch's _IncompatibleKeys.
struct LoadResult {
  std::vector<std::string> missing_keys;     // the model's keys the state dict lacks
  std::vector<std::string> unexpected_keys;  // the state dict's keys the model lacks
};

// The base of every layer and model: derive, register parameters, buffers and
// children in the constructor, and override forward() and type_name().
class Module {
 protected:
  // Whether Args is one M (then register_module moves it rather than
  // building an M from it).
  template <class M, class... Args>
  static constexpr bool is_only_argument() {
    if constexpr (sizeof...(Args) == 1)
      return (std::is_same_v<M, std::decay_t<Args>> && ...);
    else
      return false;
  }
  // Whether a container takes an A as one of its modules: a module (a
  // temporary, to be moved) or a std::shared_ptr to one.
  template <class A>
  static constexpr bool is_module_arg() {
    using T = std::decay_t<A>;
    return std::is_base_of_v<Module, T> || std::is_convertible_v<T, std::shared_ptr<Module>>;
  }
  // A module as its owner keeps it: a std::shared_ptr as given, a temporary
  // moved into a std::shared_ptr of its own type.
  template <class A>
  static auto to_shared(A&& a) {
    using T = std::decay_t<A>;
    if constexpr (std::is_base_of_v<Module, T>) {
      // A const module cannot be moved from, and no module is copied.
      static_assert(!std::is_lvalue_reference_v<A> && !std::is_const_v<std::remove_reference_t<A>>,
                    "a module is not copyable: pass a temporary (Linear(4, 8)), std::move(m) or a std::shared_ptr");
      return std::make_shared<T>(std::move(a));
    } else {
      return std::shared_ptr<Module>(std::forward<A>(a));
    }
  }

 public:
  Module() = default;
  virtual ~Module() = default;
  // Not copyable: a module owns its parameters.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Registration. Names must be non-empty, contain no '.', and be unique
  // within this module (parameters, buffers and children share one
  // namespace); otherwise std::invalid_argument naming the name.
  // The returned reference stays valid for the module's lifetime.
  Tensor& register_parameter(const std::string& name, Tensor t);  // sets requires_grad_
  // A non-persistent buffer is converted by to() but left out of state_dict()
  // (for derived values such as positional encodings).
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  // Adds `child` (not null: std::invalid_argument) under `name`; its tensors
  // get dotted paths below this module's. Returns `child`.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    if (!child) throw std::invalid_argument("register_module: child '" + name + "' is null");
    add_child(name, child);
    return child;
  }
  // Constructs an M from `args` and registers it: register_module<Linear>("fc",
  // 512, 10).
  template <class M, class... Args,
            class = std::enable_if_t<std::is_base_of_v<Module, M> && std::is_constructible_v<M, Args&&...> &&
                                     !is_only_argument<M, Args...>()>>
  std::shared_ptr<M> register_module(const std::string& name, Args&&... args) {
    return register_module(name, std::make_shared<M>(std::forward<Args>(args)...));
  }
  // Moves a module built as a temporary into a shared_ptr and registers it,
  // as LibTorch's register_module("fc", Linear(512, 10)).
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M> && !std::is_lvalue_reference_v<M> &&
                                              !std::is_const_v<M>>>
  std::shared_ptr<M> register_module(const std::string& name, M&& module) {
    return register_module(name, to_shared(std::move(module)));
  }

  // The tree, in registration order, with dotted paths. A tensor registered
  // twice (tied weights) is listed once, under its first name.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  int64_t num_parameters() const;  // total element count

  // Mode, gradients, dtype.

  void train(bool on = true);  // recursive
  void eval() { train(false); }                   // train(false)
  bool is_training() const { return training_; }  // as train() or eval() set it; true for a new module
  void zero_grad();  // drops every parameter's gradient
  // Converts every parameter and floating-point buffer in place
  // (Tensor::convert_; int64 buffers stay), so the
  // handles an optimiser holds see the new dtype. Drops gradients.
  void to(Dtype d);

  // State: parameters and persistent buffers by dotted name. The tensors
  // share storage with the module (detached handles).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values in place, as PyTorch's load_state_dict: each converted to
  // the model's dtype (copy_ semantics). Checks everything before copying
  // anything: a shape that differs or an undefined tensor, and, if strict,
  // missing and unexpected keys; throws std::invalid_argument naming each
  // offending key and both shapes. Returns the keys missing from `state` and
  // those of `state` the model does not have (empty when strict).
  LoadResult load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  // `state` with the keys of an earlier layout of this tree rewritten into
  // today's (and tensors merged where parameters were, such as three
  // projections into one in_proj_weight) by each module's
  // upgrade_state_dict, parents first; load_state_dict loads through it. A
  // state dict in today's layout comes back unchanged. `prefix` ("model."):
  // this tree's keys are those under it, as a checkpoint holds them; the
  // others are left as they are.
  std::map<std::string, Tensor> upgrade(std::map<std::string, Tensor> state, const std::string& prefix = "") const;
  // safetensors file (atomic write). load() throws xg::FormatError naming the
  // file, and the key on a mismatch with this module.
  void save(const std::string& path) const;
  LoadResult load(const std::string& path, bool strict = true);  // load_state_dict of the file's tensors

  // Called on every module of the tree after to(d) has converted the
  // tensors: a module whose buffers are derived values recomputes them in the
  // new precision here (rather than keep float32-rounded values in a float64
  // model).
  virtual void on_dtype(Dtype) {}

  // The default forward throws std::logic_error naming type_name().
  virtual Tensor forward(const Tensor& x);
  // The class and its settings, for messages: "Linear(in=4, out=3)"; "Module"
  // unless a subclass says otherwise.
  virtual std::string type_name() const { return "Module"; }
  // Dotted path from the outermost module this one was registered into ("" for a root).
  const std::string& path() const { return path_; }
  // "Linear(in=512, out=1000) 'out_proj'" (type and path), for error messages.
  std::string describe() const;
  // Names the ops of this module's forward in anomaly mode and in export
  // traces (see NameScope): `auto s = scope();` first thing in forward. Free
  // outside them.
  NameScope scope() const {
    return NameScope(anomaly_enabled() || tracing() || profiling() ? describe() : std::string());
  }
  // The layers' one input check, so that each words a wrong input alike:
  // throws ShapeError "DESCRIBE: expected an input LAYOUT with C=channels
  // [and H=W=side], got SHAPE" unless x is defined, has one of `ranks` axes
  // (none given: at least 2), x.size(1) == channels (channels < 0: any) and,
  // when side > 0, side x side pixels in its last two axes.
  void require_input(const Tensor& x, const std::vector<int64_t>& ranks, int64_t channels, const std::string& layout,
                     int64_t side = 0) const;

 protected:
  // Rewrites, in `state`, the keys under `prefix` (this module's path with
  // its dot, as the state dict being loaded names it) that an earlier layout
  // of this module wrote: PyTorch's _load_from_state_dict upgrade. The
  // default changes nothing.
  virtual void upgrade_state_dict(std::map<std::string, Tensor>& state, const std::string& prefix) const {
    (void)state, (void)prefix;
  }

  // Moving is for building in place: a module made as a temporary
  // (Sequential(Linear(4, 8), ReLU()), register_module("fc", Linear(512, 10)))
  // moves into the shared_ptr its owner keeps. Registered tensors keep their
  // addresses (a deque's move keeps its elements), so a layer's pointers to
  // its own entries stay valid; a layer must not point at its other members.
  // A module registered in a parent is not moved out of it (the parent would
  // keep an empty shell): std::logic_error naming it. Move assignment stays
  // deleted: a module in a tree is never replaced.
  Module(Module&& other);

 private:
  void upgrade_tree(std::map<std::string, Tensor>& state, const std::string& prefix) const;
  struct Entry {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void check_name(const std::string& name, const char* what) const;
  void check_movable() const;  // what the move constructor refuses
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  void set_path(const std::string& path);
  void collect_tensors(const std::string& prefix, bool params, bool persistent_only,
                       std::vector<std::pair<std::string, Tensor>>& out) const;

  std::deque<Entry> params_;   // deque: references stay valid as it grows
  std::deque<Entry> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::string path_;
};

// Puts a module (and its children) in eval mode for a scope, and gives it
// back the mode it had on leaving the scope, an exception included.
class EvalGuard {
 public:
  explicit EvalGuard(Module& m) : m_(m), was_(m.is_training()) { m_.eval(); }  // m.eval(), its mode kept
  ~EvalGuard() { m_.train(was_); }                                              // m's mode as before
  EvalGuard(const EvalGuard&) = delete;
  EvalGuard& operator=(const EvalGuard&) = delete;

 private:
  Module& m_;
  bool was_;
};

// A batch with 1, 2 or 3 spatial axes as layers name it in their input
// checks: "(N,C,L)", "(N,C,H,W)", "(N,C,D,H,W)".
const char* batch_layout(size_t spatial_axes);

}  // namespace xg::nn
