// Ops on int64 ids that make float tensors: id_mask (a padding mask), for a
// model whose padding an exported graph must compute from its id inputs.
#include "autograd/detail/impl.h"
#include "autograd/ops.h"

namespace xg {

Tensor id_mask(const Tensor& ids, int64_t id, Dtype dtype) {
  check_defined_any(ids, "id_mask");
  if (ids.dtype() != Dtype::i64)
    throw ShapeError("id_mask: expected int64 ids, got " + std::string(dtype_name(ids.dtype())) + " " +
                     shape_str(ids.shape()));
  if (dtype == Dtype::i64) throw std::invalid_argument("id_mask: the mask's dtype must be float32 or float64, not int64");
  std::vector<double> m(static_cast<size_t>(ids.numel()));
  const int64_t* p = ids.data<int64_t>();
  for (size_t i = 0; i < m.size(); ++i) m[i] = p[i] == id ? 1.0 : 0.0;
  // No tape input (ids have no gradient): record() only lists it in an
  // export trace, where the ids are its extra tensor.
  Tensor out = record("id_mask", from_vector(m, ids.shape(), dtype), {}, [](const Tensor&) { return std::vector<Tensor>{}; });
  return detail::traced(out, [&](TracedOp& t) {
    t.attrs = attr::Id{id};
    t.extra = {ids};
  });
}

}  // namespace xg
