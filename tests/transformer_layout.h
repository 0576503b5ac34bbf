// models::Transformer's state dict in the layout it had before it was built
// on nn's Transformer layers, for the tests that load such files.
#pragma once

#include <map>
#include <string>

#include "autograd/ops.h"
#include "autograd/tensor.h"

namespace xgt {

// `state` (today's keys, each under `prefix`, such as "model.") in the
// earlier layout, written here from that layout's description rather than
// from the model's upgrade code: its own layer classes named
// encoder.I.self_attn.w_q/w_k/w_v/w_o, ff.linear1/linear2, cross_attn for
// the decoder's attention to the memory, enc_norm and dec_norm. d_model
// splits in_proj into its three (C, C) and (C) pieces.
inline std::map<std::string, xg::Tensor> earlier_layout(const std::map<std::string, xg::Tensor>& state,
                                                        int64_t d_model, const std::string& prefix = "") {
  std::map<std::string, xg::Tensor> old;
  for (const auto& [full, t] : state) {
    if (full.compare(0, prefix.size(), prefix) != 0) {
      old[full] = t;
      continue;
    }
    const std::string key = full.substr(prefix.size());
    std::string k = key;
    auto swap = [&](const std::string& from, const std::string& to) {
      const size_t at = k.find(from);
      if (at != std::string::npos) k.replace(at, from.size(), to);
    };
    swap("encoder.layers.", "encoder.");
    swap("decoder.layers.", "decoder.");
    swap("multihead_attn", "cross_attn");
    if (key.rfind("out_proj.", 0) != 0) swap("out_proj.", "w_o.");  // the attention's, not the model's own
    swap("linear1", "ff.linear1");
    swap("linear2", "ff.linear2");
    swap("encoder.norm.", "enc_norm.");
    swap("decoder.norm.", "dec_norm.");
    const size_t in_proj = k.find("in_proj_");
    if (in_proj == std::string::npos) {
      old[prefix + k] = t;
      continue;
    }
    const std::string base = k.substr(0, in_proj), what = k.substr(in_proj + 8);  // "weight" or "bias"
    const char* names[] = {"w_q.", "w_k.", "w_v."};
    for (int i = 0; i < 3; ++i)
      old[prefix + base + names[i] + what] = xg::slice(t, 0, i * d_model, (i + 1) * d_model).detach();
  }
  return old;
}

}  // namespace xgt
