// The shipped models' graphs (onnx/transformer.h, onnx/gpt.h): what each graph declares, the
// cache forms behind them, and the refusals. Their values are checked by
// ONNX Runtime against xgrad's decoders (tests/onnx/run_decode.js).
#include <doctest/doctest.h>
#include <sys/stat.h>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/trace.h"
#include "models/gpt.h"
#include "models/transformer.h"
#include "onnx/export.h"
#include "onnx/gpt.h"
#include "onnx/transformer.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::contains;
namespace xo = xg::onnx;

namespace {

std::string tmp_dir(const std::string& name) {
  const std::string d = std::string(XG_TEST_TMPDIR) + "/" + name;
  ::mkdir(d.c_str(), 0755);
  return d;
}

models::TransformerConfig tiny_transformer() {
  models::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 12;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 2;
  c.d_ff = 32;
  c.max_len = 40;
  c.dropout = 0.1;
  c.seed = 5;
  return c;
}

std::vector<std::string> axes_of(const xo::GraphSignature& g, const std::string& name) {
  for (const auto* list : {&g.inputs, &g.outputs})
    for (const xo::ValueSignature& v : *list)
      if (v.name == name) return v.axes;
  FAIL_CHECK("no value " << name << " in " << g.file);
  return {};
}

}  // namespace

TEST_CASE("export_transformer: an encoder and a decoder step with B, S and L left to the runtime") {
  models::Transformer m(tiny_transformer());
  const auto graphs = xo::export_transformer(m, tmp_dir("onnx_transformer"));
  REQUIRE(graphs.size() == 2);
  CHECK(graphs[0].file == "encoder.onnx");
  CHECK(graphs[1].file == "decoder_step.onnx");
  CHECK(graphs[0].inputs.size() == 1);
  CHECK(graphs[0].outputs.size() == 2 + 2 * 2);  // memory, src_pad, and each layer's memory_k, memory_v
  CHECK(axes_of(graphs[0], "src") == std::vector<std::string>{"B", "S"});
  CHECK(axes_of(graphs[0], "memory_v_1") == std::vector<std::string>{"B", "S", "16"});
  CHECK(axes_of(graphs[1], "tokens") == std::vector<std::string>{"B", "1"});
  CHECK(axes_of(graphs[1], "position") == std::vector<std::string>{"1"});
  CHECK(axes_of(graphs[1], "past_k_0") == std::vector<std::string>{"B", "L", "16"});
  CHECK(axes_of(graphs[1], "present_v_1") == std::vector<std::string>{"B", "L+1", "16"});
  CHECK(axes_of(graphs[1], "logits") == std::vector<std::string>{"B", "12"});
  CHECK(graphs[1].inputs[0].dtype == "int64");
  CHECK(graphs[1].outputs[0].dtype == "float32");
  CHECK(m.is_training());  // export_model gives the mode back
}

TEST_CASE("export_gpt: a prefill of a prompt and a step with its cache, T and L left to the runtime") {
  models::GPTConfig c;
  c.vocab = 20, c.layers = 2, c.d_model = 16, c.heads = 4, c.d_ff = 32, c.max_len = 30;
  models::GPT m(c);
  const auto graphs = xo::export_gpt(m, tmp_dir("onnx_gpt"));
  REQUIRE(graphs.size() == 2);
  CHECK(graphs[0].file == "prefill.onnx");
  CHECK(axes_of(graphs[0], "tokens") == std::vector<std::string>{"B", "T"});
  CHECK(axes_of(graphs[0], "present_v_1") == std::vector<std::string>{"B", "T", "16"});
  CHECK(axes_of(graphs[0], "logits") == std::vector<std::string>{"B", "20"});
  CHECK(graphs[1].file == "step.onnx");
  CHECK(graphs[1].inputs.size() == 2 + 2 * 2);
  CHECK(graphs[1].outputs.size() == 1 + 2 * 2);
  CHECK(axes_of(graphs[1], "past_v_1") == std::vector<std::string>{"B", "L", "16"});
  CHECK(axes_of(graphs[1], "present_k_0") == std::vector<std::string>{"B", "L+1", "16"});
  CHECK(axes_of(graphs[1], "logits") == std::vector<std::string>{"B", "20"});
}

// The exported step is traced with the concatenating cache; xgrad's own
// decode writes a preallocated buffer in place. Both must give one result.
TEST_CASE("Transformer::step: the concatenating cache of a trace equals decode_step's preallocated one") {
  models::Transformer m(tiny_transformer());
  m.eval();
  NoGradGuard no_grad;
  const models::Batch src{{3, 4, 5, 6, 7, 8, 9, 0, 0, 0}, 2, 5};
  models::DecodeState fast = m.start_decode(src), traced = m.start_decode(src);
  std::vector<int64_t> tokens{1, 1};
  for (int64_t t = 0; t < 6; ++t) {
    Tensor a = m.decode_step(fast, tokens);
    std::vector<TracedOp> ops;
    Tensor b;
    {
      TraceGuard on(ops);
      b = m.step(traced, from_ints(tokens, {2, 1}), from_ints({t}, {1}));
    }
    CHECK(traced.self_kv[0].k.size(1) == t + 1);  // concatenated: exactly the positions in use
    CHECK(fast.self_kv[0].k.size(1) == 40);       // preallocated: max_len positions
    bool concatenated = false;
    for (const TracedOp& op : ops) concatenated = concatenated || op.op == "concat";
    CHECK(concatenated == (t > 0));  // the first step's cache is the new position alone
    xgt::check_close({a}, {b}, 1e-6);
    tokens = argmax(a, -1);
  }
}

