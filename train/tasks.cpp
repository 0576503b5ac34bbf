#include "train/tasks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/ops.h"

namespace xg::train {

Task parse_task(const std::string& s) {
  if (s == "copy") return Task::copy;
  if (s == "reverse") return Task::reverse;
  throw std::invalid_argument("unknown task '" + s + "' (expected copy or reverse)");
}

const char* task_name(Task t) { return t == Task::copy ? "copy" : "reverse"; }

void TaskConfig::validate() const {
  if (vocab <= kFirstSymbol)
    throw std::invalid_argument("task: vocab " + std::to_string(vocab) + " leaves no symbols after the " +
                                std::to_string(kFirstSymbol) + " special tokens");
  if (min_len < 1 || max_len < min_len)
    throw std::invalid_argument("task: need 1 <= min_len <= max_len, got " + std::to_string(min_len) + " and " +
                                std::to_string(max_len));
}

Example sample(const TaskConfig& cfg, Generator& gen) {
  const int64_t span = cfg.max_len - cfg.min_len + 1;
  const int64_t len = cfg.min_len + static_cast<int64_t>(gen.engine()() % static_cast<uint64_t>(span));
  Example e;
  for (int64_t i = 0; i < len; ++i)
    e.src.push_back(kFirstSymbol + static_cast<int64_t>(gen.engine()() % static_cast<uint64_t>(cfg.vocab - kFirstSymbol)));
  e.tgt = e.src;
  if (cfg.task == Task::reverse) std::reverse(e.tgt.begin(), e.tgt.end());
  return e;
}

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

EvalResult evaluate(models::Transformer& model, const std::vector<Example>& set, int64_t batch_size,
                    int64_t n_samples) {
  EvalResult r;
  int64_t exact = 0, right = 0, positions = 0;
  for (size_t at = 0; at < set.size(); at += batch_size) {
    std::vector<Example> part(set.begin() + at, set.begin() + std::min(set.size(), at + batch_size));
    TrainBatch b = make_batch(part);
    int64_t longest = 0;
    for (const auto& e : part) longest = std::max<int64_t>(longest, e.tgt.size());
    auto outs = models::greedy_decode(model, b.src, kBos, kEos, longest + 5);
    for (size_t i = 0; i < part.size(); ++i) {
      const auto& want = part[i].tgt;
      const auto& got = outs[i];
      exact += got == want;
      // positions 0..len(want): the symbols, then EOS (got ends where EOS was emitted)
      for (size_t p = 0; p <= want.size(); ++p) {
        const int64_t w = p < want.size() ? want[p] : kEos;
        const int64_t g = p < got.size() ? got[p] : (p == got.size() ? kEos : -1);
        right += w == g;
      }
      positions += static_cast<int64_t>(want.size()) + 1;
      if (static_cast<int64_t>(r.samples.size()) < n_samples) r.samples.emplace_back(part[i], got);
    }
  }
  r.exact_match = set.empty() ? 0 : static_cast<double>(exact) / set.size();
  r.token_acc = positions ? static_cast<double>(right) / positions : 0;
  return r;
}

}  // namespace xg::train
