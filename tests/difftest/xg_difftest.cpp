// Runs random programs (written by tests/difftest/difftest.py, one JSON object
// per line) on xgrad in float64 (or float32 with --dtype f32, and float32
// under Autocast(bf16) with --dtype bf16) and prints, one JSON line per program, every
// value and gradient the program defines, the leaves' grad() at the end, and
// the first error (with the step that threw). The same programs run in
// PyTorch (difftest.py), which compares. The format is in tests/difftest/README.md.
//   xg_difftest [--dtype f32|bf16 | --onnx DIR] PROGRAMS.jsonl > RESULTS.jsonl
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "../optable/table_modules.h"
#include "../optable/table_ops.h"
#include "autograd/xg.h"
#include "engine/gemm.h"
#include "nn/containers.h"
#include "nn/init.h"
#include "onnx/export.h"
#include "optim/clip.h"

using namespace xg;
using json = nlohmann::json;

namespace {

std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }

// The precision the programs run in: their inputs, modules and zero gradients.
Dtype g_dtype = f64;

// A tensor given by {"shape": [...], "data": [...]}, in the programs' precision.
Tensor dense(const json& j) {
  for (const json& d : j.at("shape"))
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw std::invalid_argument("xg_difftest: shape " + j.at("shape").dump() + ": expected integers >= 0");
  const Shape s = j.at("shape").get<Shape>();
  return from_vector(j.at("data").get<std::vector<double>>(), s, g_dtype);
}

RecurrentCell cell_of(const std::string& c) {
  if (c == "tanh") return RecurrentCell::tanh;
  if (c == "relu") return RecurrentCell::relu;
  if (c == "lstm") return RecurrentCell::lstm;
  if (c == "gru") return RecurrentCell::gru;
  throw std::invalid_argument("xg_difftest: unknown cell " + c);
}

// Whether a gradient can flow from t (it is on the tape or a leaf that requires grad).
bool on_tape(const Tensor& t) { return t.defined() && (t.requires_grad() || !t.is_leaf()); }

class Program {
 public:
  explicit Program(const json& p) : p_(p) {}

  // Every value of a forward-only program, its inputs taken from `feeds` (one
  // per input step, in order) rather than from the program: the function an
  // ONNX export traces.
  std::vector<Tensor> values_with(const std::vector<Tensor>& feeds) {
    values_.clear(), inputs_.clear(), snapshots_ = json::array();
    feeds_ = &feeds;
    for (const json& s : p_.at("steps")) run_step(s);
    feeds_ = nullptr;
    return values_;
  }

  json run() {
    json out;
    size_t step = 0;
    try {
      for (const json& s : p_.at("steps")) {
        run_step(s);
        ++step;
      }
    } catch (const std::exception& e) {
      out["error"] = e.what();
      out["error_step"] = step;
    }
    out["values"] = snapshots_;
    json grads = json::array();
    for (const Tensor& t : inputs_) grads.push_back(t.defined() && t.grad().defined() ? flat(t.grad()) : json());
    out["leaf_grads"] = grads;
    if (!checks_.empty()) out["gradchecks"] = checks_;
    return out;
  }

 private:
  static json flat(const Tensor& t) {
    if (!t.defined()) return json();
    json a = json::array();
    for (double v : t.to_vector()) a.push_back(v);  // NaN and Inf print as null
    return a;
  }

  Tensor arg(const json& s, size_t i) const {
    const json& a = s.at("args").at(i);
    if (a.is_null()) return Tensor();
    return value(a);
  }

