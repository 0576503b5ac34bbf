#include "models/config.h"

#include <unistd.h>

#include <stdexcept>

#include "models/gpt.h"
#include "models/transformer.h"

namespace xg::models {

void check_fits_in_memory(double params) {
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (16 * params > ram)
    throw std::invalid_argument("the model's " + std::to_string(static_cast<int64_t>(params)) + " parameters need " +
                                std::to_string(static_cast<int64_t>(16 * params / 1e9)) +
                                " GB with their gradients and Adam state, more than this machine's " +
                                std::to_string(static_cast<int64_t>(ram / 1e9)) + " GB");
}

void out_of_memory(const std::string& what, double parameters) {
  throw std::runtime_error("out of memory building " + what + " (" + std::to_string(static_cast<int64_t>(parameters)) +
                           " parameters)");
}

namespace {

std::string str(int64_t v) { return std::to_string(v); }


}  // namespace

Metadata TransformerConfig::to_metadata() const {
  return {{"cfg.src_vocab", str(src_vocab)}, {"cfg.tgt_vocab", str(tgt_vocab)}, {"cfg.layers", str(layers)},
          {"cfg.d_model", str(d_model)},     {"cfg.heads", str(heads)},         {"cfg.d_ff", str(d_ff)},
          {"cfg.max_len", str(max_len)},     {"cfg.pre_norm", str(pre_norm)},   {"cfg.tie_weights", str(tie_weights)}};
}

TransformerConfig TransformerConfig::from_metadata(const Metadata& m, const std::string& path) {
  using L = ModelLimits;
  TransformerConfig c;
  c.src_vocab = metadata_int(m, "cfg.src_vocab", path, 1, L::vocab);
  c.tgt_vocab = metadata_int(m, "cfg.tgt_vocab", path, 1, L::vocab);
  c.layers = metadata_int(m, "cfg.layers", path, 1, L::layers);
  c.d_model = metadata_int(m, "cfg.d_model", path, 1, L::d_model);
  c.heads = metadata_int(m, "cfg.heads", path, 1, L::heads);
  c.d_ff = metadata_int(m, "cfg.d_ff", path, 1, L::d_ff);
  c.max_len = metadata_int(m, "cfg.max_len", path, 1, L::max_len);
  c.pre_norm = metadata_int(m, "cfg.pre_norm", path, 0, 1) != 0;
  c.tie_weights = metadata_int(m, "cfg.tie_weights", path, 0, 1) != 0;
  c.dropout = 0;
  validate_read(c, path);
  return c;
}

double GPTConfig::parameter_count() const {
  const double c = static_cast<double>(d_model), f = static_cast<double>(d_ff);
  const double block = 2 * c + 4 * (c * c + c) + 2 * c + (c * f + f + f * c + c);
  const double positions = learned_positions ? static_cast<double>(max_len) * c : 0;
  return static_cast<double>(vocab) * c + positions + static_cast<double>(layers) * block + 2 * c;
}

Metadata GPTConfig::to_metadata() const {
  return {{"cfg.vocab", str(vocab)},   {"cfg.layers", str(layers)}, {"cfg.d_model", str(d_model)},
          {"cfg.heads", str(heads)},   {"cfg.d_ff", str(d_ff)},     {"cfg.max_len", str(max_len)},
          {"cfg.learned_positions", str(learned_positions)}};
}

GPTConfig GPTConfig::from_metadata(const Metadata& m, const std::string& path) {
  using L = ModelLimits;
  GPTConfig c;
  c.vocab = metadata_int(m, "cfg.vocab", path, 1, L::vocab);
  c.layers = metadata_int(m, "cfg.layers", path, 1, L::layers);
  c.d_model = metadata_int(m, "cfg.d_model", path, 1, L::d_model);
  c.heads = metadata_int(m, "cfg.heads", path, 1, L::heads);
  c.d_ff = metadata_int(m, "cfg.d_ff", path, 1, L::d_ff);
  c.max_len = metadata_int(m, "cfg.max_len", path, 1, L::max_len);
  c.learned_positions = metadata_int(m, "cfg.learned_positions", path, 0, 1) != 0;
  c.dropout = 0;
  validate_read(c, path);
  return c;
}

}  // namespace xg::models
