// Images through the export trace: convolutions, pooling and batch norm
// listed as one op each with their windows, what export refuses (with its
// message, and no file left), and export_vision's manifest entry. The
// exported values are checked by ONNX Runtime (onnx_vision_runtime_matches_xgrad).
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>

#include "models/cnn.h"
#include "models/resnet.h"
#include "models/vit.h"
#include "onnx/export.h"
#include "onnx/image_model.h"
#include "tests/helpers.h"
#include "tests/onnx/vision_models.h"

using namespace xg;
using xgt::contains;
namespace xo = xg::onnx;  // ::onnx is ONNX's own

namespace {

std::string tmp_file(const std::string& name) { return std::string(XG_TEST_TMPDIR) + "/" + name; }
// A folder of the test's own: the tests run in parallel, and the exporters
// name their files (model.onnx) themselves.
std::string tmp_dir(const std::string& name) {
  const std::string d = tmp_file(name);
  ::mkdir(d.c_str(), 0755);
  return d;
}

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

::onnx::ModelProto read_model(const std::string& path) {
  ::onnx::ModelProto m;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  return m;
}

std::set<std::string> node_types(const ::onnx::ModelProto& m) {
  std::set<std::string> types;
  for (const auto& n : m.graph().node()) types.insert(n.op_type());
  return types;
}

// One layer as a model, so that export_model has a module to name.
struct Single : nn::Module {
  explicit Single(std::shared_ptr<nn::Module> m) { layer = register_module("layer", std::move(m)); }
  Tensor forward(const Tensor& x) override {
    const auto named = scope();
    return layer->forward(x);
  }
  std::string type_name() const override { return "Single"; }
  std::shared_ptr<nn::Module> layer;
};

// The ops a forward lists.
std::vector<TracedOp> trace_of(const std::function<Tensor()>& f) {
  std::vector<TracedOp> ops;
  TraceGuard on(ops);
  f();
  return ops;
}

}  // namespace

TEST_CASE("trace: conv2d is one op with its window, on the direct float32 path and on float64's im2col") {
  Generator g(1);
  const auto o = Conv2dFuncOptions().stride({2, 1}).padding({1, 0}).dilation({1, 2}).groups(2);
  for (Dtype d : {f32, f64}) {
    const Tensor x = randn({2, 4, 7, 9}, g, d), w = randn({6, 2, 3, 3}, g, d), b = randn({6}, g, d);
    Tensor y;
    const auto ops = trace_of([&] { return y = conv2d(x, w, b, o); });
    REQUIRE(!ops.empty());
    const TracedOp& t = ops.back();
    CHECK(t.op == "conv2d");
    CHECK(t.output.impl() == y.impl());
    REQUIRE(t.inputs.size() == 3);
    CHECK(t.inputs[0].impl() == x.impl());
    CHECK(t.inputs[1].impl() == w.impl());
    CHECK(t.inputs[2].impl() == b.impl());
    const attr::Window& a = t.attr<attr::Window>();
    CHECK(a.stride == std::vector<int64_t>{2, 1});
    CHECK(a.pad_begin == std::vector<int64_t>{1, 0});
    CHECK(a.pad_end == std::vector<int64_t>{1, 0});
    CHECK(a.dilation == std::vector<int64_t>{1, 2});
    CHECK(a.groups == 2);
  }
  const auto same = Conv2dFuncOptions().padding("same");  // an even kernel: the odd zero goes to the bottom and right
  const Tensor x = randn({1, 2, 5, 5}, g);
  const auto ops = trace_of([&] { return conv2d(x, randn({3, 2, 4, 2}, g), Tensor(), same); });
  CHECK(ops.back().attr<attr::Window>().pad_begin == std::vector<int64_t>{1, 0});
  CHECK(ops.back().attr<attr::Window>().pad_end == std::vector<int64_t>{2, 1});
}

