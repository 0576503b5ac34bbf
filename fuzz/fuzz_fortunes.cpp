// libFuzzer harness: the text-corpus reader of apps/char_lm on arbitrary
// bytes (one fortune file cut into records and split), then the byte
// vocabulary: built from the text, encode and decode give the text back, and
// its stored form (a checkpoint's metadata) read back, or refused, on bytes.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "apps/char_lm/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  xg::char_lm::TextSplit split;
  xg::char_lm::add_records(text, 10, split);
  // Every record lands in one split, ends with "%\n", and nothing is invented.
  if (split.train.size() + split.valid.size() > size + 3 * (split.train_records + split.valid_records))
    __builtin_trap();
  if (!split.train.empty() && split.train.compare(split.train.size() - 2, 2, "%\n") != 0) __builtin_trap();

  if (text.empty()) return 0;  // CharVocab refuses an empty text (its documented error)
  const xg::char_lm::CharVocab vocab(text);
  if (vocab.decode(vocab.encode(text)) != text) __builtin_trap();
  if (xg::char_lm::CharVocab::from_string(vocab.to_string()).to_string() != vocab.to_string()) __builtin_trap();
  try {
    xg::char_lm::CharVocab::from_string(text);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
