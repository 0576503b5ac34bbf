// Embedding: a lookup table (V, C); ids of any shape -> (ids_shape..., C).
#pragma once

#include <optional>
#include <vector>

#include "nn/module.h"

namespace xg::nn {

// A learned table of num vectors of width dim, looked up by id.
class Embedding : public Module {
 public:
  // weight (num, dim) ~ N(0, init_std^2) (PyTorch's N(0, 1) by default;
  // GPT-2 uses 0.02); the padding row, if padding_idx is given, is zeroed
  // and never receives a gradient. padding_idx lies in [-num, num), a
  // negative one counting from the end (-1: the last row), as in PyTorch.
  Embedding(int64_t num, int64_t dim, Generator& gen, std::optional<int64_t> padding_idx = std::nullopt,
            double init_std = 1.0);
  // The same drawing from default_generator().
  Embedding(int64_t num, int64_t dim, std::optional<int64_t> padding_idx = std::nullopt, double init_std = 1.0)
      : Embedding(num, dim, default_generator(), padding_idx, init_std) {}
  // Throws ShapeError naming Embedding, the bad id and the vocabulary size.
  Tensor forward(const std::vector<int64_t>& ids, const Shape& ids_shape);
  // The same with the ids held in an int64 tensor (as in a Sequential); a
  // float tensor throws ShapeError.
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override;  // "Embedding(num=.., dim=..)"

  int64_t num_embeddings() const { return num_; }      // V
  int64_t embedding_dim() const { return dim_; }       // C
  std::optional<int64_t> padding_idx() const { return padding_idx_; }  // in [0, num), or none
  // (V, C), the parameter "weight" itself: assigning another module's
  // parameter to it ties the two (wte->weight() = lm_head->weight()), one
  // tensor under both names.
  Tensor& weight() { return *weight_; }

 private:
  int64_t num_, dim_;
  std::optional<int64_t> padding_idx_;
  Tensor* weight_;  // the registered entry, so that an assignment re-registers
};

}  // namespace xg::nn
