// bf16 mixed precision, as torch.autocast on the CPU. Inside a scope
//
//   { xg::Autocast guard(xg::bf16); Tensor loss = loss_of(model(x)); }
//   loss.backward();
//
// matrix products of float32 tensors (matmul, linear) take bf16 inputs and
// accumulate and return float32; their backward products run in bf16 too, and
// they save bf16 copies of their inputs for backward (half the bytes), one
// copy per tensor however many products save it. Everything else (softmax,
// layer norm, losses, reductions, elementwise ops, the attention core, and
// the ops built on products that PyTorch's autocast leaves in float32:
// interpolate, bilinear, cross_map_lrn2d,
// multilabel_margin_loss) runs in float32, as do parameters, gradients and
// optimiser state; of those, the attention core saves bf16 copies of q, k
// and v too and widens them again in backward. float64 tensors are never
// cast (gradient checks stay exact). Second order (create_graph) through an op that saved bf16 copies
// throws.
// The scope is per thread, like grad mode, and nests.
#pragma once

#include <string>

namespace xg {

// The precision of matrix products: f32 throughout, or bf16 inputs with
// float32 accumulation.
enum class Precision { f32, bf16 };
inline constexpr Precision bf16 = Precision::bf16;  // xg::bf16, as in Autocast guard(xg::bf16)
const char* precision_name(Precision p);  // "f32", "bf16"
// "f32" or "bf16" (also "float32", "bfloat16"); throws std::invalid_argument
// naming the accepted values otherwise.
Precision parse_precision(const std::string& s);

// The precision of matrix products on this thread: bf16 inside an Autocast(bf16) scope.
Precision autocast_precision();

// Empty if bf16 products run at full speed here (oneDNN build, a CPU with
// AVX512_BF16 or AMX); otherwise why not, naming the missing CPU feature.
std::string bf16_unsupported_reason();

// RAII: while it is alive, matrix products on this thread run in precision
// `p`; the previous precision comes back when it ends. Scopes nest.
class Autocast {
 public:
  // Throws std::runtime_error with bf16_unsupported_reason() when asked for
  // bf16 where it would be slow: never a silent fallback to float32 (unless
  // engine::set_bf16_emulation(true) asked for slow bf16 on purpose).
  explicit Autocast(Precision p = Precision::bf16);
  ~Autocast();  // restores the precision in force before
  // Not copyable: a scope guard.
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  Precision prev_;
};

}  // namespace xg
