// Tensor basics, the gradient checker itself, and safetensors files.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "autograd/format.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::contains;

TEST_CASE("tensor: factories, shape, dtype, access") {
  Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == f32);
  CHECK(z.numel() == 6);
  CHECK(z.size(-1) == 3);
  CHECK(full({2}, 1.5, f64).to_vector() == std::vector<double>{1.5, 1.5});
  CHECK(arange(4).to_vector() == std::vector<double>{0, 1, 2, 3});
  CHECK(scalar(2.0).item() == 2.0);
  CHECK(scalar(2.0).dim() == 0);
  Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.at({1, 2}) == 6.0);
  t.set({0, 0}, 9.0);
  CHECK(t.data<float>()[0] == 9.0f);
  CHECK(t.to(f64).dtype() == f64);
}

TEST_CASE("tensor: seeded random factories are reproducible") {
  Generator a(42), b(42), c(43);
  CHECK(bit_equal(randn({100}, a), randn({100}, b)));
  CHECK_FALSE(bit_equal(rand({100}, a), rand({100}, c)));
  Tensor u = rand({10000}, a, f64, -1.0, 3.0);
  auto v = u.to_vector();
  double lo = 1e9, hi = -1e9, m = 0;
  for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x), m += x / v.size();
  CHECK(lo >= -1.0);
  CHECK(hi < 3.0);
  CHECK(m == doctest::Approx(1.0).epsilon(0.05));
  Tensor n = randn({20000}, a, f64, 2.0, 0.5);
  CHECK(mean(n).item() == doctest::Approx(2.0).epsilon(0.01));
  CHECK(std::sqrt(var(n).item()) == doctest::Approx(0.5).epsilon(0.02));
  // Generator state round trip
  std::string st = a.state();
  double x1 = a.normal();
  a.set_state(st);
  CHECK(a.normal() == x1);
  CHECK_THROWS_AS(a.set_state("not a state"), std::invalid_argument);
}

TEST_CASE("tensor: printing shows shape and dtype, through iostream and fmt") {
  Tensor t = tensor({1, 2, 3, 4}, {2, 2});
  std::ostringstream os;
  os << t;
  CHECK(contains(os.str(), "shape=(2,2)"));
  CHECK(contains(os.str(), "float32"));
  CHECK(contains(os.str(), "[[1, 2]"));
  CHECK(fmt::format("{}", t) == os.str());
  CHECK(contains(to_string(arange(100)), "..."));
}

TEST_CASE("tensor: memory_stats counts storage once, gradients too, and keeps the peak") {
  const int64_t base = memory_stats().current_bytes;
  reset_peak_memory();
  CHECK(memory_stats().peak_bytes == base);
  {
    Tensor a = zeros({1000});          // 4000 bytes
    Tensor view = a.reshape({10, 100});  // shares a's storage
    Tensor d = ones({10}, f64);        // 80 bytes
    CHECK(view.numel() == 1000);
    CHECK(memory_stats().current_bytes == base + 4080);
  }
  CHECK(memory_stats().current_bytes == base);
  CHECK(memory_stats().peak_bytes == base + 4080);

  Tensor w = ones({256}).requires_grad_();  // 1024 bytes
  sum(w * w).backward();
  // What stays is w and its gradient: backward freed every saved value.
  CHECK(memory_stats().current_bytes == base + 2048);
  w.zero_grad();
  CHECK(memory_stats().current_bytes == base + 1024);
}

TEST_CASE("tensor: convert_ changes dtype in place for every handle") {
  Tensor a = tensor({1, 2}, {2});
  Tensor alias = a;
  a.convert_(f64);
  CHECK(alias.dtype() == f64);
  CHECK(alias.to_vector() == std::vector<double>{1, 2});
}

TEST_CASE("gradcheck: catches a wrong gradient and reports the worst element") {
  CustomOp wrong{"wrong_square", [](const std::vector<Tensor>& in) { return in[0] * in[0]; },
                 [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
                   return std::vector<Tensor>{g * in[0] * 2.01};  // off by half a percent
                 }};
  Tensor x = xgt::leaf({3, 4}, 1, 1.0, 2.0);
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return apply(wrong, {v[0]}); }, {x});
  CHECK_FALSE(r.ok);
  CHECK(r.checked == 12);
  CHECK(r.worst_input == 0);
  CHECK(r.worst_index.size() == 2);
  CHECK(contains(r.message, "FAILED"));
  CHECK(r.analytic != doctest::Approx(r.numeric));
}

