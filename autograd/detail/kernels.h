// Private to autograd/*.cpp: the dropout hash, shared by dropout and the
// fused attention op.
#pragma once

#include <cstdint>

namespace xg::detail {

// Dropout's keep decision for element i under a 64-bit key: murmur3's 32-bit
// finaliser of (i ^ key_hi) * golden + key_lo, kept where it is at least
// p * 2^32 (see dropout_threshold). Branch-free, so loops over it vectorise.
// Indices are taken modulo 2^32: in one tensor of more than 4G elements the
// mask would repeat.
inline uint32_t dropout_hash(uint32_t i, uint32_t key_lo, uint32_t key_hi) {
  uint32_t h = (i ^ key_hi) * 0x9e3779b1u + key_lo;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
inline uint64_t dropout_threshold(double p) {
  const double limit = p * 4294967296.0;
  return limit >= 4294967296.0 ? (uint64_t{1} << 32) : static_cast<uint64_t>(limit);
}

}  // namespace xg::detail
