#include "autograd/serialize.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include <zlib.h>

#include "autograd/detail/impl.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian; add byte swapping");

namespace xg {

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // as the reference implementation

size_t elem_size(Dtype d) { return static_cast<size_t>(dtype_size(d)); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FormatError("load_tensors: " + path + ": " + what);
}

std::string show_name(const std::string& s) { return quote_text(s, 200); }

uint32_t crc_of(const void* p, uint64_t n) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const Bytef* b = static_cast<const Bytef*>(p);
  while (n > 0) {  // zlib takes at most 4 GiB a call
    const uInt chunk = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
    crc = ::crc32(crc, b, chunk);
    b += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string hex8(uint32_t v) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

// The header's checksum covers everything in it but the checksum entry
// itself: the JSON as nlohmann::json writes it (keys sorted), so a reader
// recomputes it from the parsed header whatever the spacing on disk.
uint32_t header_crc(nlohmann::json header) {
  auto m = header.find("__metadata__");
  if (m != header.end() && m->is_object()) {
    m->erase(kChecksumKey);
    if (m->empty()) header.erase("__metadata__");
  }
  const std::string text = header.dump();
  return crc_of(text.data(), text.size());
}

void write_all(int fd, const void* p, size_t n, const std::string& tmp, const char* who) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string(who) + ": writing " + tmp + ": " + std::strerror(errno));
    }
    c += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

// Removes PATH.tmp.PID files of `path` whose writer process is gone (a crash
// mid-save leaves one behind); files of live processes are left alone.
static void remove_stale_temporaries(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;  // the save itself reports an unusable directory
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const long p = std::stol(pid);
    if (p == ::getpid() || (p > 0 && (::kill(static_cast<pid_t>(p), 0) == 0 || errno == EPERM))) continue;
    ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

void save_tensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw std::invalid_argument("save_tensors: tensor '" + name + "' is undefined");
    if (name == "__metadata__") throw std::invalid_argument("save_tensors: '__metadata__' is a reserved name");
    if (name.find('\0') != std::string::npos)
      throw std::invalid_argument("save_tensors: tensor name " + show_name(name) + " contains a NUL byte");
    if (t.shape().size() > kMaxTensorDims)
      throw std::invalid_argument("save_tensors: tensor " + show_name(name) + " has " +
                                  std::to_string(t.shape().size()) + " dimensions; load_tensors reads at most " +
                                  std::to_string(kMaxTensorDims));
    const uint64_t bytes = t.numel() * elem_size(t.dtype());
    header[name] = {{"dtype", t.dtype() == Dtype::f32 ? "F32" : t.dtype() == Dtype::f64 ? "F64" : "I64"},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::map<std::string, std::string> meta;
  for (const auto& kv : metadata) {
    if (kv.first.find('\0') != std::string::npos)
      throw std::invalid_argument("save_tensors: metadata key " + show_name(kv.first) + " contains a NUL byte");
    if (kv.first != kChecksumKey) meta.insert(kv);  // a loaded file's checksum is recomputed, never copied
  }
  if (!meta.empty()) header["__metadata__"] = meta;
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& [name, t] : tensors) sums[name] = hex8(crc_of(t.impl()->buf->raw(), t.numel() * elem_size(t.dtype())));
  header["__metadata__"][kChecksumKey] = nlohmann::json{{"header", hex8(header_crc(header))}, {"tensors", sums}}.dump();
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t n = text.size();

  write_file_atomically(path, "save_tensors", [&](const ByteSink& put) {
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    put(len, 8);
    put(text.data(), text.size());
    for (const auto& [name, t] : tensors) put(t.impl()->buf->raw(), t.numel() * elem_size(t.dtype()));
  });
}