  // The value a step names by its number: defined by an earlier step.
  const Tensor& value(const json& id) const {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<uint64_t>() >= values_.size())
      throw std::invalid_argument("xg_difftest: value " + id.dump() + " is not defined before this step (values 0.." +
                                  std::to_string(static_cast<int64_t>(values_.size()) - 1) + " are)");
    return values_[id.get<size_t>()];
  }

  // The outputs of a grad/backward step that are on the tape, with their seeds.
  void roots(const json& s, std::vector<Tensor>& outs, std::vector<Tensor>& seeds) const {
    const json& gos = s.value("grad_outputs", json::array());
    size_t k = 0;
    for (const json& o : s.at("outputs")) {
      const Tensor y = value(o);
      const json go = k < gos.size() ? gos[k] : json();
      ++k;
      if (!on_tape(y)) continue;  // a constant: contributes no gradient
      outs.push_back(y);
      seeds.push_back(go.is_null() ? ones(y.shape(), y.dtype()) : value(go));
    }
  }

  void run_step(const json& s) {
    const std::string op = s.at("op");
    auto a = [&](size_t i) { return arg(s, i); };
    // Each value as it was when defined (a later in-place write may change a
    // tensor that shares its storage).
    auto push = [&](const Tensor& t) {
      values_.push_back(t);
      snapshots_.push_back(flat(t));
    };
    if (op == "input") {  // a leaf in the programs' precision, requires_grad when "rg"
      Tensor t = feeds_ ? feeds_->at(inputs_.size()) : dense(s);
      if (s.value("rg", false)) t.requires_grad_();
      push(t);
      inputs_.push_back(t);
      return;
    }
    if (op == "ids") {  // int64 class targets or ids: no gradient
      push(from_ints(s.at("data").get<std::vector<int64_t>>(), s.at("shape").get<Shape>()));
      return;
    }
    if (op == "module" || op == "reload") {
      // An nn module built as PyTorch's: its output, its parameters and its
      // buffers after the call. reload: the program's n-th module, saved to
      // a safetensors file and loaded into a fresh one, then called.
      optable::ModuleCall m;
      if (op == "module") {
        m = build_module(s);
        modules_.push_back({&s, m});  // alive while the program's graph is
      } else {
        const size_t n = s.at("module").get<size_t>();
        if (n >= modules_.size()) throw std::invalid_argument("xg_difftest: reload of module " + std::to_string(n));
        json fresh = *modules_[n].first;
        fresh.erase("state");
        m = build_module(fresh);
        const std::string path = (std::filesystem::temp_directory_path() /
                                  ("xg_difftest_reload_" + std::to_string(::getpid()) + ".safetensors"))
                                     .string();
        modules_[n].second.module->save(path);
        try {
          m.module->load(path);  // strict
        } catch (...) {
          std::filesystem::remove(path);
          throw;
        }
        std::filesystem::remove(path);
        reloaded_.push_back(m.module);
      }
      std::vector<Tensor> args;
      for (size_t i = 0; i < s.at("args").size(); ++i) args.push_back(a(i));
      push(m.call(args));
      std::map<std::string, Tensor> named;
      for (const auto& [name, t] : m.module->named_parameters()) named[name] = t;
      for (const json& name : s.value("params", json::array())) push(named.at(name.get<std::string>()));
      named.clear();
      for (const auto& [name, t] : m.module->named_buffers()) named[name] = t;
      for (const json& name : s.value("buffers", json::array())) push(named.at(name.get<std::string>()).clone());
      return;
    }
    if (op == "grad") {
      std::vector<Tensor> outs, seeds, wrt;
      roots(s, outs, seeds);
      for (const json& w : s.at("wrt")) wrt.push_back(value(w));
      std::vector<Tensor> gs(wrt.size());
      std::vector<Tensor> live;  // the inputs asked for that a gradient can reach
      std::vector<size_t> where;
      for (size_t i = 0; i < wrt.size(); ++i)
        if (on_tape(wrt[i])) {
          live.push_back(wrt[i]);
          where.push_back(i);
        }
      if (!outs.empty() && !live.empty()) {
        GradOptions o;
        o.create_graph = s.value("create_graph", false);
        o.retain_graph = true;
        o.allow_unused = true;
        const std::vector<Tensor> r = grad(outs, live, seeds, o);
        for (size_t k = 0; k < where.size(); ++k) gs[where[k]] = r[k];
      }
      for (size_t i = 0; i < wrt.size(); ++i) push(gs[i].defined() ? gs[i] : zeros(wrt[i].shape(), g_dtype));
      return;
    }
    if (op == "backward") {
      std::vector<Tensor> outs, seeds;
      roots(s, outs, seeds);
      if (outs.empty()) return;
      GradOptions o;
      o.create_graph = s.value("create_graph", false);
      o.retain_graph = true;
      backward(outs, seeds, o);
      return;
    }
    if (op == "leaf_grad") {
      const Tensor x = a(0);
      push(x.grad().defined() ? x.grad() : zeros(x.shape(), g_dtype));
      return;
    }
    if (op == "zero_grad") {
      Tensor x = a(0);
      x.zero_grad();
      return;
    }
    // In-place writes through xgrad's API (no tape; each bumps the version).
    if (op == "fill_") {
      a(0).fill_(s.at("value").get<double>());
      return;
    }
    if (op == "init_constant_") {
      Tensor x = a(0);
      nn::init::constant_(x, s.at("value").get<double>());
      return;
    }
    if (op == "convert_roundtrip_") {  // to float32 and back: the values rounded
      Tensor x = a(0);
      x.convert_(f32);
      x.convert_(f64);
      return;
    }
    if (op == "clip_grad_") {
      std::vector<Tensor> ps;
      for (const json& i : s.at("args")) ps.push_back(value(i));
      optim::clip_grad_norm(ps, s.at("max_norm").get<double>());
      return;
    }
    if (op == "gradcheck") {  // finite differences of the target step's op (or module) at its arguments
      const json& target = s.at("target");
      std::vector<Tensor> in;
      for (size_t i = 0; i < target.at("args").size(); ++i) in.push_back(arg(target, i));
      const std::string name = target.at("op");
      // a module's parameters are checked too: gradcheck perturbs them in place, f closes over them
      const optable::ModuleCall m = name == "module" ? build_module(target) : optable::ModuleCall{};
      auto f = [&](const std::vector<Tensor>& xs) {
        size_t k = 0;
        std::vector<Tensor> full;
        for (const Tensor& t : in) full.push_back(t.defined() && t.requires_grad() ? xs[k++] : t);
        if (m.module) return m.call(full);
        return forward(name, target, [&](size_t i) { return full.at(i); });
      };
      std::vector<Tensor> wrt;
      for (const Tensor& t : in)
        if (t.defined() && t.requires_grad()) wrt.push_back(t);
      if (m.module)
        for (const Tensor& p : m.module->parameters()) wrt.push_back(p);
      GradcheckOptions o;
      o.atol = 1e-7;
      o.rtol = 1e-6;
      if (m.module) {  // a module's many parameters: a sample of each tensor's elements, all inputs at once
        o.max_samples_per_input = 6;
        o.mixed_partials = false;
      }
      const GradcheckResult first = gradcheck(f, wrt, o);
      const GradcheckResult second = s.value("second_order", true) ? gradgradcheck(f, wrt, o) : GradcheckResult{};
      checks_.push_back({{"first", first.ok}, {"first_message", first.message}, {"second", second.ok},
                         {"second_message", second.message}});
      return;
    }
    push(forward(op, s, a));
  }

  // The module of a "module" step: built from PyTorch's keyword arguments,
  // in float64, PyTorch's state dict loaded strictly, in eval mode if asked.
  optable::ModuleCall build_module(const json& s) const {
    std::map<std::string, Tensor> state, tensors;
    const json st = s.value("state", json::object()), ts = s.value("tensors", json::object());
    for (auto it = st.begin(); it != st.end(); ++it) state[it.key()] = dense(it.value());
    for (auto it = ts.begin(); it != ts.end(); ++it) tensors[it.key()] = value(it.value());
    optable::ModuleCall m;
    if (s.at("class") == "Sequential") {  // the module mode's compositions, run by nn::Sequential itself
      auto seq = std::make_shared<nn::Sequential>();
      for (const json& c : s.at("children"))
        seq->push_back(optable::make_module(c.at("class"), c.value("kwargs", json::object()), {}).module);
      m = {seq, [seq](const std::vector<Tensor>& a) { return seq->forward(a.at(0)); }};
    } else {
      m = optable::make_module(s.at("class"), s.value("kwargs", json::object()), tensors);
    }
    m.module->to(g_dtype);
    if (s.contains("state")) m.module->load_state_dict(state);  // strict: PyTorch's keys, no more and no fewer
    if (s.value("eval", false)) m.module->eval();
    return m;
  }

  template <class Arg>
  Tensor forward(const std::string& op, const json& s, Arg a) {
    // Elementwise, broadcasting.
    if (op == "add") return add(a(0), a(1));
    if (op == "sub") return sub(a(0), a(1));
    if (op == "mul") return mul(a(0), a(1));
    if (op == "div") return div(a(0), a(1));
    if (op == "pow") return pow(a(0), a(1));
    if (op == "maximum") return maximum(a(0), a(1));
    if (op == "pow_scalar") return pow(a(0), s.at("e").get<double>());
    if (op == "add_scalar") return a(0) + s.at("s").get<double>();
    if (op == "mul_scalar") return a(0) * s.at("s").get<double>();
    if (op == "rsub_scalar") return s.at("s").get<double>() - a(0);
    if (op == "rdiv_scalar") return s.at("s").get<double>() / a(0);
    if (op == "neg") return neg(a(0));
    if (op == "exp") return exp(a(0));
    if (op == "log") return log(a(0));
    if (op == "sqrt") return sqrt(a(0));
    if (op == "abs") return abs(a(0));
    if (op == "relu") return relu(a(0));
    if (op == "gelu") return gelu(a(0));
    if (op == "tanh") return tanh(a(0));
    if (op == "sigmoid") return sigmoid(a(0));
    if (op == "clamp") return clamp(a(0), s.at("lo").get<double>(), s.at("hi").get<double>());
    // Reductions.
    const bool keep = s.value("keepdims", false);
    if (op == "sum") return sum(a(0), ints(s.at("axes")), keep);
    if (op == "mean") return mean(a(0), ints(s.at("axes")), keep);
    if (op == "max") return max(a(0), ints(s.at("axes")), keep);
    if (op == "var") return var(a(0), ints(s.at("axes")), s.value("unbiased", false) ? 1 : 0, keep);
    // Shape.
    if (op == "reshape") return reshape(a(0), s.at("shape").get<Shape>());
    if (op == "permute") return permute(a(0), ints(s.at("perm")));
    if (op == "transpose") return transpose(a(0), s.at("dim0").get<int64_t>(), s.at("dim1").get<int64_t>());
    if (op == "slice")
      return slice(a(0), s.at("axis").get<int64_t>(), s.at("start").get<int64_t>(), s.at("end").get<int64_t>(),
                   s.value("step", int64_t{1}));
    if (op == "concat" || op == "stack") {
      std::vector<Tensor> ts;
      for (size_t i = 0; i < s.at("args").size(); ++i) ts.push_back(a(i));
      return op == "concat" ? concat(ts, s.at("axis").get<int64_t>()) : stack(ts, s.at("axis").get<int64_t>());
    }
    if (op == "split")
      return split(a(0), ints(s.at("sizes")), s.at("axis").get<int64_t>()).at(s.at("part").get<size_t>());
    if (op == "chunk")
      return chunk(a(0), s.at("chunks").get<int64_t>(), s.at("axis").get<int64_t>()).at(s.at("part").get<size_t>());
    if (op == "unsqueeze") return unsqueeze(a(0), s.at("axis").get<int64_t>());
    if (op == "squeeze") return squeeze(a(0), s.at("axis").get<int64_t>());
    if (op == "broadcast_to") return broadcast_to(a(0), s.at("shape").get<Shape>());
    // Products.
    if (op == "matmul") return matmul(a(0), a(1));
    if (op == "linear") return linear(a(0), a(1), a(2));
    // Indexing.
    if (op == "gather_rows") return gather_rows(a(0), ints(s.at("ids")), s.at("ids_shape").get<Shape>());
    if (op == "index_select")
      return index_select(a(0), s.at("axis").get<int64_t>(), from_ints(ints(s.at("index")), {int64_t(s.at("index").size())}));
    if (op == "where") return where(dense(s.at("cond")), a(0), a(1));
    if (op == "masked_fill") return masked_fill(a(0), dense(s.at("mask")), s.at("value").get<double>());
    // Fused.
    if (op == "softmax") return softmax(a(0), s.at("axis").get<int64_t>());
    if (op == "log_softmax") return log_softmax(a(0), s.at("axis").get<int64_t>());
    if (op == "layer_norm") return layer_norm(a(0), a(1), a(2), s.value("eps", 1e-5));
    if (op == "add_layer_norm") return add_layer_norm(a(0), a(1), a(2), a(3), s.value("eps", 1e-5));
    if (op == "linear_cross_entropy")
      return linear_cross_entropy(a(0), a(1), a(2), ints(s.at("targets")), s.value("ignore_index", int64_t{-100}),
                                  s.value("label_smoothing", 0.0));
    if (op == "dropout") {
      Generator g(s.value("seed", uint64_t{0}));
      return dropout(a(0), s.at("p").get<double>(), true, g);
    }
    if (op == "relu_dropout") {
      Generator g(s.value("seed", uint64_t{0}));
      return relu_dropout(a(0), s.at("p").get<double>(), true, g);
    }
    if (op == "attention") {
      AttentionOptions o;
      o.heads = s.at("heads").get<int64_t>();
      o.causal = s.value("causal", false);
      o.scale = s.value("scale", 0.0);
      o.kv_length = s.value("kv_length", int64_t{0});
      if (s.contains("key_padding_mask") && !s.at("key_padding_mask").is_null())
        o.key_padding_mask = dense(s.at("key_padding_mask"));
      const std::string mem = s.value("memory", std::string("automatic"));
      o.memory = mem == "recompute" ? AttentionMemory::recompute
                 : mem == "keep_weights" ? AttentionMemory::keep_weights
                                         : AttentionMemory::automatic;
      return attention(a(0), a(1), a(2), o);
    }
    if (op == "recurrence")
      return recurrence(cell_of(s.at("cell")), a(0), a(1), a(2), a(3), a(4), ints(s.value("lengths", json::array())),
                        s.value("reverse", false));
    if (optable::has(op)) return optable::run(op, s, a);
    throw std::invalid_argument("xg_difftest: unknown op '" + op + "'");
  }

  const json& p_;
  const std::vector<Tensor>* feeds_ = nullptr;  // values_with's inputs
  std::vector<Tensor> values_;
  std::vector<Tensor> inputs_;
  json snapshots_ = json::array();
  json checks_ = json::array();
  std::vector<std::pair<const json*, optable::ModuleCall>> modules_;  // each module step's, in order
  std::vector<std::shared_ptr<nn::Module>> reloaded_;                  // each reload step's
};

