// libFuzzer harness: the safetensors loader on arbitrary bytes, then the
// checkpoint metadata readers (a Transformer's and a GPT's configuration,
// train_tasks' task) on whatever metadata loaded. A clear exception
// is the expected answer to bad input; a crash, a sanitizer report, a hang or
// an allocation past libFuzzer's limit is a finding.
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "autograd/serialize.h"
#include "apps/seq2seq/seq2seq.h"
#include "models/gpt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> meta;
  try {
    xg::load_tensors_from_memory(data, size, &meta);
  } catch (const xg::FormatError&) {
    return 0;
  }
  try {
    xg::seq2seq::read_checkpoint_info(meta, "<memory>");
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
  }
  try {
    xg::models::GPTConfig::from_metadata(meta, "<memory>");
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
  }
  return 0;
}
