// Loading hostile files (issue 13): every check runs before anything is
// allocated, and each refusal has one exact message. Most cases go through
// load_tensors_from_memory, whose messages say "<memory>" for the path.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "autograd/serialize.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::contains;

namespace {
std::string tmp_path(const char* name) { return std::string(XG_TEST_TMPDIR) + "/" + name; }

// A file: the header length, the JSON as given (no padding), the data.
std::string file_bytes(const std::string& json, const std::string& data = "") {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return s + json + data;
}

std::map<std::string, Tensor> load_bytes(const std::string& bytes, std::map<std::string, std::string>* meta = nullptr) {
  return load_tensors_from_memory(bytes.data(), bytes.size(), meta);
}

// The message load_tensors_from_memory throws for these bytes.
std::string error_for(const std::string& bytes) { return XG_THROW_MESSAGE(load_bytes(bytes), FormatError); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string entry(const std::string& name, const std::string& shape, uint64_t begin, uint64_t end,
                  const std::string& dtype = "F32") {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// "[1,1,...,1]" with n entries.
std::string ones_shape(size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += i ? ",1" : "1";
  return s + "]";
}
}  // namespace

TEST_CASE("loaders: a shape of more than kMaxTensorDims dimensions is refused while the header is scanned") {
  CHECK(kMaxTensorDims == 64);
  // 64 dimensions load.
  auto ok = load_bytes(file_bytes("{" + entry("w", ones_shape(64), 0, 4) + "}", "abcd"));
  CHECK(ok.at("w").dim() == 64);
  const std::string want =
      "load_tensors: <memory>: tensor 'w': shape has more than 64 dimensions (the most xgrad reads)";
  CHECK(error_for(file_bytes("{" + entry("w", ones_shape(65), 0, 4) + "}", "abcd")) == want);
  // 200000 dimensions: refused at the 65th, never built.
  CHECK(error_for(file_bytes("{" + entry("w", ones_shape(200000), 0, 4) + "}", "abcd")) == want);
  // Any other array that long is refused too (none in a valid header is).
  std::string offsets = "[0";
  for (int i = 0; i < 100; ++i) offsets += ",0";
  CHECK(error_for(file_bytes(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":)" + offsets + "]}}")) ==
        "load_tensors: <memory>: array 'w' / 'data_offsets' in the header has more than 64 elements (no array in a "
        "valid header is that long)");
  // Nesting is capped too (a valid header nests 3 levels), before any of it is built.
  CHECK(error_for(file_bytes(R"({"w":{"x":)" + std::string(100000, '[') + std::string(100000, ']') + "}}")) ==
        "load_tensors: <memory>: header nests JSON more than 16 levels deep (a valid header nests 3)");
  CHECK(error_for(file_bytes(R"({"__metadata__":{"a":)" + std::string(14, '[') + std::string(14, ']') + "}}")) ==
        "load_tensors: <memory>: __metadata__ entry 'a' is not a string");
  // A header that is an array is refused at its first byte, however long.
  CHECK(error_for(file_bytes(ones_shape(100))) == "load_tensors: <memory>: header is not a JSON object");
  CHECK(error_for(file_bytes("3")) == "load_tensors: <memory>: header is not a JSON object");
  // save_tensors refuses what load_tensors would.
  CHECK(XG_THROW_MESSAGE(save_tensors(tmp_path("dims.safetensors"), {{"w", ones(Shape(65, 1))}}),
                         std::invalid_argument) ==
        "save_tensors: tensor 'w' has 65 dimensions; load_tensors reads at most 64");
}

TEST_CASE("loaders: the element count is checked past a zero dimension, without overflow") {
  const std::string big = std::to_string(1ull << 40);
  auto msg = [&](const std::string& shape) {
    return error_for(file_bytes("{" + entry("w", shape, 0, 0) + "}"));
  };
  const std::string tail = " is too large: its non-zero dimensions multiply to more than 2^40 (1099511627776) elements";
  // A zero dimension used to stop the check: (0, 2^40, 2^40) passed, and its strides overflow.
  CHECK(msg("[0," + big + "," + big + "]") ==
        "load_tensors: <memory>: tensor 'w': shape [0," + big + "," + big + "]" + tail);
  CHECK(msg("[" + big + ",0,2]") == "load_tensors: <memory>: tensor 'w': shape [" + big + ",0,2]" + tail);
  CHECK(msg("[" + big + ",2]") == "load_tensors: <memory>: tensor 'w': shape [" + big + ",2]" + tail);
  CHECK(msg("[4294967296,4294967296,4294967296,4294967296,0]") ==
        "load_tensors: <memory>: tensor 'w': shape [4294967296,4294967296,4294967296,4294967296,0]" + tail);
  // At the limit, with a zero: an empty tensor.
  auto ok = load_bytes(file_bytes("{" + entry("w", "[0," + big + "]", 0, 0) + "}"));
  CHECK(ok.at("w").shape() == Shape{0, int64_t{1} << 40});
  CHECK(ok.at("w").numel() == 0);
}

TEST_CASE("loaders: tensor.cpp: shapes of many dimensions print, and make_tensor checks past a zero dimension") {
  // Printing used to recurse once per dimension: 200000 of them overflowed the stack.
  Tensor t = ones(Shape(200000, 1));
  const std::string s = to_string(t);
  CHECK(s.size() == std::string("tensor(shape=(), dtype=float32)\n").size() + 2 * 200000 - 1 + 2 * 200000 + 1);
  CHECK(s.substr(s.size() - 200001, 4) == "1]]]");
  CHECK(shape_str(Shape(200000, 1)).size() == 2 * 200000 + 1);
  // The printed layout is the one the recursive walk made: separators, indentation, elision (with no
  // ", " before the "..."), empty dimensions.
  CHECK(to_string(arange(6, f64).reshape({2, 3})) == "tensor(shape=(2,3), dtype=float64)\n[[0, 1, 2],\n [3, 4, 5]]");
  CHECK(to_string(arange(14)) == "tensor(shape=(14,), dtype=float32)\n[0, 1, 2, 3, 4, 5..., 8, 9, 10, 11, 12, 13]");
  CHECK(to_string(zeros({2, 0})) == "tensor(shape=(2,0), dtype=float32)\n[[],\n []]");
  CHECK(to_string(arange(8).reshape({2, 2, 2})) ==
        "tensor(shape=(2,2,2), dtype=float32)\n[[[0, 1],\n  [2, 3]],\n [[4, 5],\n  [6, 7]]]");
  CHECK(to_string(scalar(2.5)) == "tensor(shape=(), dtype=float32)\n2.5");
  // Sizes: checked on the non-zero dimensions, so strides cannot overflow.
  const int64_t big = int64_t{1} << 40;
  CHECK(XG_THROW_MESSAGE(zeros({0, big, big}), ShapeError) ==
        "empty: shape (0,1099511627776,1099511627776) is too large: its non-zero dimensions multiply to more than "
        "1152921504606846975 elements");
  CHECK(XG_THROW_MESSAGE(from_blob(nullptr, {big, 0, big}, f32), ShapeError) ==
        "from_blob: shape (1099511627776,0,1099511627776) is too large: its non-zero dimensions multiply to more than "
        "1152921504606846975 elements");
  CHECK(zeros({0, big}).numel() == 0);
  CHECK(shape_numel({big, big, 0}) == 0);
  CHECK(XG_THROW_MESSAGE(shape_numel({big, big}), ShapeError) ==
        "shape_numel: shape (1099511627776,1099511627776) has more elements than an int64 can count");
}

TEST_CASE("loaders: empty tensors (0,3) and (2,0,4) save, load, clone, copy_ and concat, null data included") {
  // from_blob over no memory at all: data is null (memcpy must never see it, even for 0 bytes).
  for (bool blob : {false, true}) {
    CAPTURE(blob);
    Tensor a = blob ? from_blob(nullptr, {0, 3}, f32) : zeros({0, 3});
    Tensor b = blob ? from_blob(nullptr, {2, 0, 4}, f64) : zeros({2, 0, 4}, f64);
    const std::string path = tmp_path("empty.safetensors");
    save_tensors(path, {{"a", a}, {"b", b}, {"c", ones({2})}});
    for (const auto& back : {load_tensors(path), load_bytes(read_file(path))}) {
      REQUIRE(back.size() == 3);
      CHECK(back.at("a").shape() == Shape{0, 3});
      CHECK(back.at("b").shape() == Shape{2, 0, 4});
      CHECK(back.at("b").dtype() == f64);
      CHECK(bit_equal(back.at("a"), a));
      CHECK(bit_equal(back.at("c"), ones({2})));
    }
    CHECK(bit_equal(a.clone(), a));
    CHECK(bit_equal(b.clone(), b));
    Tensor a2 = zeros({0, 3}), b2 = zeros({2, 0, 4});
    a2.copy_(a);
    b2.copy_(b);
    a.copy_(a2);
    CHECK(bit_equal(a2, zeros({0, 3})));
    CHECK(concat({a, a}, 0).shape() == Shape{0, 3});
    CHECK(concat({b, b}, 1).shape() == Shape{2, 0, 4});
    CHECK(bit_equal(concat({ones({2, 3}), a.to(f32)}, 0), ones({2, 3})));
    CHECK(permute(b, {2, 0, 1}).shape() == Shape{4, 2, 0});
    CHECK(transpose(a, 0, 1).shape() == Shape{3, 0});
    // Copies whose rows are contiguous and 0 long (a memcpy of 0 bytes per row).
    Tensor c = blob ? from_blob(nullptr, {1, 0}, f32) : zeros({1, 0});
    CHECK(broadcast_to(c, {3, 0}).shape() == Shape{3, 0});
    CHECK(slice(b, 0, 1, 2).shape() == Shape{1, 0, 4});
  }
}

TEST_CASE("loaders: a key twice in one JSON object is refused (a parser would keep one silently)") {
  const std::string w = entry("w", "[1]", 0, 4);
  CHECK(error_for(file_bytes("{" + w + "," + w + "}", "abcd")) ==
        "load_tensors: <memory>: duplicate key 'w' at the top level of the header");
  CHECK(error_for(file_bytes(R"({"w":{"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", "abcd")) ==
        "load_tensors: <memory>: duplicate key 'dtype' in 'w'");
  CHECK(error_for(file_bytes(R"({"__metadata__":{"step":"1","step":"2"}})")) ==
        "load_tensors: <memory>: duplicate key 'step' in '__metadata__'");
  // The same key in different objects is fine.
  auto ok = load_bytes(file_bytes("{" + w + "," + entry("v", "[1]", 4, 8) + "}", "abcdefgh"));
  CHECK(ok.size() == 2);
}

TEST_CASE("loaders: a NUL byte in a tensor name or a metadata key is refused, on load and on save") {
  CHECK(error_for(file_bytes("{" + entry("a\\u0000b", "[1]", 0, 4) + "}", "abcd")) ==
        "load_tensors: <memory>: tensor name 'a\\x00b' contains a NUL byte");
  CHECK(error_for(file_bytes(R"({"__metadata__":{"k\u0000":"v"}})")) ==
        "load_tensors: <memory>: __metadata__ key 'k\\x00' contains a NUL byte");
  // A NUL in a metadata value is data, and kept.
  std::map<std::string, std::string> meta;
  load_bytes(file_bytes(R"({"__metadata__":{"k":"a\u0000b"}})"), &meta);
  CHECK(meta.at("k") == std::string("a\0b", 3));
  const std::string path = tmp_path("nul.safetensors");
  CHECK(XG_THROW_MESSAGE(save_tensors(path, {{std::string("a\0b", 3), ones({1})}}), std::invalid_argument) ==
        "save_tensors: tensor name 'a\\x00b' contains a NUL byte");
  CHECK(XG_THROW_MESSAGE(save_tensors(path, {{"w", ones({1})}}, {{std::string("k\0", 2), "v"}}),
                         std::invalid_argument) == "save_tensors: metadata key 'k\\x00' contains a NUL byte");
}

TEST_CASE("loaders: the data buffer must be indexed entirely: no hole, no trailing byte") {
  // A hole before the first tensor.
  std::string json = "{" + entry("a", "[1]", 4, 8) + "}";
  CHECK(error_for(file_bytes(json, "12345678")) ==
        "load_tensors: <memory>: tensor 'a' starts at data offset 4, but the data starts at 0: the data buffer has a "
        "hole of 4 bytes");
  // A hole between two tensors (named in offset order, not key order).
  json = "{" + entry("a", "[1]", 8, 12) + "," + entry("b", "[2]", 0, 8) + "," + entry("c", "[1]", 16, 20) + "}";
  CHECK(error_for(file_bytes(json, std::string(20, 'x'))) ==
        "load_tensors: <memory>: tensor 'c' starts at data offset 16, but the previous tensor 'a' ends at 12: the data "
        "buffer has a hole of 4 bytes");
  // Bytes after the last tensor.
  json = "{" + entry("a", "[1]", 0, 4) + "," + entry("b", "[1]", 4, 8) + "}";
  CHECK(error_for(file_bytes(json, "123456789abc")) ==
        "load_tensors: <memory>: the last tensor 'b' ends at data offset 8, but the data runs to 12: 4 bytes at file "
        "offset " + std::to_string(8 + json.size() + 8) + " belong to no tensor");
  CHECK(error_for(file_bytes("{}", "1234")) ==
        "load_tensors: <memory>: no tensor is stored, but the data runs to 4: 4 bytes at file offset 10 belong to no "
        "tensor");
  // Overlaps are still named as such.
  json = "{" + entry("a", "[2]", 0, 8) + "," + entry("b", "[1]", 4, 8) + "}";
  CHECK(error_for(file_bytes(json, "12345678")) ==
        "load_tensors: <memory>: tensors 'a' and 'b' overlap at byte offset " + std::to_string(8 + json.size() + 4) +
            " (data offset 4)");
  // Empty tensors take no bytes, wherever they sit between the others.
  json = "{" + entry("z", "[0]", 4, 4) + "," + entry("a", "[1]", 0, 4) + "," + entry("e", "[0,3]", 0, 0) + "," +
         entry("b", "[1]", 4, 8) + "," + entry("y", "[0]", 8, 8) + "}";
  auto ok = load_bytes(file_bytes(json, "12345678"));
  CHECK(ok.size() == 5);
  CHECK(ok.at("e").shape() == Shape{0, 3});
  // And a file of only empty tensors has no data at all.
  CHECK(load_bytes(file_bytes("{" + entry("e", "[0]", 0, 0) + "}")).at("e").numel() == 0);
}

TEST_CASE("loaders: bad data_offsets name the offset that is wrong") {
  std::string json = "{" + entry("w", "[1]", 8, 4) + "}";
  // begin > end used to be reported as an end past the file.
  CHECK(error_for(file_bytes(json, "12345678")) ==
        "load_tensors: <memory>: tensor 'w': data_offsets [8, 4] are reversed: begin 8 > end 4");
  json = "{" + entry("w", "[3]", 0, 12) + "}";
  const std::string start = std::to_string(8 + json.size());
  CHECK(error_for(file_bytes(json, "12345678")) ==
        "load_tensors: <memory>: tensor 'w': data_offsets [0, 12] fall outside the 8 data bytes (end at file offset " +
            start + " + 12 > file size " + std::to_string(8 + json.size() + 8) + ")");
  // An end near 2^64 is printed as it is, not wrapped around by adding the data start.
  json = "{" + entry("w", "[1]", 0, 18446744073709551615ull) + "}";
  CHECK(error_for(file_bytes(json, "1234")) ==
        "load_tensors: <memory>: tensor 'w': data_offsets [0, 18446744073709551615] fall outside the 4 data bytes (end "
        "at file offset " + std::to_string(8 + json.size()) + " + 18446744073709551615 > file size " +
            std::to_string(8 + json.size() + 4) + ")");
}

TEST_CASE("loaders: load_tensors_from_memory reads what load_tensors reads, with the same checks") {
  Generator g(3);
  const std::map<std::string, Tensor> m{{"x", randn({3, 5}, g)}, {"y", randn({4}, g, f64)}};
  const std::string path = tmp_path("memory.safetensors");
  save_tensors(path, m, {{"step", "9"}});
  const std::string bytes = read_file(path);
  std::map<std::string, std::string> meta;
  auto back = load_tensors_from_memory(bytes.data(), bytes.size(), &meta);
  REQUIRE(back.size() == 2);
  for (const auto& [k, v] : m) CHECK(bit_equal(back.at(k), v));
  CHECK(meta.at("step") == "9");
  // The name given stands for the path; the file gives the same message.
  const std::string cut = bytes.substr(0, bytes.size() - 1);
  CHECK(XG_THROW_MESSAGE(load_tensors_from_memory(cut.data(), cut.size(), nullptr, "upload #3"), FormatError) ==
        "load_tensors: upload #3: tensor 'y': data_offsets [60, 92] fall outside the 91 data bytes (end at file "
        "offset " + std::to_string(bytes.size() - 92) + " + 92 > file size " + std::to_string(cut.size()) + ")");
  std::ofstream(path, std::ios::binary) << cut;
  CHECK(XG_THROW_MESSAGE(load_tensors(path), FormatError) ==
        XG_THROW_MESSAGE(load_tensors_from_memory(cut.data(), cut.size(), nullptr, path), FormatError));
  // No bytes at all, null or not.
  CHECK(XG_THROW_MESSAGE(load_tensors_from_memory(nullptr, 0), FormatError) ==
        "load_tensors: <memory>: truncated: 0 bytes, too short for the 8-byte header length");
  CHECK(XG_THROW_MESSAGE(load_tensors_from_memory(nullptr, 16), std::invalid_argument) ==
        "load_tensors_from_memory: <memory>: null data with size 16");
  // The metadata is filled only when the whole file loads.
  std::map<std::string, std::string> untouched{{"kept", "1"}};
  const std::string bad =
      file_bytes(R"({"__metadata__":{"a":"b"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
  CHECK_THROWS_AS(load_bytes(bad, &untouched), FormatError);
  CHECK(untouched == std::map<std::string, std::string>{{"kept", "1"}});
}

TEST_CASE("loaders: F6, a save removes the temporary files that crashed writers left beside its target") {
  const std::string path = std::string(XG_TEST_TMPDIR) + "/f6.safetensors";
  const std::string stale = path + ".tmp.999999999";  // above any pid_max: no such process
  const std::string live = path + ".tmp.1";           // init: alive, not ours to remove
  const std::string other = path + ".tmp.backup";     // not a PID: not a temporary of ours
  for (const auto& f : {stale, live, other}) std::ofstream(f) << "partial";
  xg::save_tensors(path, {{"w", xg::ones({2})}});
  CHECK_FALSE(std::ifstream(stale).good());
  CHECK(std::ifstream(live).good());
  CHECK(std::ifstream(other).good());
  CHECK(xg::load_tensors(path).at("w").numel() == 2);
  std::remove(live.c_str());
  std::remove(other.c_str());
}

TEST_CASE("loaders: checksums of the header and each tensor are written, verified, and name what is damaged") {
  const std::string path = tmp_path("checksum.safetensors");
  Tensor w = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<double>{5, 6}, {2});
  // A stale checksum entry given by the caller is replaced, never copied.
  save_tensors(path, {{"w", w}, {"b", b}}, {{"kind", "test"}, {kChecksumKey, "stale"}});
  std::map<std::string, std::string> meta;
  auto t = load_tensors(path, &meta);
  CHECK(meta.at("kind") == "test");
  CHECK(meta.at(kChecksumKey).rfind("{\"header\":\"", 0) == 0);
  CHECK(t.at("w").to_vector() == w.to_vector());

  const std::string bytes = read_file(path);
  // The last byte belongs to w (tensors are stored by name: b, then w).
  std::string flipped = bytes;
  flipped.back() = static_cast<char>(flipped.back() ^ 0x01);
  CHECK(contains(error_for(flipped), "load_tensors: <memory>: tensor 'w': its bytes do not match their checksum (crc32 '"));
  CHECK(contains(error_for(flipped), "computed): the file is damaged"));
  // A header entry changed but still well-formed: "test" -> "tost".
  std::string renamed = bytes;
  renamed.replace(renamed.find("\"test\""), 6, "\"tost\"");
  CHECK(contains(error_for(renamed), "load_tensors: <memory>: the header does not match its checksum (crc32 "));
  // A checksum record that is not one.
  std::string broken = bytes;
  broken.replace(broken.find("{\\\"header\\\""), 3, "[1,");
  CHECK(contains(error_for(broken), "the __metadata__ entry 'crc32' is not a checksum record"));
  // A file without checksums (another writer's, or an older xgrad's) loads as before.
  const std::string plain = file_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  std::map<std::string, std::string> none;
  CHECK(load_bytes(plain, &none).at("x").item() == 0);
  CHECK(none.count(kChecksumKey) == 0);
}

TEST_CASE("loaders: save_tensors never replaces a directory or a device, and quote_text makes bad input printable") {
  CHECK(XG_THROW_MESSAGE(save_tensors(XG_TEST_TMPDIR, {{"w", ones({1})}}), std::runtime_error) ==
        std::string("save_tensors: ") + XG_TEST_TMPDIR + " is a directory: refusing to replace it");
  const std::string fifo = tmp_path("a_fifo");
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK(XG_THROW_MESSAGE(save_tensors(fifo, {{"w", ones({1})}}), std::runtime_error) ==
        "save_tensors: " + fifo + " is not a regular file: refusing to replace it");
  struct stat st;
  CHECK((::stat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));
  std::remove(fifo.c_str());

  CHECK(quote_text("hello") == "'hello'");
  CHECK(quote_text(std::string("a\0b\x7f\xff", 5)) == "'a\\x00b\\x7f\\xff'");
  CHECK(quote_text("caf\xc3\xa9") == "'caf\\xc3\\xa9'");  // not even UTF-8: U+202E would reverse what follows
  CHECK(quote_text("\xe2\x80\xae") == "'\\xe2\\x80\\xae'");
  CHECK(quote_text(std::string(100, 'x')) == "'" + std::string(40, 'x') + "...'");
  CHECK(quote_text("abcdef", 3) == "'abc...'");
}

TEST_CASE("loaders: parse_whole_number reads decimal digits only, and its range form names the option and the range") {
  CHECK(parse_whole_number("-12") == int64_t{-12});
  for (const char* bad : {"1.5", "1e3", "0x10", "+1", " 1", "nan", "", "-", "1234567890123456789"})
    CHECK_MESSAGE(!parse_whole_number(bad).has_value(), bad);
  CHECK(parse_whole_number("--batch", "64", 1, 64) == 64);
  CHECK(XG_THROW_MESSAGE(parse_whole_number("--batch", "65", 1, 64), std::invalid_argument) ==
        "--batch 65: expected a whole number from 1 to 64");
  CHECK(XG_THROW_MESSAGE(parse_whole_number("--batch", "1e30", 1, 64), std::invalid_argument) ==
        "--batch 1e30: expected a whole number from 1 to 64");
}