TEST_CASE("trace: pooling lists its resolved window, batch norm its running statistics") {
  Generator g(2);
  const Tensor x = randn({2, 3, 7, 6}, g);
  const auto p = MaxPool2dOptions({3, 2}).padding(1).ceil_mode(true);  // stride: the kernel
  const attr::Window mp = trace_of([&] { return max_pool2d(x, p); }).back().attr<attr::Window>();
  CHECK(mp.kernel == std::vector<int64_t>{3, 2});
  CHECK(mp.stride == std::vector<int64_t>{3, 2});
  CHECK(mp.pad_begin == std::vector<int64_t>{1, 1});
  CHECK(mp.dilation == std::vector<int64_t>{1, 1});
  CHECK(mp.ceil_mode);
  const auto a = AvgPool2dOptions(2).stride({1, 2}).count_include_pad(false);
  const auto avg = trace_of([&] { return avg_pool2d(x, a); });
  CHECK(avg.back().op == "avg_pool2d");
  const attr::Window& ap = avg.back().attr<attr::Window>();
  CHECK(ap.kernel == std::vector<int64_t>{2, 2});
  CHECK(ap.stride == std::vector<int64_t>{1, 2});
  CHECK(ap.pad_begin == std::vector<int64_t>{0, 0});
  CHECK_FALSE(ap.ceil_mode);
  CHECK_FALSE(ap.count_include_pad);
  CHECK(trace_of([&] { return adaptive_avg_pool2d(x, {7, 2}); }).back().attr<attr::OutputSize>().size ==
        std::vector<int64_t>{7, 2});
  nn::BatchNorm2d bn(3, 1e-3);
  bn.eval();
  const auto ops = trace_of([&] { return bn.forward(x); });
  const TracedOp& t = ops.back();
  CHECK(t.op == "batch_norm");
  CHECK(t.scope == bn.describe());
  REQUIRE(t.inputs.size() == 5);
  std::map<std::string, Tensor> buffers;
  for (const auto& [name, b] : bn.named_buffers()) buffers[name] = b;
  CHECK(t.inputs[1].impl() == buffers.at("running_mean").impl());  // the buffer itself: named in the graph
  CHECK(t.inputs[2].impl() == buffers.at("running_var").impl());
  CHECK(t.attr<attr::Scalar>().value == 1e-3);
  bn.train();  // training normalises with the batch's statistics: composed ops, no batch_norm entry
  for (const TracedOp& op : trace_of([&] { return bn.forward(x); })) CHECK(op.op != "batch_norm");
}

TEST_CASE("export_model: batch norm reads its running statistics by name, without them, the batch's") {
  Generator g(3);
  Single with(std::make_shared<nn::BatchNorm2d>(4));
  with.train();  // exported in eval mode whatever the mode
  onnx_test::randomise_vision(with, 4);
  const std::string path = tmp_file("bn.onnx");
  xo::export_model(with, {"x", randn({2, 4, 3, 3}, g), {"N", "", "", ""}}, path);
  ::onnx::ModelProto m = read_model(path);
  CHECK(node_types(m) == std::set<std::string>{"BatchNormalization"});  // its output named as the graph's
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  CHECK(inits.count("layer.running_mean"));
  CHECK(inits.count("layer.running_var"));
  CHECK(inits.count("layer.weight"));
  CHECK(with.is_training());
  Single without(std::make_shared<nn::BatchNorm2d>(4, 1e-5, 0.1, true, /*track_running_stats=*/false));
  xo::export_model(without, {"x", randn({2, 4, 3, 3}, g), {"N", "", "", ""}}, path);
  const auto types = node_types(read_model(path));
  CHECK_FALSE(types.count("BatchNormalization"));
  CHECK(types.count("ReduceMean"));
}

