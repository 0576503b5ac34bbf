// libFuzzer harness: the IDX reader of data/ (MNIST's format, plain or
// gzip) on arbitrary bytes. A FormatError is the expected answer to bad
// input; a crash, a sanitizer report, a hang or an allocation past
// libFuzzer's limit is a finding, and so is an array whose values do not
// match its shape.
#include <cstddef>
#include <cstdint>
#include <string>

#include "autograd/serialize.h"
#include "data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xg::data::IdxArray a;
  try {
    // 64 MiB: the harness's bound on a decompressed file (a gzip bomb is refused, not a finding).
    a = xg::data::parse_idx(std::string(reinterpret_cast<const char*>(data), size), "<fuzz>", int64_t{1} << 26);
  } catch (const xg::FormatError&) {
    return 0;
  }
  int64_t n = 1;
  for (int64_t d : a.shape) n *= d;
  if (a.shape.empty() || a.shape.size() > 4 || n != static_cast<int64_t>(a.values.size())) __builtin_trap();
  return 0;
}
