// The one way xgrad's constructors and option checks refuse a value: a
// std::invalid_argument whose message names the field, the value and the
// accepted range ("warmup 10 must be below steps 10").
#pragma once

#include <stdexcept>
#include <string>

namespace xg {

// Throws std::invalid_argument(prefix + what) unless `ok`.
inline void require(bool ok, const std::string& what, const char* prefix = "") {
  if (!ok) throw std::invalid_argument(prefix + what);
}

}  // namespace xg
