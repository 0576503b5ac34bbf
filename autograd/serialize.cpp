#include "autograd/serialize.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/detail/impl.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian; add byte swapping");

namespace xg {

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // as the reference implementation

size_t elem_size(Dtype d) { return d == Dtype::f32 ? 4 : 8; }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FormatError("load_tensors: " + path + ": " + what);
}

void write_all(int fd, const void* p, size_t n, const std::string& tmp) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("save_tensors: writing " + tmp + ": " + std::strerror(errno));
    }
    c += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void save_tensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw std::invalid_argument("save_tensors: tensor '" + name + "' is undefined");
    if (name == "__metadata__") throw std::invalid_argument("save_tensors: '__metadata__' is a reserved name");
    const uint64_t bytes = t.numel() * elem_size(t.dtype());
    header[name] = {{"dtype", t.dtype() == Dtype::f32 ? "F32" : "F64"},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t n = text.size();

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("save_tensors: cannot create " + tmp + ": " + std::strerror(errno));
  try {
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    write_all(fd, len, 8, tmp);
    write_all(fd, text.data(), text.size(), tmp);
    for (const auto& [name, t] : tensors) write_all(fd, t.impl()->buf->raw(), t.numel() * elem_size(t.dtype()), tmp);
    if (::fsync(fd) != 0) throw std::runtime_error("save_tensors: fsync " + tmp + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("save_tensors: cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

std::map<std::string, Tensor> load_tensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(path, "cannot open file");
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) fail(path, "truncated: " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n > size - 8)
    fail(path, "header length " + std::to_string(n) + " points past the end of the file (" + std::to_string(size) +
                   " bytes): truncated or corrupt");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) fail(path, "could not read the header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");
  const uint64_t data_start = 8 + n, data_size = size - data_start;

  struct Entry {
    std::string name;
    Dtype dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__ entry '" + m.key() + "' is not a string");
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      fail(path, "tensor '" + name + "': entry needs dtype, shape and data_offsets");
    Entry e;
    e.name = name;
    if (!v["dtype"].is_string()) fail(path, "tensor '" + name + "': dtype is not a string");
    const std::string dt = v["dtype"].get<std::string>();
    if (dt == "F32") e.dtype = Dtype::f32;
    else if (dt == "F64") e.dtype = Dtype::f64;
    else fail(path, "tensor '" + name + "': unsupported dtype " + dt + " (xgrad reads F32 and F64)");
    if (!v["shape"].is_array()) fail(path, "tensor '" + name + "': shape is not an array");
    uint64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(path, "tensor '" + name + "': shape has a non-integer or negative entry");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (1ull << 40) || (dim && count > (1ull << 40) / dim)) fail(path, "tensor '" + name + "': shape too large");
      count *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(path, "tensor '" + name + "': data_offsets must be two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      fail(path, "tensor '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "] fall outside the " + std::to_string(data_size) + " data bytes (file offset " +
                     std::to_string(data_start + e.end) + " > size " + std::to_string(size) + ")");
    if (e.end - e.begin != count * elem_size(e.dtype))
      fail(path, "tensor '" + name + "': shape " + shape_str(e.shape) + " of " + dt + " needs " +
                     std::to_string(count * elem_size(e.dtype)) + " bytes but data_offsets span " +
                     std::to_string(e.end - e.begin));
    entries.push_back(std::move(e));
  }
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end)
      fail(path, "tensors '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap at byte offset " +
                     std::to_string(data_start + order[i]->begin));

  std::map<std::string, Tensor> out;
  for (const auto& e : entries) {
    Tensor t = make_tensor(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    in.read(static_cast<char*>(t.impl()->buf->raw()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) fail(path, "tensor '" + e.name + "': could not read bytes at offset " + std::to_string(data_start + e.begin));
    out.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace xg
