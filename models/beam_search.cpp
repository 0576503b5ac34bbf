#include "models/beam_search.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"

namespace xg::models {

std::vector<Hypothesis> beam_search_steps(const BeamDecoder& decoder, int64_t bos, int64_t eos, int64_t max_len,
                                          int64_t beam_size, double alpha) {
  if (beam_size < 1) throw std::invalid_argument("beam_search: beam_size must be at least 1, got " + std::to_string(beam_size));
  struct Hyp {
    std::vector<int64_t> toks;  // without BOS and EOS
    double logp = 0;
    bool done = false;
    int64_t row = 0;  // its row in the decoder's state (live beams only)
  };
  auto penalty = [alpha](size_t len) { return std::pow((5.0 + static_cast<double>(len)) / 6.0, alpha); };
  auto score = [&](const Hyp& h) { return h.logp / penalty(h.toks.size() + (h.done ? 1 : 0)); };
  std::vector<Hyp> beams{Hyp{}};
  for (int64_t step = 0; step < max_len; ++step) {
    std::vector<const Hyp*> alive;
    for (const Hyp& h : beams)
      if (!h.done) alive.push_back(&h);
    if (alive.empty()) break;
    // State rows follow `alive`: keep the rows of the live beams, in order.
    std::vector<int64_t> rows;
    for (const Hyp* h : alive) rows.push_back(h->row);
    decoder.select_rows(rows);
    std::vector<int64_t> feed;
    for (const Hyp* h : alive) feed.push_back(h->toks.empty() ? bos : h->toks.back());
    Tensor logp = log_softmax(decoder.step(feed), -1);  // (k,V)
    const int64_t v = logp.size(1);
    std::vector<double> lp = logp.to_vector();
    std::vector<Hyp> cand;
    for (const Hyp& h : beams)
      if (h.done) cand.push_back(h);
    for (size_t i = 0; i < alive.size(); ++i)
      for (int64_t t = 0; t < v; ++t) {
        Hyp h = *alive[i];
        h.logp += lp[i * v + t];
        h.row = static_cast<int64_t>(i);
        if (t == eos) h.done = true;
        else h.toks.push_back(t);
        cand.push_back(std::move(h));
      }
    std::stable_sort(cand.begin(), cand.end(), [&](const Hyp& a, const Hyp& b) { return score(a) > score(b); });
    cand.resize(std::min<size_t>(cand.size(), beam_size));
    beams = std::move(cand);
  }
  std::stable_sort(beams.begin(), beams.end(), [&](const Hyp& a, const Hyp& b) { return score(a) > score(b); });
  std::vector<Hypothesis> out;
  for (const Hyp& h : beams) out.push_back({h.toks, h.logp, score(h), h.done});
  return out;
}

}  // namespace xg::models
