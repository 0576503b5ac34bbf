#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>

#include "autograd/serialize.h"

namespace xg::data {

namespace {

[[noreturn]] void refuse(const std::string& name, const std::string& what) {
  throw FormatError(name + ": not an IDX file of unsigned bytes: " + what);
}

// gzip's bytes inflated, at most max_bytes of them; other bytes unchanged.
std::string gunzip(const std::string& bytes, const std::string& name, int64_t max_bytes) {
  if (bytes.size() < 2 || static_cast<uint8_t>(bytes[0]) != 0x1f || static_cast<uint8_t>(bytes[1]) != 0x8b)
    return bytes;
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw FormatError(name + ": zlib could not start");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(bytes.size(), UINT32_MAX));
  std::string out;
  // gzip's last 4 bytes give the inflated size (mod 2^32): reserving it once
  // spares the doublings, whose peak is up to three times the data.
  if (bytes.size() >= 18) {
    const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[bytes.size() - 4 + i])); };
    out.reserve(std::min<size_t>(b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24, static_cast<size_t>(max_bytes)));
  }
  char chunk[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      throw FormatError(name + ": damaged gzip data (" + std::string(z.msg ? z.msg : "truncated") + ")");
    }
    out.append(chunk, sizeof chunk - z.avail_out);
    if (static_cast<int64_t>(out.size()) > max_bytes) {
      inflateEnd(&z);
      throw FormatError(name + ": more than " + std::to_string(max_bytes) + " bytes once decompressed");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      throw FormatError(name + ": the gzip data ends early");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace

IdxArray parse_idx(const std::string& raw, const std::string& name, int64_t max_bytes) {
  const std::string bytes = gunzip(raw, name, max_bytes);
  auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (bytes.size() < 4 || byte(0) != 0 || byte(1) != 0)
    refuse(name, "it does not start with the IDX magic number 00 00 TYPE RANK");
  if (byte(2) != 0x08) refuse(name, "element type " + std::to_string(byte(2)) + " (only 8, unsigned byte, is read)");
  const size_t rank = byte(3);
  if (rank < 1 || rank > 4) refuse(name, "rank " + std::to_string(rank) + " (expected 1 to 4)");
  if (bytes.size() < 4 + 4 * rank) refuse(name, "the dimensions are cut short");
  IdxArray a;
  int64_t n = 1;
  for (size_t d = 0; d < rank; ++d) {
    const size_t at = 4 + 4 * d;
    const int64_t size = (int64_t{byte(at)} << 24) | (byte(at + 1) << 16) | (byte(at + 2) << 8) | byte(at + 3);
    if (size == 0) refuse(name, "dimension " + std::to_string(d) + " is 0");
    if (size > max_bytes / n) refuse(name, "more than " + std::to_string(max_bytes) + " values");
    n *= size;
    a.shape.push_back(size);
  }
  const size_t header = 4 + 4 * rank;
  if (bytes.size() - header != static_cast<size_t>(n))
    refuse(name, "the dimensions give " + std::to_string(n) + " values, the file holds " +
                     std::to_string(bytes.size() - header));
  a.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return a;
}

IdxArray read_idx(const std::string& path, int64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot open the file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw FormatError(path + ": cannot read the file");
  return parse_idx(bytes, path, max_bytes);
}

}  // namespace xg::data