json tensor_json(const Tensor& t) {
  json j{{"dtype", t.dtype() == Dtype::i64 ? "int64" : "float32"}, {"shape", t.shape()}};
  if (t.dtype() == Dtype::i64)
    j["data"] = std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  else
    j["data"] = t.to_vector();
  return j;
}

// The ONNX mode: forward-only program number n exported as a graph (its
// input steps the graph's inputs, every other float value an output) to
// DIR/pN.onnx, its float32 inputs and xgrad's outputs added to `models`
// (tests/onnx/run_ort.js's cases.json). Returns its line: exported, refused
// (ExportError naming the op or the limit), empty (no float value but its
// inputs) or failed (any other error, or a model ONNX's checker rejects).
json export_program(const json& p, int64_t n, const std::string& dir, json& models) {
  json out{{"program", n}};
  try {
    Program prog(p);
    std::vector<onnx::Input> inputs;
    std::vector<Tensor> feeds;
    for (const json& s : p.at("steps"))
      if (s.at("op") == "input") {
        feeds.push_back(dense(s));
        inputs.push_back({"x" + std::to_string(feeds.size() - 1), feeds.back(), {}});
      }
    const std::vector<Tensor> values = prog.values_with(feeds);
    std::vector<size_t> picked;  // float values that are not an input itself
    onnx::ExportOptions o;
    for (size_t i = 0; i < values.size(); ++i) {
      bool input = false;
      for (const Tensor& f : feeds) input = input || f.impl() == values[i].impl();
      if (!input && values[i].dtype() != Dtype::i64)
        picked.push_back(i), o.output_names.push_back("v" + std::to_string(i));
    }
    if (picked.empty()) {  // every value an input or int64: nothing to run
      out["status"] = "empty";
      return out;
    }
    auto forward = [&](const std::vector<Tensor>& xs) {
      const std::vector<Tensor> v = prog.values_with(xs);
      std::vector<Tensor> r;
      for (size_t i : picked) r.push_back(v[i]);
      return r;
    };
    const std::string file = "p" + std::to_string(n) + ".onnx";
    nn::Module none;
    onnx::export_model(none, forward, inputs, dir + "/" + file, o);
    json c{{"inputs", json::object()}, {"outputs", json::object()}};
    for (size_t k = 0; k < feeds.size(); ++k) c["inputs"][inputs[k].name] = tensor_json(feeds[k]);
    for (size_t k = 0; k < picked.size(); ++k) c["outputs"][o.output_names[k]] = tensor_json(values[picked[k]]);
    models.push_back({{"file", file}, {"cases", json::array({c})}});
    out["status"] = "exported", out["file"] = file;
  } catch (const onnx::ExportError& e) {
    const std::string m = e.what();
    // a refusal names the op or the limit; a model ONNX's checker rejects is the exporter's fault
    out["status"] = m.find("checker rejects") == std::string::npos ? "refused" : "failed";
    out["message"] = m.substr(0, 300);
  } catch (const std::exception& e) {
    out["status"] = "failed", out["message"] = std::string(e.what()).substr(0, 300);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--list-table") {  // the op table's names, one a line
    for (const std::string& n : optable::names()) std::cout << n << "\n";
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--list-modules") {  // the module table's classes, one a line
    for (const std::string& n : optable::module_names()) std::cout << n << "\n";
    return 0;
  }
  std::string onnx_dir;   // --onnx DIR: float32 programs exported (export_program)
  bool autocast = false;  // --dtype bf16: float32 programs under Autocast(bf16)
  if (argc == 4 && std::string(argv[1]) == "--onnx") {
    onnx_dir = argv[2];
    std::error_code ec;
    if (!std::filesystem::is_directory(onnx_dir, ec)) {
      std::cerr << "xg_difftest: --onnx " << onnx_dir << ": not a folder\n";
      return 2;
    }
    g_dtype = f32;
    argv += 2, argc -= 2;
  } else if (argc == 4 && std::string(argv[1]) == "--dtype" &&
             (std::string(argv[2]) == "f32" || std::string(argv[2]) == "bf16")) {
    g_dtype = f32;
    autocast = std::string(argv[2]) == "bf16";
    argv += 2, argc -= 2;
  }
  if (argc != 2) {
    std::cerr << "usage: xg_difftest [--dtype f32|bf16 | --onnx DIR] PROGRAMS.jsonl > RESULTS.jsonl | "
                 "xg_difftest --list-table\n";
    return 2;
  }
  // On a CPU without bf16 products the mode runs them emulated, as the unit
  // tests do (tests/helpers.h, Bf16Products): operands rounded to bf16 as the
  // hardware rounds them, products in float32. So every machine checks the
  // bf16 code paths against torch.autocast, and says which it checked.
  if (autocast && !bf16_unsupported_reason().empty()) {
    std::cerr << "xg_difftest --dtype bf16: bf16 emulated here (" << bf16_unsupported_reason() << ")\n";
    engine::set_bf16_emulation(true);
  }
  std::error_code ec;
  std::ifstream in(argv[1]);
  if (!std::filesystem::is_regular_file(argv[1], ec) || !in) {
    std::cerr << "xg_difftest: cannot read " << argv[1] << "\n";
    return 2;
  }
  json models = json::array();  // the ONNX mode's cases
  std::string line;
  for (int64_t n = 0; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json p;
    try {
      p = json::parse(line);
    } catch (const std::exception& e) {
      std::cerr << "xg_difftest: a line of " << argv[1] << " is not JSON: " << e.what() << "\n";
      return 2;
    }
    if (!onnx_dir.empty()) {
      std::cout << export_program(p, n, onnx_dir, models).dump() << "\n";
      continue;
    }
    Program prog(p);
    std::optional<Autocast> guard;
    if (autocast) guard.emplace(bf16);
    std::cout << prog.run().dump() << "\n";
  }
  if (!onnx_dir.empty() && !(std::ofstream(onnx_dir + "/cases.json") << json{{"models", models}}.dump() << "\n")) {
    std::cerr << "xg_difftest: cannot write " << onnx_dir << "/cases.json\n";
    return 2;
  }
  return 0;
}
