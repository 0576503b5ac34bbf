#include "apps/seq2seq/tasks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/ops.h"

namespace xg::seq2seq {

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

EvalResult evaluate(models::Seq2SeqModel& model, const std::vector<Example>& set, int64_t batch_size,
                    int64_t n_samples) {
  EvalResult r;
  int64_t exact = 0, right = 0, positions = 0;
  for (size_t at = 0; at < set.size(); at += batch_size) {
    std::vector<Example> part(set.begin() + at, set.begin() + std::min(set.size(), at + batch_size));
    TrainBatch b = make_batch(part);
    int64_t longest = 0;
    for (const auto& e : part) longest = std::max<int64_t>(longest, e.tgt.size());
    auto outs = model.greedy(b.src, longest + 5);
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

}  // namespace xg::seq2seq
