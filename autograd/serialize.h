// Named tensors on disk in the safetensors format: an 8-byte little-endian
// header length, a JSON header {"name": {"dtype", "shape", "data_offsets"}},
// then the raw little-endian data. Files load in PyTorch and NumPy too.
#pragma once

#include <map>
#include <string>

#include "autograd/tensor.h"

namespace xg {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes atomically: a temporary file beside `path`, flushed, then renamed,
// so a crash mid-write leaves any previous file intact. `metadata` goes into
// the header's "__metadata__" (string values only, as the format says).
void save_tensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                  const std::map<std::string, std::string>& metadata = {});
// Reads and validates everything: header size and JSON, dtypes (F32, F64),
// shapes against byte ranges, ranges inside the file and not overlapping.
// Throws FormatError naming the file, the key or the byte offset.
std::map<std::string, Tensor> load_tensors(const std::string& path,
                                           std::map<std::string, std::string>* metadata = nullptr);

}  // namespace xg
