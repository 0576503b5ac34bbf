// libFuzzer harness: tensors loaded from arbitrary bytes into a small
// Transformer with load_state_dict (names, shapes and dtypes all checked).
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "autograd/serialize.h"
#include "fuzz/fuzz_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static xg::models::Transformer* model = new xg::models::Transformer(fuzz_model_config());
  std::map<std::string, xg::Tensor> state;
  try {
    state = xg::load_tensors_from_memory(data, size);
  } catch (const xg::FormatError&) {
    return 0;
  }
  try {
    model->load_state_dict(state);
  } catch (const std::bad_alloc&) {
    throw;  // unbounded allocation: a finding
  } catch (const std::exception&) {  // a clear error: the expected answer
  }
  return 0;
}
