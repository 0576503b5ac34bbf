// int64 tensors: ids and targets. They are made, moved, saved and converted,
// never differentiated or computed on.
#include <cstdio>
#include <limits>

#include "autograd/serialize.h"
#include "tests/helpers.h"

using namespace xg;

TEST_CASE("int64: factories, access, printing and conversions") {
  Tensor t = from_ints({3, -1, 7, 1LL << 53}, {2, 2});
  CHECK(t.dtype() == i64);
  CHECK(std::string(dtype_name(i64)) == "int64");
  CHECK(dtype_size(i64) == 8);
  CHECK(t.data<int64_t>()[3] == (1LL << 53));
  CHECK(t.at({0, 1}) == -1.0);
  t.set({0, 1}, 5);
  CHECK(t.data<int64_t>()[1] == 5);
  CHECK(arange(4, i64).data<int64_t>()[3] == 3);
  CHECK(zeros({3}, i64).to_vector() == std::vector<double>{0, 0, 0});
  CHECK(to_string(from_ints({1, 2}, {2})) == "tensor(shape=(2,), dtype=int64)\n[1, 2]");
  // float -> int64 truncates toward zero, as PyTorch; back is exact
  CHECK(tensor({2.9, -2.9, 0.0}, {3}, f64).to(i64).to_vector() == std::vector<double>{2, -2, 0});
  CHECK(from_ints({4, 5}, {2}).to(f32).to_vector() == std::vector<double>{4, 5});
  CHECK(XG_THROW_MESSAGE(t.data<float>(), ShapeError) == "data<float>: tensor is int64");
  CHECK(XG_THROW_MESSAGE(tensor({1, 2}, {2}).data<int64_t>(), ShapeError) == "data<int64_t>: tensor is float32");
}

TEST_CASE("int64: values an int64 cannot hold are errors, not undefined behaviour") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(XG_THROW_MESSAGE(tensor({1, inf}, {2}, f64).to(i64), ShapeError) ==
        "to: element 1 of a float64 tensor (2,) is inf, which int64 cannot hold");
  CHECK(XG_THROW_MESSAGE(tensor({std::nan("")}, {1}, f64).to(i64), ShapeError) ==
        "to: element 0 of a float64 tensor (1,) is nan, which int64 cannot hold");
  CHECK(XG_THROW_MESSAGE(tensor({1e30}, {1}, f32).to(i64), ShapeError) ==
        "to: element 0 of a float32 tensor (1,) is 1.0000000150474662e+30, which int64 cannot hold");
  CHECK(XG_THROW_MESSAGE(tensor({1.5}, {1}, i64), ShapeError) == "tensor: 1.5 is not an integer an int64 tensor can hold");
  CHECK(XG_THROW_MESSAGE(from_vector({inf}, {1}, i64), ShapeError) ==
        "from_vector: inf is not an integer an int64 tensor can hold");
  Tensor t = zeros({2}, i64);
  CHECK(XG_THROW_MESSAGE(t.set({0}, 0.25), ShapeError) == "set: 0.25 is not an integer an int64 tensor can hold");
  CHECK(XG_THROW_MESSAGE(t.fill_(-inf), ShapeError) == "fill: -inf is not an integer an int64 tensor can hold");
  CHECK(XG_THROW_MESSAGE(from_ints({1, 2, 3}, {2}), ShapeError) ==
        "from_ints: 3 values do not fill shape (2,) (2 elements)");
}

TEST_CASE("int64: no gradient, and ops that compute on floats name themselves when given one") {
  Tensor ids = from_ints({1, 2, 3, 4}, {2, 2});
  CHECK(XG_THROW_MESSAGE(ids.requires_grad_(), std::logic_error) ==
        "requires_grad_: an int64 tensor (2,2) cannot require grad (only float32 and float64 tensors carry gradients)");
  CHECK(XG_THROW_MESSAGE(exp(ids), ShapeError) ==
        "exp: got an int64 tensor (2,2); exp computes on float32 or float64 (int64 tensors hold ids and targets: "
        "convert with .to(xg::f32))");
  CHECK(XG_THROW_MESSAGE(matmul(ids, ids), ShapeError).rfind("matmul: got an int64 tensor (2,2)", 0) == 0);
  CHECK(XG_THROW_MESSAGE(sum(ids), ShapeError).rfind("sum: got an int64 tensor", 0) == 0);
  CHECK(XG_THROW_MESSAGE(softmax(ids), ShapeError).rfind("softmax: got an int64 tensor", 0) == 0);
  // a float leaf converted to int64 leaves the tape: no gradient flows through ids
  Tensor x = tensor({1.2, 2.7}, {2}, f64).requires_grad_();
  Tensor as_ids = x.to(i64);
  CHECK_FALSE(as_ids.requires_grad());
  CHECK(as_ids.to_vector() == std::vector<double>{1, 2});
}

