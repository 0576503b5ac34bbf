// IDX files, the format of MNIST and Fashion-MNIST: a magic number naming
// the element type and the rank, the dimensions as big-endian 32-bit
// integers, then the elements. Read plain or gzip-compressed (zlib).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xg::data {

// An IDX array of unsigned bytes (type 0x08, the only one the image sets use).
struct IdxArray {
  std::vector<int64_t> shape;  // e.g. (60000, 28, 28) images or (60000) labels
  std::vector<uint8_t> values;  // row-major, the product of shape's values
};

// Reads `path` (gzip-compressed or not). Throws xg::FormatError naming the
// file and what is wrong: not IDX, another element type, a rank outside
// [1, 4], a dimension of 0, values missing or left over, or more than
// `max_bytes` once decompressed.
IdxArray read_idx(const std::string& path, int64_t max_bytes = int64_t{1} << 31);
// The same on bytes in memory; `name` is what the errors call them.
IdxArray parse_idx(const std::string& bytes, const std::string& name, int64_t max_bytes = int64_t{1} << 31);

}  // namespace xg::data
