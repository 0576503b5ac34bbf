// Every error path: the exception type, and a message naming the op and the shapes.
#include "tests/helpers.h"

using namespace xg;
using xgt::contains;

namespace {
void expect(const std::string& msg, std::initializer_list<const char*> parts) {
  CAPTURE(msg);
  for (const char* p : parts) CHECK(contains(msg, p));
}
}  // namespace

TEST_CASE("errors: ShapeError derives from std::invalid_argument") {
  CHECK_THROWS_AS(add(ones({2, 3}), ones({4})), std::invalid_argument);
}

TEST_CASE("errors: elementwise and broadcasting") {
  expect(XG_THROW_MESSAGE(add(ones({2, 3}), ones({4})), ShapeError), {"add", "(2,3)", "(4,)"});
  expect(XG_THROW_MESSAGE(mul(ones({2, 3}), ones({3, 3})), ShapeError), {"mul", "(2,3)", "(3,3)"});
  expect(XG_THROW_MESSAGE(add(ones({2}), ones({2}, f64)), ShapeError), {"add", "float32", "float64"});
  expect(XG_THROW_MESSAGE(where(ones({2}), ones({3}), ones({3})), ShapeError), {"where", "(2,)", "(3,)"});
  expect(XG_THROW_MESSAGE(masked_fill(ones({3}), ones({2, 3}), 0.0), ShapeError), {"masked_fill", "(2,3)", "(3,)"});
  expect(XG_THROW_MESSAGE(clamp(ones({3}), 1.0, 0.0), ShapeError), {"clamp"});
  expect(XG_THROW_MESSAGE(add(Tensor(), ones({1})), ShapeError), {"add", "undefined"});
}

TEST_CASE("errors: reductions") {
  expect(XG_THROW_MESSAGE(sum(ones({2, 3}), {2}), ShapeError), {"sum", "axis 2", "2 dimensions"});
  expect(XG_THROW_MESSAGE(sum(ones({2, 3}), {1, -1}), ShapeError), {"sum", "twice", "(2,3)"});
  expect(XG_THROW_MESSAGE(var(ones({2, 1}), {1}, 1), ShapeError), {"var", "(2,1)"});
  expect(XG_THROW_MESSAGE(argmax(ones({2, 3}), 3), ShapeError), {"argmax", "axis 3"});
}

TEST_CASE("errors: shape ops") {
  expect(XG_THROW_MESSAGE(reshape(ones({2, 3}), {4, 2}), ShapeError), {"reshape", "(2,3)", "(4,2)"});
  expect(XG_THROW_MESSAGE(reshape(ones({2, 3}), {-1, 4}), ShapeError), {"reshape", "(2,3)", "(-1,4)"});
  expect(XG_THROW_MESSAGE(permute(ones({2, 3}), {0, 0}), ShapeError), {"permute", "(0,0)", "(2,3)"});
  expect(XG_THROW_MESSAGE(concat({ones({2, 3}), ones({2, 4})}, 0), ShapeError), {"concat", "(2,4)", "(2,3)"});
  expect(XG_THROW_MESSAGE(stack({ones({2}), ones({3})}, 0), ShapeError), {"stack", "(3,)", "(2,)"});
  expect(XG_THROW_MESSAGE(split(ones({5}), {2, 2}, 0), ShapeError), {"split", "4", "(5,)"});
  expect(XG_THROW_MESSAGE(chunk(ones({5}), 2, 0), ShapeError), {"chunk", "(5,)"});
  expect(XG_THROW_MESSAGE(squeeze(ones({2, 3}), 0), ShapeError), {"squeeze", "(2,3)", "expected 1"});
  expect(XG_THROW_MESSAGE(broadcast_to(ones({2, 3}), {3, 3}), ShapeError), {"broadcast_to", "(2,3)", "(3,3)"});
  expect(XG_THROW_MESSAGE(slice(ones({2, 3}), 1, 0, 2, 0), ShapeError), {"slice", "step"});
  expect(XG_THROW_MESSAGE(transpose(ones({2, 3}), 0, 5), ShapeError), {"transpose", "axis 5"});
}

