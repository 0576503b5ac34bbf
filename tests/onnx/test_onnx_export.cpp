// The export trace (autograd/trace.h) and export_model's refusals: one clear
// error each, and no file (nor temporary file) left behind. The exported
// values are checked by ONNX Runtime (tests/onnx/run_ort.js).
#include <doctest/doctest.h>
#include <dirent.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "onnx/detail/graph.h"
#include "onnx/export.h"
#include "tests/helpers.h"
#include "tests/onnx/models.h"

using namespace xg;
using xgt::contains;
namespace xo = xg::onnx;  // ::onnx is ONNX's own

namespace {

std::string tmp_path(const std::string& name) { return std::string(XG_TEST_TMPDIR) + "/" + name; }

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// Files in the test folder whose name starts with `prefix` (temporary files of an export).
int files_starting(const std::string& prefix) {
  int n = 0;
  DIR* d = ::opendir(XG_TEST_TMPDIR);
  while (const dirent* e = d ? ::readdir(d) : nullptr)
    if (std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
  if (d) ::closedir(d);
  return n;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::set<std::string> op_types(const std::string& path) {
  ::onnx::ModelProto m;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  std::set<std::string> types;
  for (const auto& n : m.graph().node()) types.insert(n.op_type());
  return types;
}

// A module whose forward clamps: an op with no ONNX mapping.
// A model whose forward ends in an op with no ONNX mapping (its loss).
struct Unmapped : nn::Module {
  explicit Unmapped(Generator& g) { fc = register_module("fc", std::make_shared<nn::Linear>(4, 4, g)); }
  Tensor forward(const Tensor& x) override {
    const auto named = scope();
    return cross_entropy(fc->forward(x), from_ints({0, 1}, {2}));
  }
  std::string type_name() const override { return "Unmapped"; }
  std::shared_ptr<nn::Linear> fc;
};

}  // namespace

TEST_CASE("trace: lists each op with its output and attributes, only while alive") {
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});  // needs no gradient: listed all the same
  std::vector<TracedOp> ops;
  {
    TraceGuard on(ops);
    CHECK(tracing());
    Tensor y = permute(x, {1, 0});
    Tensor same = reshape(y, {3, 2});  // unchanged: no op, no attributes given to another
    CHECK(same.impl() == y.impl());
    Tensor m = mean(y, {-1}, true);
    CHECK(ops.back().output.impl() == m.impl());
  }
  CHECK_FALSE(tracing());
  REQUIRE(ops.size() == 3);  // permute, sum, and the scaling relabelled as the mean
  CHECK(ops[0].op == "permute");
  CHECK(ops[0].attr<attr::Permutation>().order == std::vector<int64_t>{1, 0});
  CHECK(ops[0].inputs[0].impl() == x.impl());
  CHECK(ops[1].op == "sum");
  CHECK(ops[1].attr<attr::Axes>().axes == std::vector<int64_t>{1});  // axis 1 (normalised)
  CHECK(ops[1].attr<attr::Axes>().keepdims);
  CHECK(ops[2].op == "mean");
  CHECK(ops[2].attr<attr::Axes>().axes == std::vector<int64_t>{1});
  CHECK(ops[2].attr<attr::Axes>().keepdims);
  CHECK(ops[2].inputs[0].impl() == ops[0].output.impl());
  Tensor after = x * 2.0;  // nothing listed once the guard is gone
  CHECK(ops.size() == 3);
}

TEST_CASE("trace: names the module, and keeps an embedding's ids tensor") {
  Generator g(1);
  nn::Embedding emb(5, 3, g, /*padding_idx=*/0);
  Tensor ids = from_ints({0, 2, 4, 0}, {2, 2});  // padding ids: the trace keeps the lookup itself
  std::vector<TracedOp> ops;
  Tensor out;
  {
    TraceGuard on(ops);
    out = emb.forward(ids);
  }
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].op == "gather_rows");
  CHECK(ops[0].scope == "Embedding(num=5, dim=3)");
  REQUIRE(ops[0].extra.size() == 1);
  CHECK(ops[0].extra[0].impl() == ids.impl());
  CHECK(out.impl() == ops[0].output.impl());
  Tensor untraced = emb.forward(ids);  // outside a trace the padding rows come from a detached copy: same values
  CHECK(untraced.shape() == out.shape());
  for (int64_t i = 0; i < out.numel(); ++i) CHECK(untraced.data<float>()[i] == out.data<float>()[i]);
}

