// Label smoothing as the applications take it (seq2seq, g2p, vision): one
// range and one check, behind their options' validate() and the command
// line's --smoothing (cli::add_smoothing).
#pragma once

#include <fmt/format.h>

#include <string>

#include "autograd/require.h"

namespace xg::apps {

// The largest label smoothing accepted: at 1 the target would be uniform
// over the classes and no longer say which one is right.
inline constexpr double kMaxLabelSmoothing = 0.999;

// Throws std::invalid_argument(prefix + "label_smoothing E: expected a number
// from 0 to 0.999") unless 0 <= e <= kMaxLabelSmoothing (NaN is refused).
inline void check_label_smoothing(double e, const char* prefix = "") {
  require(e >= 0 && e <= kMaxLabelSmoothing,
          fmt::format("label_smoothing {}: expected a number from 0 to {:g}", e, kMaxLabelSmoothing), prefix);
}

}  // namespace xg::apps
