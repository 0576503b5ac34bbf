// libFuzzer harness: optimiser state from arbitrary bytes into Adam and SGD
// (every integer field must be checked as a finite whole number in range).
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "autograd/serialize.h"
#include "optim/optim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<xg::Tensor>* params = [] {
    auto* p = new std::vector<xg::Tensor>{xg::zeros({3, 2}), xg::zeros({2})};
    for (auto& t : *p) t.requires_grad_(true);
    return p;
  }();
  std::map<std::string, xg::Tensor> state;
  try {
    state = xg::load_tensors_from_memory(data, size);
  } catch (const xg::FormatError&) {
    return 0;
  }
  xg::optim::Adam adam(*params, xg::optim::AdamOptions{});
  try {
    adam.load_state_dict(state);
  } catch (const std::bad_alloc&) {
    throw;  // unbounded allocation: a finding
  } catch (const std::exception&) {  // a clear error: the expected answer
  }
  xg::optim::SGD sgd(*params, xg::optim::SGDOptions{});
  try {
    sgd.load_state_dict(state);
  } catch (const std::bad_alloc&) {
    throw;  // unbounded allocation: a finding
  } catch (const std::exception&) {  // a clear error: the expected answer
  }
  return 0;
}
