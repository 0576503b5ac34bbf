// The small Transformer of the module-loader harness, shared with make_seeds
// so that its seed state_dict always matches the model the harness loads into.
#pragma once

#include "models/transformer.h"

inline xg::models::TransformerConfig fuzz_model_config() {
  xg::models::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 8;
  c.layers = 1;
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 16;
  c.max_len = 16;
  return c;
}