TEST_CASE("gradcheck: samples a subset of a large input") {
  Tensor x = xgt::leaf({50, 40}, 2);
  GradcheckOptions o;
  o.max_samples_per_input = 25;
  auto r = gradcheck([](const std::vector<Tensor>& v) { return tanh(v[0]); }, {x}, o);
  CHECK(r.ok);
  CHECK(r.checked == 25);
}

TEST_CASE("gradcheck: the zero-argument form checks closed-over parameters") {
  Tensor w = xgt::leaf({3, 2}, 3), b = xgt::leaf({2}, 4);
  Tensor input = xgt::leaf({5, 3}, 5).detach();
  auto r = gradcheck([&] { return sigmoid(matmul(input, w) + b); }, {w, b});
  INFO(r.message);
  CHECK(r.ok);
  CHECK(r.checked == 8);
}

namespace {
std::string tmp_path(const char* name) { return std::string(XG_TEST_TMPDIR) + "/" + name; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string with_header(const std::string& json, const std::string& data) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return s + json + data;
}
}  // namespace

TEST_CASE("safetensors: round trip is bit-identical, with metadata") {
  Generator g(1);
  std::map<std::string, Tensor> m{{"a.weight", randn({3, 4}, g)}, {"b", randn({5}, g, f64)}, {"s", scalar(7.0)}};
  std::string path = tmp_path("roundtrip.safetensors");
  save_tensors(path, m, {{"step", "12"}});
  std::map<std::string, std::string> meta;
  auto back = load_tensors(path, &meta);
  REQUIRE(back.size() == 3);
  for (auto& [k, v] : m) CHECK(bit_equal(v, back.at(k)));
  CHECK(meta.at("step") == "12");
  // The layout is the documented one: header length, then JSON.
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  CHECK(bytes.substr(8, 1) == "{");
  CHECK(contains(bytes.substr(8, n), "\"dtype\":\"F32\""));
  CHECK((8 + n) % 8 == 0);
}

TEST_CASE("safetensors: malformed files give clear errors, never a crash") {
  std::string path = tmp_path("bad.safetensors");
  auto msg_for = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    return XG_THROW_MESSAGE(load_tensors(path), FormatError);
  };
  CHECK(contains(msg_for("abc"), "truncated"));
  CHECK(contains(msg_for(with_header("{}", "").substr(0, 8) + std::string(1, '{')), "past the end"));
  CHECK(contains(msg_for(with_header("{not json", "")), "not valid JSON"));
  CHECK(contains(msg_for(with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234")),
                 "outside"));
  CHECK(contains(msg_for(with_header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678")),
                 "needs 12 bytes"));
  CHECK(contains(msg_for(with_header(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})", "1")),
                 "unsupported dtype"));
  CHECK(contains(msg_for(with_header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "1234")),
                 "shape"));
  CHECK(contains(msg_for(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                     "12345678")),
                 "overlap"));
  CHECK(contains(msg_for(with_header(R"({"w":{"dtype":"F32"}})", "")), "'w'"));
  CHECK(contains(XG_THROW_MESSAGE(load_tensors(tmp_path("missing.safetensors")), FormatError), "cannot open"));
  // Truncating a real file
  std::string good = tmp_path("good.safetensors");
  save_tensors(good, {{"w", ones({64})}});
  std::string bytes = read_bytes(good);
  CHECK(contains(msg_for(bytes.substr(0, bytes.size() - 10)), "outside"));
}

TEST_CASE("safetensors: a failed save leaves the previous file intact") {
  std::string path = tmp_path("atomic.safetensors");
  save_tensors(path, {{"w", full({4}, 1.0)}});
  // An undefined tensor makes the second save fail before anything is renamed.
  CHECK_THROWS(save_tensors(path, {{"w", full({4}, 2.0)}, {"x", Tensor()}}));
  auto back = load_tensors(path);
  CHECK(back.at("w").to_vector() == std::vector<double>(4, 1.0));
  // Saving into a missing directory fails loudly.
  CHECK_THROWS_AS(save_tensors(tmp_path("no/such/dir/x.safetensors"), {{"w", ones({1})}}), std::runtime_error);
}
