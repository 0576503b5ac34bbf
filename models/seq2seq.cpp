#include "models/seq2seq.h"

#include <algorithm>

namespace xg::models {

TrainBatch make_batch(const std::vector<Example>& examples) {
  const int64_t b = static_cast<int64_t>(examples.size());
  size_t s = 1, t = 1;
  for (const auto& e : examples) s = std::max(s, e.src.size()), t = std::max(t, e.tgt.size() + 1);
  TrainBatch out;
  out.src = {std::vector<int64_t>(b * s, kPad), b, static_cast<int64_t>(s)};
  out.tgt_in = {std::vector<int64_t>(b * t, kPad), b, static_cast<int64_t>(t)};
  out.tgt_out = out.tgt_in;
  for (int64_t r = 0; r < b; ++r) {
    const auto& e = examples[r];
    std::copy(e.src.begin(), e.src.end(), out.src.ids.begin() + r * s);
    out.tgt_in.ids[r * t] = kBos;
    std::copy(e.tgt.begin(), e.tgt.end(), out.tgt_in.ids.begin() + r * t + 1);
    std::copy(e.tgt.begin(), e.tgt.end(), out.tgt_out.ids.begin() + r * t);
    out.tgt_out.ids[r * t + e.tgt.size()] = kEos;
    out.target_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
  }
  return out;
}

}  // namespace xg::models