TEST_CASE("export_model: dropout vanishes, parameters keep their names, the mode comes back") {
  Generator g(2);
  onnx_test::Mlp mlp(g);
  mlp.train();
  const std::string path = tmp_path("mlp_train_mode.onnx");
  xo::export_model(mlp, {"x", randn({3, 8}, g), {"B", ""}}, path);
  CHECK(mlp.is_training());
  const auto types = op_types(path);
  CHECK_FALSE(types.count("Dropout"));
  CHECK(types.count("Gemm"));
  CHECK(types.count("LayerNormalization"));
  ::onnx::ModelProto m;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& [name, p] : mlp.named_parameters()) CHECK_MESSAGE(inits.count(name), name);
  CHECK(m.graph().input(0).type().tensor_type().shape().dim(0).dim_param() == "B");
  CHECK(m.graph().output(0).type().tensor_type().shape().dim(0).dim_param() == "B");
  CHECK(m.opset_import(0).version() == 17);
}

TEST_CASE("export_model: a fractional max pool is refused by name (its windows depend on random samples)") {
  manual_seed(1);
  nn::FractionalMaxPool2d pool(FractionalMaxPool2dOptions(2).output_size(3));
  const std::string path = tmp_path("fractional.onnx");
  std::remove(path.c_str());
  const std::string msg = error_of([&] {
    xo::export_model(pool, {"x", randn({1, 2, 6, 6}, default_generator()), {}}, path);
  });
  CHECK_MESSAGE(contains(msg, "export_model: op 'fractional_max_pool2d' in FractionalMaxPool2d() has no ONNX mapping"),
                msg);
  CHECK_FALSE(exists(path));
}