TEST_CASE("int64: shape ops move ids (reshape, slice, concat, permute, stack, split)") {
  Tensor ids = from_ints({0, 1, 2, 3, 4, 5}, {2, 3});
  CHECK(ids.reshape({3, 2}).dtype() == i64);
  CHECK(slice(ids, 1, 1, 3).to_vector() == std::vector<double>{1, 2, 4, 5});
  CHECK(ids.transpose(0, 1).to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(concat({ids, ids}, 0).shape() == Shape{4, 3});
  CHECK(stack({ids, ids}, 0).shape() == Shape{2, 2, 3});
  CHECK(split(ids, {1, 2}, 1)[1].to_vector() == std::vector<double>{1, 2, 4, 5});
  CHECK(XG_THROW_MESSAGE(concat({ids, ids.to(f32)}, 0), ShapeError).find("dtype") != std::string::npos);
}

TEST_CASE("int64: saved and loaded by save_tensors as I64") {
  const std::string path = std::string(XG_TEST_TMPDIR) + "/int64.safetensors";
  Tensor ids = from_ints({-5, 0, 1LL << 40}, {3});
  save_tensors(path, {{"ids", ids}, {"w", tensor({1, 2}, {2})}});
  auto back = load_tensors(path);
  CHECK(back.at("ids").dtype() == i64);
  CHECK(bit_equal(back.at("ids"), ids));
  std::remove(path.c_str());
}

TEST_CASE("int64: gather_rows, index_select, cross_entropy and their float-misuse errors") {
  Generator g(3);
  Tensor table = rand({5, 3}, g, f64);
  Tensor ids = from_ints({4, 0, 4, 2}, {2, 2});
  CHECK(bit_equal(gather_rows(table, ids), gather_rows(table, {4, 0, 4, 2}, {2, 2})));
  CHECK(XG_THROW_MESSAGE(gather_rows(table, tensor({4, 0}, {2})), ShapeError) ==
        "gather_rows: ids must be an int64 tensor, got float32 (2,) (convert with .to(xg::i64))");

  Tensor logits = rand({2, 5, 3}, g, f64);  // (N,C,d): classes at dimension 1
  Tensor targets = from_ints({1, 4, -100, 0, 2, 3}, {2, 3});
  CHECK(bit_equal(cross_entropy(logits, targets), cross_entropy(logits, {1, 4, -100, 0, 2, 3})));
  CHECK(XG_THROW_MESSAGE(cross_entropy(logits, tensor({1, 4, 0, 0, 2, 3}, {2, 3})), ShapeError) ==
        "cross_entropy: target float32 (2,3) must hold int64 class indices of shape (2,3) or class probabilities of "
        "the input's shape (2,5,3)");

  Tensor a = rand({2, 4, 3}, g, f64);
  Tensor picked = index_select(a, 1, from_ints({3, 0, 3}, {3}));
  CHECK(picked.shape() == Shape{2, 3, 3});
  CHECK(picked.at({1, 0, 2}) == a.at({1, 3, 2}));
  CHECK(picked.at({1, 1, 2}) == a.at({1, 0, 2}));
  CHECK(index_select(a, -1, from_ints({}, {0})).shape() == Shape{2, 4, 0});
  CHECK(XG_THROW_MESSAGE(index_select(a, 1, from_ints({4}, {1})), ShapeError) ==
        "index_select: index 4 at position 0 is out of range for axis 1 of size 4 (input (2,4,3))");
  CHECK(XG_THROW_MESSAGE(index_select(a, 1, from_ints({0, 1}, {1, 2})), ShapeError) ==
        "index_select: index must be 1-D, got (1,2)");
  CHECK(XG_THROW_MESSAGE(index_select(a, 3, from_ints({0}, {1})), ShapeError) ==
        "index_select: axis 3 is out of range for a tensor of 3 dimensions");
  CHECK(XG_THROW_MESSAGE(index_select(a, 0, tensor({0}, {1})), ShapeError) ==
        "index_select: index must be an int64 tensor, got float32 (1,) (convert with .to(xg::i64))");
}

TEST_CASE("int64: gradcheck in float64 through gather_rows, index_select and cross_entropy with int64 ids") {
  Tensor ids = from_ints({4, 0, 4, 2, 1, 1}, {3, 2});
  Tensor index = from_ints({2, 0, 2, 1}, {4});
  Tensor targets = from_ints({3, -100, 0, 2}, {2, 2});
  XG_CHECK_GRAD([&](const std::vector<Tensor>& in) { return gather_rows(in[0], ids); }, xgt::leaf({5, 3}, 1));
  for (int64_t axis : {0, 1, 2})
    XG_CHECK_GRAD([&](const std::vector<Tensor>& in) { return index_select(in[0], axis, index); },
                  xgt::leaf({3, 3, 3}, 2));
  XG_CHECK_GRAD([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets, CrossEntropyLossOptions().label_smoothing(0.1)); },
                xgt::leaf({2, 4, 2}, 3));
}
