// libFuzzer harness: the CMUdict parser of apps/g2p (Festival's lexicon
// format) on arbitrary bytes, then the scoring of what it parsed against
// itself. A FormatError naming the line is the expected answer to bad input;
// a crash, a sanitizer report, a hang or an allocation past libFuzzer's limit
// is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "apps/g2p/cmudict.h"
#include "autograd/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  xg::g2p::CmuDict dict;
  try {
    dict = xg::g2p::parse_cmudict(in, "<fuzz>");
  } catch (const xg::FormatError&) {
    return 0;
  }
  // Every pronunciation scored against its word's: a perfect score.
  std::vector<std::vector<std::string>> outputs;
  std::vector<std::vector<std::vector<std::string>>> references;
  for (const auto& [word, prons] : dict.prons) {
    if (prons.empty()) __builtin_trap();
    for (const auto& p : prons) {
      for (const auto& phone : p) xg::g2p::strip_stress(phone), xg::g2p::is_vowel(phone);
      outputs.push_back(p);
      references.push_back(prons);
    }
  }
  const xg::g2p::G2PScores s = xg::g2p::score_g2p(outputs, references);
  if (!outputs.empty() && (s.wer != 0 || s.per != 0)) __builtin_trap();
  return 0;
}
