// The one way xgrad's constructors and option checks refuse a value: a
// std::invalid_argument whose message names the field, the value and the
// accepted range ("warmup 10 must be below steps 10").
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace xg {

// Throws std::invalid_argument(prefix + what) unless `ok`.
inline void require(bool ok, const std::string& what, const char* prefix = "") {
  if (!ok) throw std::invalid_argument(prefix + what);
}

// A padding index as torch.nn.Embedding and embedding_bag take it: none, or
// in [-num, num), a negative one counting from the end (-1: the last row).
// Returns it in [0, num), or none; throws naming `op` otherwise.
inline std::optional<int64_t> padding_index(const std::string& op, std::optional<int64_t> idx, int64_t num) {
  if (!idx) return idx;
  require(*idx >= -num && *idx < num,
          op + ": padding_idx " + std::to_string(*idx) + ": expected in [" + std::to_string(-num) + ", " +
              std::to_string(num) + ") (a negative one counts from the end, as in PyTorch), or none");
  return *idx < 0 ? *idx + num : *idx;
}

}  // namespace xg