void write_file_atomically(const std::string& path, const char* who, const std::function<void(const ByteSink&)>& write) {
  const std::string w = who;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(w + ": " + path + " is " + (S_ISDIR(st.st_mode) ? "a directory" : "not a regular file") +
                             ": refusing to replace it");
  remove_stale_temporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error(w + ": cannot create " + tmp + ": " + std::strerror(errno));
  try {
    write([&](const void* p, size_t bytes) { write_all(fd, p, bytes, tmp, who); });
    if (::fsync(fd) != 0) throw std::runtime_error(w + ": fsync " + tmp + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(w + ": cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

namespace {

constexpr uint64_t kMaxElements = 1ull << 40;  // per tensor, counting only its non-zero dimensions

// Where a file's bytes come from: an open file or a span of memory. Nothing
// is read until the header has been checked, and each tensor's bytes go
// straight into that tensor.
class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  // Copies the `n` bytes at `offset` into `dst`; false if they are not all there.
  virtual bool read(uint64_t offset, uint64_t n, void* dst) = 0;
};

class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) fail(path, "cannot open file");
    in_.seekg(0, std::ios::end);
    const std::streamoff end = in_.tellg();
    if (!in_ || end < 0) fail(path, "cannot tell the file's size (not a regular file?)");
    size_ = static_cast<uint64_t>(end);
  }
  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, uint64_t n, void* dst) override {
    if (n == 0) return true;
    if (offset > size_ || n > size_ - offset) return false;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    return in_ && in_.gcount() == static_cast<std::streamsize>(n);
  }

 private:
  std::ifstream in_;
  uint64_t size_ = 0;
};

class MemorySource final : public Source {
 public:
  MemorySource(const void* data, uint64_t size) : p_(static_cast<const unsigned char*>(data)), size_(size) {}
  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, uint64_t n, void* dst) override {
    if (n == 0) return true;  // before memcpy: p_ (or dst) may be null then
    if (offset > size_ || n > size_ - offset) return false;
    std::memcpy(dst, p_ + offset, n);
    return true;
  }

 private:
  const unsigned char* p_;
  uint64_t size_;
};

// A first pass over the header text that builds nothing: nlohmann::json
// keeps the last of two equal keys silently, and would build an array of
// any length, nested to any depth, before either could be checked. Stops at
// the first JSON syntax error, key repeated in an object, array longer than
// kMaxTensorDims (a shape; no array in a valid header is longer) or nesting
// deeper than kMaxDepth.
class HeaderScan final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string error;  // empty if the header passed

  bool null() override { return element(); }
  bool boolean(bool) override { return element(); }
  bool number_integer(number_integer_t) override { return element(); }
  bool number_unsigned(number_unsigned_t) override { return element(); }
  bool number_float(number_float_t, const string_t&) override { return element(); }
  bool string(string_t&) override { return element(); }
  bool binary(binary_t&) override { return element(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) {
      error =
          "duplicate key " + show_name(k) + (stack_.size() == 1 ? " at the top level of the header" : " in " + where());
      return false;
    }
    f.pending = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = std::string("header is not valid JSON: ") + e.what();
    return false;
  }

 private:
  struct Frame {
    bool array;
    std::string key;      // this container's key in its parent object ("" in an array or at the top)
    std::string pending;  // objects: the key whose value comes next
    std::set<std::string> keys;
    size_t count = 0;     // arrays: elements so far
  };
  static constexpr size_t kMaxDepth = 16;  // so that the stack stays small
  std::vector<Frame> stack_;

  // "'w' / 'shape'": the keys down to the innermost container.
  std::string where() const {
    std::string r;
    for (size_t i = 1; i < stack_.size(); ++i) r += (r.empty() ? "" : " / ") + show_name(stack_[i].key);
    return r;
  }
  bool element() {
    if (stack_.empty() || !stack_.back().array || ++stack_.back().count <= kMaxTensorDims) return true;
    const bool shape =
        stack_.size() == 3 && !stack_[1].array && stack_[1].key != "__metadata__" && stack_[2].key == "shape";
    error = shape ? "tensor " + show_name(stack_[1].key) + ": shape has more than " + std::to_string(kMaxTensorDims) +
                        " dimensions (the most xgrad reads)"
                  : "array " + where() + " in the header has more than " + std::to_string(kMaxTensorDims) +
                        " elements (no array in a valid header is that long)";
    return false;
  }
  bool open(bool array) {
    if (stack_.empty() && array) {
      error = "header is not a JSON object";
      return false;
    }
    if (!element()) return false;
    if (stack_.size() == kMaxDepth) {
      error = "header nests JSON more than " + std::to_string(kMaxDepth) + " levels deep (a valid header nests 3)";
      return false;
    }
    Frame f;
    f.array = array;
    if (!stack_.empty() && !stack_.back().array) f.key = stack_.back().pending;
    stack_.push_back(std::move(f));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
};

