// Text corpora for character-level language models: Debian's fortunes split
// deterministically, a byte vocabulary, and the batch windows both xgrad and
// the PyTorch twin (bench/char_lm.py) draw.
//
//   auto split = xg::char_lm::load_fortunes();              // /usr/share/games/fortunes
//   xg::char_lm::CharVocab vocab(split.train + split.valid);
//   std::vector<int64_t> ids = vocab.encode("Q: Why?");
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/hash.h"

namespace xg::char_lm {

using data::fnv1a64;
using data::splitmix64;

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// Every fortune file of `dir` (the files without a '.', in name order: the
// .dat indexes and .u8 links are skipped) cut into records at lines holding a
// single '%'. A record goes to the validation split when fnv1a64(record) % 100
// < valid_percent, else to training: the split does not depend on file order
// and a fortune never straddles the two. Each split is its records, each
// followed by "%\n". Throws std::runtime_error naming the directory when it
// holds no fortune file (install Debian's `fortunes` package).
struct TextSplit {
  std::string train, valid;
  int64_t train_records = 0, valid_records = 0, files = 0;
};
TextSplit load_fortunes(const std::string& dir = kFortunesDir, int valid_percent = 10);
// One fortune file's text cut into records and added to `split` as above
// (load_fortunes calls it for each file; the fuzzer for any bytes).
void add_records(std::string_view text, int valid_percent, TextSplit& split);


// The bytes that occur in a text, sorted: id i is the i-th smallest byte.
class CharVocab {
 public:
  explicit CharVocab(std::string_view text);
  // From the stored form of to_string() (a checkpoint's metadata); throws
  // std::invalid_argument if malformed.
  static CharVocab from_string(const std::string& s);
  std::string to_string() const;  // the byte values, space-separated ("10 32 33 ...")
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  bool contains(unsigned char c) const { return index_[c] >= 0; }
  // Throws std::invalid_argument naming the first byte outside the vocabulary
  // and its position.
  std::vector<int64_t> encode(std::string_view s) const;
  std::string decode(const std::vector<int64_t>& ids) const;  // ids outside [0, size) throw

 private:
  CharVocab() = default;
  std::string chars_;
  int index_[256];
};

// The start of row b of step's batch (steps count from 1): a window of
// `length` + 1 characters of a text of n characters,
// splitmix64(seed ^ splitmix64(step * batch + b)) % (n - length). The same
// formula in bench/char_lm.py gives PyTorch the same data order.
int64_t window_start(uint64_t seed, int64_t step, int64_t batch, int64_t b, int64_t n, int64_t length);

}  // namespace xg::char_lm
