#include "apps/char_lm/text.h"

#include <dirent.h>
#include <sys/stat.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace xg::char_lm {

int64_t window_start(uint64_t seed, int64_t step, int64_t batch, int64_t b, int64_t n, int64_t length) {
  if (n <= length)
    throw std::invalid_argument(
        fmt::format("window_start: a text of {} characters has no window of {} + 1", n, length));
  const uint64_t k = static_cast<uint64_t>(step) * static_cast<uint64_t>(batch) + static_cast<uint64_t>(b);
  return static_cast<int64_t>(splitmix64(seed ^ splitmix64(k)) % static_cast<uint64_t>(n - length));
}

void add_records(std::string_view text, int valid_percent, TextSplit& split) {
  // Records end at a line "%" (or at the end of the text).
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = begin, next = text.size();
    while (true) {
      const size_t nl = text.find('\n', end);
      const size_t line_end = nl == std::string_view::npos ? text.size() : nl;
      const std::string_view line = text.substr(end, line_end - end);
      if (line == "%" || line == "%\r") {  // a file with CRLF line ends too
        next = nl == std::string_view::npos ? text.size() : nl + 1;
        break;
      }
      if (nl == std::string_view::npos) {
        end = text.size();
        break;
      }
      end = nl + 1;
    }
    const std::string_view record = text.substr(begin, end - begin);
    begin = next;
    if (record.find_first_not_of(" \t\r\n") == std::string_view::npos) continue;  // empty record
    const bool valid = fnv1a64(record) % 100 < static_cast<uint64_t>(valid_percent);
    std::string& out = valid ? split.valid : split.train;
    out.append(record);
    if (record.back() != '\n') out += '\n';
    out += "%\n";
    ++(valid ? split.valid_records : split.train_records);
  }
}

TextSplit load_fortunes(const std::string& dir, int valid_percent) {
  if (valid_percent < 0 || valid_percent > 100)
    throw std::invalid_argument(fmt::format("load_fortunes: valid_percent {}: expected 0 to 100", valid_percent));
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d && errno == ENOTDIR) throw std::runtime_error("load_fortunes: " + dir + " is not a folder");
  if (!d)
    throw std::runtime_error("load_fortunes: no fortune file in " + dir +
                             " (install Debian's fortunes package: apt-get install fortunes)");
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    struct stat st;
    // Fortune files: regular files without a dot in their name (not the .dat indexes).
    if (name.find('.') == std::string::npos && ::stat((dir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode))
      names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  TextSplit split;
  for (const std::string& name : names) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    if (!in) continue;  // an unreadable file is not a fortune file
    std::ostringstream buf;
    buf << in.rdbuf();
    ++split.files;
    add_records(buf.str(), valid_percent, split);
  }
  if (split.files == 0)
    throw std::runtime_error("load_fortunes: no fortune file in " + dir +
                             " (install Debian's fortunes package: apt-get install fortunes)");
  if (split.train_records + split.valid_records == 0)
    throw std::runtime_error(fmt::format("load_fortunes: the {} fortune file{} in {} hold no text", split.files,
                                         split.files == 1 ? "" : "s", dir));
  return split;
}

CharVocab::CharVocab(std::string_view text) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  std::fill(index_, index_ + 256, -1);
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      index_[c] = static_cast<int>(chars_.size());
      chars_ += static_cast<char>(c);
    }
  if (chars_.empty()) throw std::invalid_argument("CharVocab: an empty text has no characters");
}

std::string CharVocab::to_string() const {
  std::string s;
  for (unsigned char c : chars_) s += (s.empty() ? "" : " ") + std::to_string(c);
  return s;
}

CharVocab CharVocab::from_string(const std::string& s) {
  CharVocab v;
  std::fill(v.index_, v.index_ + 256, -1);
  std::istringstream in(s);
  std::string word;
  int last = -1;
  while (in >> word) {
    const bool digits = !word.empty() && word.size() <= 3 && word.find_first_not_of("0123456789") == std::string::npos;
    const int c = digits ? std::stoi(word) : -1;
    if (c < 0 || c > 255 || c <= last)
      throw std::invalid_argument("CharVocab: '" + word + "' in the stored vocabulary is not a byte value above the "
                                  "previous one (expected increasing numbers 0 to 255)");
    v.index_[c] = static_cast<int>(v.chars_.size());
    v.chars_ += static_cast<char>(c);
    last = c;
  }
  if (v.chars_.empty()) throw std::invalid_argument("CharVocab: the stored vocabulary is empty");
  return v;
}

std::vector<int64_t> CharVocab::encode(std::string_view s) const {
  std::vector<int64_t> ids;
  ids.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (index_[c] < 0)
      throw std::invalid_argument(fmt::format(
          "{} at position {} is not in the vocabulary of {} characters",
          c >= 32 && c < 127 ? fmt::format("character '{}' (byte {})", static_cast<char>(c), static_cast<int>(c))
                             : fmt::format("byte {}", static_cast<int>(c)),
          i, chars_.size()));
    ids.push_back(index_[c]);
  }
  return ids;
}

std::string CharVocab::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  s.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= size())
      throw std::invalid_argument(fmt::format("CharVocab::decode: id {} is outside [0, {})", id, size()));
    s += chars_[static_cast<size_t>(id)];
  }
  return s;
}

}  // namespace xg::char_lm