// One tensor's entry in the header.
struct Entry {
  std::string name;
  Dtype dtype;
  Shape shape;
  uint64_t begin, end;
};

// Where the header says the data is: the file's size, and the data buffer's start.
struct Layout {
  uint64_t size, data_start, data_size;
};

// The header: its length checked against the file, its JSON scanned (depth,
// array lengths, keys) before it is parsed.
nlohmann::json read_header(Source& src, const std::string& path, Layout& layout) {
  const uint64_t size = src.size();
  if (size < 8) fail(path, "truncated: " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  unsigned char len[8];
  if (!src.read(0, 8, len)) fail(path, "could not read the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n > size - 8)
    fail(path, "header length " + std::to_string(n) + " points past the end of the file (" + std::to_string(size) +
                   " bytes): truncated or corrupt");
  std::string text(n, '\0');
  if (!src.read(8, n, text.data())) fail(path, "could not read the header");
  HeaderScan scan;
  nlohmann::json::sax_parse(text, &scan);
  if (!scan.error.empty()) fail(path, scan.error);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");
  layout = {size, 8 + n, size - 8 - n};
  return header;
}

// The "__metadata__" entries: string keys without NUL bytes, string values.
std::map<std::string, std::string> read_metadata(const nlohmann::json& v, const std::string& path) {
  std::map<std::string, std::string> meta;
  if (!v.is_object()) fail(path, "__metadata__ is not an object");
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (m.key().find('\0') != std::string::npos)
      fail(path, "__metadata__ key " + show_name(m.key()) + " contains a NUL byte");
    if (!m.value().is_string()) fail(path, "__metadata__ entry " + show_name(m.key()) + " is not a string");
    meta[m.key()] = m.value().get<std::string>();
  }
  return meta;
}

// One tensor's entry: dtype, shape and byte range checked against each other and the data.
Entry read_entry(const std::string& name, const nlohmann::json& v, const Layout& layout, const std::string& path) {
  const uint64_t size = layout.size, data_start = layout.data_start, data_size = layout.data_size;
  const std::string t = "tensor " + show_name(name) + ": ";
  if (name.find('\0') != std::string::npos) fail(path, "tensor name " + show_name(name) + " contains a NUL byte");
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
    fail(path, t + "entry needs dtype, shape and data_offsets");
  Entry e;
  e.name = name;
  if (!v["dtype"].is_string()) fail(path, t + "dtype is not a string");
  const std::string dt = v["dtype"].get<std::string>();
  if (dt == "F32") e.dtype = Dtype::f32;
  else if (dt == "F64") e.dtype = Dtype::f64;
  else if (dt == "I64") e.dtype = Dtype::i64;
  else fail(path, t + "unsupported dtype " + show_name(dt) + " (xgrad reads F32, F64 and I64)");
  const auto& shape = v["shape"];
  if (!shape.is_array()) fail(path, t + "shape is not an array");
  // The scan capped the array at kMaxTensorDims. The count of elements
  // ignores zero dimensions, so that (0, 2^40, 2^40) is refused like
  // (2^40, 2^40): the strides of such a shape would overflow.
  uint64_t nonzero = 1;
  bool empty = false;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) fail(path, t + "shape has a non-integer or negative entry");
    const uint64_t dim = d.get<uint64_t>();
    if (dim == 0) empty = true;
    else if (dim > kMaxElements / nonzero)
      fail(path, t + "shape " + shape.dump() + " is too large: its non-zero dimensions multiply to more than 2^40 (" +
                     std::to_string(kMaxElements) + ") elements");
    else nonzero *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const uint64_t count = empty ? 0 : nonzero;
  const auto& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(path, t + "data_offsets must be two non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  const std::string range = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.begin > e.end)
    fail(path, t + range + " are reversed: begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end));
  if (e.end > data_size)
    fail(path, t + range + " fall outside the " + std::to_string(data_size) + " data bytes (end at file offset " +
                   std::to_string(data_start) + " + " + std::to_string(e.end) + " > file size " +
                   std::to_string(size) + ")");
  if (e.end - e.begin != count * elem_size(e.dtype))
    fail(path, t + "shape " + shape_str(e.shape) + " of " + dt + " needs " +
                   std::to_string(count * elem_size(e.dtype)) + " bytes but data_offsets span " +
                   std::to_string(e.end - e.begin));
  return e;
}

void check_coverage(const std::vector<Entry>& entries, const Layout& layout, const std::string& path) {
  const uint64_t data_start = layout.data_start, data_size = layout.data_size;
  // The format: the data buffer is indexed entirely, without holes. Sorted by
  // offset (an empty tensor before one that starts where it is), each tensor
  // begins where the previous one ended, the first at 0, and the last ends
  // with the file.
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end != b->end ? a->end < b->end : a->name < b->name;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const Entry& e = *order[i];
    if (e.begin < covered)
      fail(path, "tensors " + show_name(order[i - 1]->name) + " and " + show_name(e.name) + " overlap at byte offset " +
                     std::to_string(data_start + e.begin) + " (data offset " + std::to_string(e.begin) + ")");
    if (e.begin > covered)
      fail(path, "tensor " + show_name(e.name) + " starts at data offset " + std::to_string(e.begin) + ", but " +
                     (i == 0 ? std::string("the data starts at 0")
                             : "the previous tensor " + show_name(order[i - 1]->name) + " ends at " +
                                   std::to_string(covered)) +
                     ": the data buffer has a hole of " + std::to_string(e.begin - covered) + " bytes");
    covered = e.end;
  }
  if (covered != data_size)
    fail(path, (order.empty() ? std::string("no tensor is stored")
                              : "the last tensor " + show_name(order.back()->name) + " ends at data offset " +
                                    std::to_string(covered)) +
                   ", but the data runs to " + std::to_string(data_size) + ": " + std::to_string(data_size - covered) +
                   " bytes at file offset " + std::to_string(data_start + covered) + " belong to no tensor");
}

// The writer's checksum record, checked against the header and the entries;
// null when the file has none.
nlohmann::json read_checksums(const nlohmann::json& header, const std::map<std::string, std::string>& meta,
                              const std::vector<Entry>& entries, const std::string& path) {
  nlohmann::json sums;
  auto sum = meta.find(kChecksumKey);
  if (sum == meta.end()) return sums;
  sums = nlohmann::json::parse(sum->second, nullptr, false);
  const bool well_formed = sums.is_object() && sums.size() == 2 && sums.contains("header") &&
                           sums["header"].is_string() && sums.contains("tensors") && sums["tensors"].is_object();
  if (!well_formed) fail(path, "the __metadata__ entry '" + std::string(kChecksumKey) + "' is not a checksum record");
  const std::string stored = sums["header"].get<std::string>(), computed = hex8(header_crc(header));
  if (stored != computed)
    fail(path, "the header does not match its checksum (crc32 " + show_name(stored) + " stored, " + computed +
                   " computed): the file is damaged");
  for (const auto& e : entries)
    if (!sums["tensors"].contains(e.name) || !sums["tensors"][e.name].is_string())
      fail(path, "tensor " + show_name(e.name) + " has no checksum in the header's record");
  if (sums["tensors"].size() != entries.size())
    fail(path, "the checksum record names a tensor the file does not hold");
  return sums;
}

std::map<std::string, Tensor> load(Source& src, const std::string& path, std::map<std::string, std::string>* metadata) {
  Layout layout;
  const nlohmann::json header = read_header(src, path, layout);
  std::vector<Entry> entries;
  std::map<std::string, std::string> meta;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") meta = read_metadata(it.value(), path);
    else entries.push_back(read_entry(it.key(), it.value(), layout, path));
  }
  check_coverage(entries, layout, path);
  // The checksums: of the header now, of each tensor as it is read.
  const nlohmann::json sums = read_checksums(header, meta, entries, path);
  const uint64_t data_start = layout.data_start;
  // Everything checked: allocate, exactly the data bytes in all.
  std::map<std::string, Tensor> out;
  for (const auto& e : entries) {
    Tensor t = make_tensor(e.shape, e.dtype);
    if (!src.read(data_start + e.begin, e.end - e.begin, t.impl()->buf->raw()))
      fail(path,
           "tensor " + show_name(e.name) + ": could not read bytes at offset " + std::to_string(data_start + e.begin));
    if (!sums.is_null()) {
      const std::string stored = sums["tensors"][e.name].get<std::string>();
      const std::string computed = hex8(crc_of(t.impl()->buf->raw(), e.end - e.begin));
      if (stored != computed)
        fail(path, "tensor " + show_name(e.name) + ": its bytes do not match their checksum (crc32 " + show_name(stored) +
                       " stored, " + computed + " computed): the file is damaged");
    }
    out.emplace(e.name, std::move(t));
  }
  if (metadata)
    for (auto& [k, v] : meta) (*metadata)[k] = std::move(v);
  return out;
}

}  // namespace

