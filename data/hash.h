// Deterministic hashes for data: splits that do not depend on file order,
// batch draws that another language can reproduce.
#pragma once

#include <cstdint>
#include <string_view>

namespace xg::data {

uint64_t fnv1a64(std::string_view s);  // 64-bit FNV-1a
uint64_t splitmix64(uint64_t x);       // one step of SplitMix64 (a 64-bit mix)

}  // namespace xg::data