TEST_CASE("Transformer::padding_mask: from ids by ops, as the Batch form computes it") {
  models::Transformer m(tiny_transformer());
  const models::Batch b{{3, 0, 5, 0, 0, 7}, 2, 3};
  CHECK(m.padding_mask(from_ints(b.ids, {2, 3})).to_vector() == m.padding_mask(b).to_vector());
  CHECK(XG_THROW_MESSAGE(m.padding_mask(from_ints({3, 12}, {1, 2})), ShapeError) ==
        "Transformer::padding_mask: id 12 is outside 0..11");
}

TEST_CASE("export_model: attention over a preallocated key/value buffer is refused by name") {
  Generator g(1);
  nn::MultiHeadAttention attn(8, 2, 0.0, g, nullptr);
  const xo::Forward f = [&](const std::vector<Tensor>& x) {
    nn::MultiHeadAttention::KVCache kv;
    kv.k = concat({x[0], zeros({3, 6, 8})}, 1);  // (B,10,C) of which the first 4 positions are keys
    kv.v = kv.k;
    kv.len = 4;
    return std::vector<Tensor>{attn.attend(x[0], kv)};
  };
  const std::string path = std::string(XG_TEST_TMPDIR) + "/prealloc.onnx";
  const std::string e = XG_THROW_MESSAGE(xo::export_model(attn, f, {{"x", randn({3, 4, 8}, g), {"B", "", ""}}}, path),
                                         xo::ExportError);
  CHECK(contains(e, "export_model: attention (in MultiHeadAttention(d_model=8, heads=2)) reads 4 positions of a "
                    "preallocated key/value buffer"));
  struct stat st;
  CHECK(::stat(path.c_str(), &st) != 0);
}

TEST_CASE("slice_like: the leading positions of one tensor as many as another has, with its gradient") {
  Generator g(2);
  Tensor table = randn({7, 3}, g), x = randn({2, 4, 3}, g);
  CHECK(slice_like(table, 0, x, 1).to_vector() == slice(table, 0, 0, 4).to_vector());
  CHECK(XG_THROW_MESSAGE(slice_like(table, 0, randn({1, 9, 3}, g), 1), ShapeError) ==
        "slice_like: (1,9,3) has 9 on axis 1, more than the 7 of (7,3) on axis 0");
  Tensor like = zeros({5, 2}, f64);
  XG_CHECK_GRAD([&](const std::vector<Tensor>& in) { return slice_like(in[0], 1, like, 0); }, xgt::leaf({2, 8}, 3));
  XG_CHECK_GRADGRAD([&](const std::vector<Tensor>& in) { return slice_like(in[0], 1, like, 0) * sum(in[0]); },
                    xgt::leaf({2, 8}, 4));
}

TEST_CASE("broadcast_like: a size-1 axis repeated as many times as another tensor has, with its gradient") {
  Generator g(6);
  Tensor token = randn({1, 1, 3}, g), x = randn({4, 5, 3}, g);
  CHECK(broadcast_like(token, 0, x, 0).to_vector() == broadcast_to(token, {4, 1, 3}).to_vector());
  CHECK(XG_THROW_MESSAGE(broadcast_like(x, 1, token, 0), ShapeError) ==
        "broadcast_like: axis 1 of (4,5,3) has size 5, expected 1");
  Tensor like = zeros({2, 6}, f64);
  XG_CHECK_GRAD([&](const std::vector<Tensor>& in) { return broadcast_like(in[0], 1, like, 1); }, xgt::leaf({3, 1}, 7));
  XG_CHECK_GRADGRAD([&](const std::vector<Tensor>& in) { return broadcast_like(in[0], 1, like, 1) * sum(in[0]); },
                    xgt::leaf({3, 1}, 8));
}

TEST_CASE("PositionalEncoding::forward_at: positions as a tensor, as forward(x, start) reads them") {
  nn::PositionalEncoding pe(8, 10, 0.0, nullptr);
  Generator g(3);
  Tensor x = randn({2, 3, 8}, g);
  CHECK(pe.forward_at(x, from_ints({4, 5, 6}, {3})).to_vector() == pe.forward(x, 4).to_vector());
  CHECK(XG_THROW_MESSAGE(pe.forward_at(x, from_ints({4, 5, 10}, {3})), ShapeError) ==
        "PositionalEncoding(d_model=8, max_len=10): position 10 is outside 0..9");
  CHECK(XG_THROW_MESSAGE(pe.forward_at(x, from_ints({4, 5}, {2})), ShapeError) ==
        "PositionalEncoding(d_model=8, max_len=10): positions must be int64 (T,) = (3,) for input (2,3,8), got int64 (2,)");
}