std::map<std::string, Tensor> load_tensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  FileSource src(path);
  return load(src, path, metadata);
}

std::map<std::string, Tensor> load_tensors_from_memory(const void* data, size_t size,
                                                       std::map<std::string, std::string>* metadata,
                                                       const std::string& name) {
  if (!data && size > 0)
    throw std::invalid_argument("load_tensors_from_memory: " + name + ": null data with size " + std::to_string(size));
  MemorySource src(data, size);
  return load(src, name, metadata);
}

std::string quote_text(std::string_view s, size_t max_bytes) {
  // Printable ASCII only: a byte past it may be a control character, half of
  // a UTF-8 sequence, or a character that reorders or hides text (U+202E).
  std::string r = "'";
  const size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      r += hex;
    } else {
      r += static_cast<char>(c);
    }
  }
  return r + (n < s.size() ? "...'" : "'");
}

std::optional<int64_t> parse_whole_number(const std::string& s) {
  const size_t sign = !s.empty() && s[0] == '-';
  const size_t digits = s.size() - sign;
  if (digits == 0 || digits > 18 || s.find_first_not_of("0123456789", sign) != std::string::npos) return std::nullopt;
  return std::stoll(s);
}

int64_t parse_whole_number(const std::string& name, const std::string& s, int64_t lo, int64_t hi) {
  const std::optional<int64_t> x = parse_whole_number(s);
  if (!x || *x < lo || *x > hi)
    throw std::invalid_argument(name + " " + s + ": expected a whole number from " + std::to_string(lo) + " to " +
                                std::to_string(hi));
  return *x;
}

int64_t metadata_int(const Metadata& m, const std::string& key, const std::string& path, int64_t lo, int64_t hi) {
  auto it = m.find(key);
  if (it == m.end()) throw FormatError("checkpoint " + path + ": metadata has no '" + key + "'");
  const std::optional<int64_t> x = parse_whole_number(it->second);
  if (!x || *x < lo || *x > hi)
    throw FormatError("checkpoint " + path + ": metadata '" + key + "' is '" + it->second +
                      "', expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return *x;
}

}  // namespace xg