TEST_CASE("errors: matmul and linear") {
  expect(XG_THROW_MESSAGE(matmul(ones({2, 3}), ones({4, 5})), ShapeError),
         {"matmul: cannot multiply (2,3) by (4,5): inner dimensions 3 != 4"});
  expect(XG_THROW_MESSAGE(matmul(ones({2, 2, 3}), ones({3, 3, 4})), ShapeError), {"matmul", "(2,2,3)", "(3,3,4)", "batch"});
  expect(XG_THROW_MESSAGE(matmul(ones({3}), ones({3, 4})), ShapeError), {"matmul", "(3,)"});
  expect(XG_THROW_MESSAGE(linear(ones({2, 3}), ones({4, 5})), ShapeError), {"linear", "(2,3)", "(4,5)"});
  expect(XG_THROW_MESSAGE(linear(ones({2, 5}), ones({4, 5}), ones({3})), ShapeError), {"linear", "bias", "(3,)"});
}

TEST_CASE("errors: indexing and fused ops") {
  expect(XG_THROW_MESSAGE(gather_rows(ones({5, 3}), {1, 7}, {2}), ShapeError), {"gather_rows", "id 7", "5 rows"});
  expect(XG_THROW_MESSAGE(gather_rows(ones({5, 3}), {-1}, {1}), ShapeError), {"gather_rows", "id -1"});
  expect(XG_THROW_MESSAGE(gather_rows(ones({5, 3}), {1, 2}, {3}), ShapeError), {"gather_rows", "(3,)"});
  expect(XG_THROW_MESSAGE(cross_entropy(ones({2, 4}), {1}), ShapeError), {"cross_entropy", "(2,4)", "1 targets"});
  expect(XG_THROW_MESSAGE(cross_entropy(ones({2, 4}), {1, 4}), ShapeError), {"cross_entropy", "target 4", "4 classes"});
  expect(XG_THROW_MESSAGE(layer_norm(ones({2, 4}), ones({3}), Tensor()), ShapeError), {"layer_norm", "(3,)", "(2,4)"});
  expect(XG_THROW_MESSAGE(softmax(ones({2, 4}), 2), ShapeError), {"softmax", "axis 2"});
  Generator g;
  expect(XG_THROW_MESSAGE(dropout(ones({2}), 1.5, true, g), ShapeError), {"dropout", "1.5"});
}

TEST_CASE("errors: tensor access and factories") {
  Tensor t = zeros({2, 3});
  expect(XG_THROW_MESSAGE(t.at({2, 0}), ShapeError), {"at", "index 2", "(2,3)"});
  expect(XG_THROW_MESSAGE(t.at({1}), ShapeError), {"at", "1 indices", "(2,3)"});
  expect(XG_THROW_MESSAGE(t.item(), ShapeError), {"item", "(2,3)"});
  expect(XG_THROW_MESSAGE(t.data<double>(), ShapeError), {"data<double>", "float32"});
  expect(XG_THROW_MESSAGE(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), ShapeError), {"from_vector", "(2,2)"});
  expect(XG_THROW_MESSAGE(t.copy_(zeros({3, 2})), ShapeError), {"copy_", "(3,2)", "(2,3)"});
  expect(XG_THROW_MESSAGE(t.set_grad(zeros({3})), ShapeError), {"set_grad", "(3,)", "(2,3)"});
}

TEST_CASE("errors: gradcheck refuses float32 inputs") {
  Tensor x = ones({2}).requires_grad_();
  expect(XG_THROW_MESSAGE(gradcheck([](const std::vector<Tensor>& v) { return v[0] * 2.0; }, {x}),
                          std::invalid_argument),
         {"gradcheck", "float32", "float64"});
}