TEST_CASE("export_model: average pooling with divisor_override is refused (ONNX's AveragePool has none)") {
  Generator g(5);
  Single pool(std::make_shared<nn::AvgPool2d>(AvgPool2dOptions(2).divisor_override(3)));
  const std::string path = tmp_file("divisor.onnx");
  std::remove(path.c_str());
  const std::string msg =
      message_of([&] { xo::export_model(pool, {"x", randn({2, 3, 6, 6}, g), {"N", "", "", ""}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: avg_pool2d (in AvgPool2d(kernel_size=2, stride=2, padding=0, "
                              "divisor_override=3) 'layer') with divisor_override 3: ONNX's AveragePool divides by "
                              "the window's size"),
                msg);
  std::ifstream none(path);
  CHECK_FALSE(none.good());
}

TEST_CASE("export_model: adaptive pooling to a size that does not divide the input's is refused") {
  Generator g(4);
  Single pool(std::make_shared<nn::AdaptiveAvgPool2d>(std::array<int64_t, 2>{3, 2}));
  const std::string path = tmp_file("adaptive.onnx");
  std::remove(path.c_str());
  const std::string msg =
      message_of([&] { xo::export_model(pool, {"x", randn({2, 3, 7, 6}, g), {"N", "", "", ""}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: adaptive_avg_pool2d (in AdaptiveAvgPool2d(output_size=(3, 2)) 'layer') from "
                              "(N, 3, 7, 6) to 3x2: ONNX pools equal windows only; the output size must be 1x1 or "
                              "divide the input's fixed height and width"),
                msg);
  CHECK_THROWS_AS(xo::export_model(pool, {"x", randn({2, 3, 7, 6}, g), {"N", "", "", ""}}, path), xo::ExportError);
  CHECK_FALSE(file_exists(path));
  xo::export_model(pool, {"x", randn({2, 3, 9, 6}, g), {"N", "", "", ""}}, path);  // 9x6 to 3x2 divides
  CHECK(node_types(read_model(path)).count("AveragePool"));
}

TEST_CASE("export_model: a transposed convolution on an image whose size may change is refused") {
  Generator g(5);
  Single up(std::make_shared<nn::ConvTranspose2d>(2, 3, 3, g));
  const std::string path = tmp_file("deconv.onnx");
  std::remove(path.c_str());
  const std::string msg =
      message_of([&] { xo::export_model(up, {"x", randn({2, 2, 5, 4}, g), {"N", "", "H", ""}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: conv_transpose2d (in ConvTranspose2d"), msg);
  CHECK_MESSAGE(contains(msg, "on (N, 2, H, 4): the image's height and width must be fixed"), msg);
  CHECK_FALSE(file_exists(path));
}

TEST_CASE("export_model: a transposed convolution's output_padding at its stride is refused (ONNX Runtime rejects it)") {
  Generator g(6);
  Single up(std::make_shared<nn::ConvTranspose2d>(nn::ConvTranspose2dOptions(2, 3, 3).dilation(2).output_padding(1), g));
  const std::string path = tmp_file("deconv_padding.onnx");
  std::remove(path.c_str());
  const std::string msg = message_of([&] { xo::export_model(up, {"x", randn({1, 2, 5, 4}, g), {}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: conv_transpose2d (in ConvTranspose2d"), msg);
  CHECK_MESSAGE(contains(msg, "with output_padding (1, 1) not below its stride (1, 1): ONNX Runtime's ConvTranspose "
                              "refuses it"),
                msg);
  CHECK_FALSE(file_exists(path));
}

TEST_CASE("export_image_model: one graph with the batch left to the runtime, and its manifest entry") {
  models::CNNConfig c;
  c.image = 8, c.channels1 = 2, c.channels2 = 3, c.hidden = 5, c.classes = 4;
  models::CNN cnn(c);
  const std::string dir = tmp_dir("export_image_model");
  const xo::GraphSignature info = xo::export_image_model(cnn, 1, 8, 8, dir);
  CHECK(info.file == "model.onnx");
  REQUIRE(info.inputs.size() == 1);
  REQUIRE(info.outputs.size() == 1);
  CHECK(info.inputs[0].name == "images");
  CHECK(info.inputs[0].dtype == "float32");
  CHECK(info.inputs[0].axes == std::vector<std::string>{"N", "1", "8", "8"});
  CHECK(info.outputs[0].name == "logits");
  CHECK(info.outputs[0].axes == std::vector<std::string>{"N", "4"});
  ::onnx::ModelProto m = read_model(dir + "/model.onnx");
  CHECK(m.graph().input(0).name() == "images");
  CHECK(m.graph().output(0).type().tensor_type().shape().dim(0).dim_param() == "N");
  const std::string msg = message_of([&] { xo::export_image_model(cnn, 1, 0, 8, dir); });
  CHECK_MESSAGE(contains(msg, "export_image_model: images (N, 1, 0, 8): expected channels, height and width each at least 1"),
                msg);
  const std::string wrong = message_of([&] { xo::export_image_model(cnn, 3, 8, 8, dir); });  // the CNN reads 1 channel
  CHECK_MESSAGE(contains(wrong, "export_model: the forward failed on the example inputs (images (2,3,8,8))"), wrong);
}

TEST_CASE("export_image_checkpoint: the model its metadata names, with its weights, other models refused") {
  models::CNNConfig c;
  c.image = 8, c.channels1 = 2, c.channels2 = 3, c.hidden = 5, c.classes = 4;
  models::CNN trained(c);
  onnx_test::randomise_vision(trained, 31);  // not what a fresh CNN of this configuration holds
  Metadata meta = c.to_metadata();
  meta["model"] = "cnn";
  const std::string dir = tmp_dir("export_image_checkpoint");
  const xo::GraphSignature g = xo::export_image_checkpoint(meta, trained.state_dict(), "ck.safetensors", dir);
  CHECK(g.inputs[0].axes == std::vector<std::string>{"N", "1", "8", "8"});
  ::onnx::ModelProto m = read_model(dir + "/model.onnx");
  const Tensor want = trained.state_dict().at("conv1.weight");
  bool found = false;
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != "conv1.weight") continue;
    found = true;
    REQUIRE(t.raw_data().size() == static_cast<size_t>(want.numel()) * sizeof(float));
    const auto* got = reinterpret_cast<const float*>(t.raw_data().data());
    for (int64_t i = 0; i < want.numel(); ++i) CHECK(got[i] == want.data<float>()[i]);
  }
  CHECK(found);
  models::ResNetConfig r;
  r.depth = 8, r.width = 2, r.in_channels = 3, r.classes = 5;
  models::ResNet resnet(r);
  Metadata rmeta = r.to_metadata();
  rmeta["model"] = "resnet";
  const xo::GraphSignature rg = xo::export_image_checkpoint(rmeta, resnet.state_dict(), "r.safetensors", dir, 12);
  CHECK(rg.inputs[0].axes == std::vector<std::string>{"N", "3", "12", "12"});
  CHECK(rg.outputs[0].axes == std::vector<std::string>{"N", "5"});
  models::ViTConfig v;
  v.image = 8, v.patch = 4, v.d_model = 8, v.heads = 2, v.layers = 1, v.d_ff = 8;
  models::ViT vit(v);
  Metadata vmeta = v.to_metadata();
  vmeta["model"] = "vit";
  const std::string vdir = dir + "/vit_export";
  std::remove((vdir + "/model.onnx").c_str());
  REQUIRE(std::system(("mkdir -p '" + vdir + "'").c_str()) == 0);
  const xo::GraphSignature vg = xo::export_image_checkpoint(vmeta, vit.state_dict(), "v.safetensors", vdir);
  CHECK(vg.inputs[0].axes == std::vector<std::string>{"N", "1", "8", "8"});  // the ViT's own image size
  CHECK(file_exists(vdir + "/model.onnx"));
  meta["model"] = "mlp";
  std::string msg = message_of([&] { xo::export_image_checkpoint(meta, trained.state_dict(), "ck.safetensors", dir); });
  CHECK(msg == "checkpoint ck.safetensors: metadata 'model' 'mlp': expected one of resnet, vit, cnn");
  meta.erase("model");
  msg = message_of([&] { xo::export_image_checkpoint(meta, trained.state_dict(), "ck.safetensors", dir); });
  CHECK(msg == "checkpoint ck.safetensors: metadata 'model' is missing: expected one of resnet, vit, cnn");
  // a CNN's weights under a ResNet's metadata
  msg = message_of([&] { xo::export_image_checkpoint(rmeta, trained.state_dict(), "ck.safetensors", dir); });
  CHECK(contains(msg, "checkpoint ck.safetensors: load_state_dict into"));
}