TEST_CASE("export_model: an op with no mapping is refused by name and module, and nothing is written") {
  Generator g(3);
  Unmapped model(g);
  const std::string path = tmp_path("unmapped.onnx");
  std::remove(path.c_str());
  const std::string msg = error_of([&] { xo::export_model(model, {"x", randn({2, 4}, g), {"B", ""}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: op 'cross_entropy' in Unmapped has no ONNX mapping yet"), msg);
  CHECK_MESSAGE(contains(msg, "layer_norm"), msg);  // the list of ops that do export
  CHECK_THROWS_AS(xo::export_model(model, {"x", randn({2, 4}, g), {"B", ""}}, path), xo::ExportError);
  CHECK_FALSE(exists(path));
  CHECK(files_starting("unmapped.onnx.tmp") == 0);
}

TEST_CASE("export_model: an unwritable path is refused naming it, and an existing file is kept") {
  Generator g(4);
  onnx_test::Mlp mlp(g);
  const xo::Input in{"x", randn({3, 8}, g), {"B", ""}};
  const std::string msg = error_of([&] { xo::export_model(mlp, in, "/nonexistent-xg-dir/m.onnx"); });
  CHECK_MESSAGE(contains(msg, "export_model: cannot create /nonexistent-xg-dir/m.onnx.tmp."), msg);
  CHECK_THROWS_AS(xo::export_model(mlp, in, "/nonexistent-xg-dir/m.onnx"), std::runtime_error);
  const std::string dir_msg = error_of([&] { xo::export_model(mlp, in, XG_TEST_TMPDIR); });
  CHECK_MESSAGE(contains(dir_msg, "is a directory: refusing to replace it"), dir_msg);
  const std::string path = tmp_path("kept.onnx");
  std::ofstream(path) << "old";
  Unmapped bad(g);
  CHECK_THROWS_AS(xo::export_model(bad, {"x", randn({2, 4}, g), {}}, path), xo::ExportError);
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  CHECK(s.str() == "old");
  CHECK(files_starting("kept.onnx.tmp") == 0);
}

TEST_CASE("export_model: example inputs that do not fit are refused, one error each") {
  Generator g(5);
  onnx_test::Mlp mlp(g);
  const std::string path = tmp_path("mismatch.onnx");
  std::remove(path.c_str());
  std::string msg = error_of([&] { xo::export_model(mlp, {"x", randn({3, 7}, g), {"B", ""}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: the forward failed on the example inputs (x (3,7)): Linear(in=8, out=16) 'fc1'"), msg);
  CHECK_THROWS_AS(xo::export_model(mlp, {"x", randn({3, 7}, g), {}}, path), ShapeError);
  msg = error_of([&] { xo::export_model(mlp, {"x", randn({3, 8}, g), {"B"}}, path); });
  CHECK_MESSAGE(contains(msg, "input 'x' has 1 dynamic_axes names for an example of shape (3,8)"), msg);
  msg = error_of([&] { xo::export_model(mlp, {"x", randn({1, 8}, g), {"B", ""}}, path); });
  CHECK_MESSAGE(contains(msg, "axis 0 ('B') has size 1 in the example"), msg);
  auto add = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0] + x[1]}; };
  msg = error_of([&] {
    xo::export_model(mlp, add, {{"a", randn({2, 3}, g), {"B", ""}}, {"b", randn({4, 3}, g), {"B", ""}}}, path);
  });
  CHECK_MESSAGE(contains(msg, "axis 'B' has size 4 in input 'b' but 2 in an input before it"), msg);
  msg = error_of([&] {
    xo::export_model(mlp, add, {{"a", randn({3, 3}, g), {"B", "T"}}, {"b", randn({3, 3}, g), {}}}, path);
  });
  CHECK_MESSAGE(contains(msg, "export_model: dynamic axes 'B' and 'T' both have size 3 in the examples"), msg);
  msg = error_of([&] { xo::export_model(mlp, {"", randn({3, 8}, g), {}}, path); });
  CHECK_MESSAGE(contains(msg, "an input has an empty name"), msg);
  CHECK_FALSE(exists(path));
}

TEST_CASE("export_model: a closed graph and a reshape it cannot write are refused") {
  Generator g(6);
  onnx_test::Mlp mlp(g);
  const std::string path = tmp_path("closed.onnx");
  std::remove(path.c_str());
  Tensor w = mlp.fc1->weight();
  auto closed = [&](const std::vector<Tensor>&) { return std::vector<Tensor>{tanh(w)}; };
  std::string msg = error_of([&] { xo::export_model(mlp, closed, {{"x", randn({3, 8}, g), {"B", ""}}}, path); });
  CHECK_MESSAGE(contains(msg, "output 'output' (16,8) does not depend on any input"), msg);
  auto split = [](const std::vector<Tensor>& x) {  // (B*T, C) -> (B, T, C): two axes from one that changes
    return std::vector<Tensor>{reshape(tanh(reshape(x[0], {-1, 4})), {2, 3, 4})};
  };
  msg = error_of([&] { xo::export_model(mlp, split, {{"x", randn({2, 3, 4}, g), {"B", "T", ""}}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: reshape (B*T, 4) -> (2,3,4) makes 2 axes from (B*T)"), msg);
  CHECK_FALSE(exists(path));
  auto fixed = [](const std::vector<Tensor>& x) {  // the same reshapes on fixed axes export
    return std::vector<Tensor>{reshape(tanh(reshape(x[0], {-1, 4})), {2, 3, 4})};
  };
  xo::export_model(mlp, fixed, {{"x", randn({2, 3, 4}, g), {}}}, path);
  CHECK(op_types(path).count("Reshape"));
}

TEST_CASE("export_model: ops the outputs do not need (a loss) are left out, unmapped or not") {
  Generator g(7);
  onnx_test::Mlp mlp(g);
  const std::string path = tmp_path("with_loss.onnx");
  auto with_loss = [&](const std::vector<Tensor>& x) {
    Tensor logits = mlp.forward(x[0]);                            // (B, 4)
    Tensor loss = cross_entropy(logits, std::vector<int64_t>{0, 1, 2});  // recorded, unmapped, not an output
    CHECK(loss.defined());
    return std::vector<Tensor>{logits};
  };
  xo::export_model(mlp, with_loss, {{"x", randn({3, 8}, g), {"B", ""}}}, path);
  const auto types = op_types(path);
  CHECK(types.count("Gemm"));
  CHECK_FALSE(types.count("SoftmaxCrossEntropyLoss"));
  auto loss_too = [&](const std::vector<Tensor>& x) {  // asked for, the loss is refused by name
    return std::vector<Tensor>{cross_entropy(mlp.forward(x[0]), std::vector<int64_t>{0, 1, 2})};
  };
  const std::string msg = error_of([&] { xo::export_model(mlp, loss_too, {{"x", randn({3, 8}, g), {"B", ""}}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: op 'cross_entropy' has no ONNX mapping yet"), msg);
}

TEST_CASE("onnx emitters: one per op, a second emitter for an op is refused by name") {
  std::map<std::string, xg::onnx::detail::Emitter> table;
  const xg::onnx::detail::Emitter none = [](const xg::onnx::detail::OpContext&) { return xg::onnx::detail::Value{}; };
  xg::onnx::detail::add_emitter(table, "conv2d", none);
  CHECK(XG_THROW_MESSAGE(xg::onnx::detail::add_emitter(table, "conv2d", none), std::logic_error) ==
        "onnx: two emitters for the op 'conv2d'");
  // The table every export reads was built without a clash, and holds every family's ops.
  const auto& all = xg::onnx::detail::emitters();
  for (const char* op : {"conv2d", "recurrent_layer", "leaky_relu", "attention"}) CHECK(all.count(op) == 1);
}
