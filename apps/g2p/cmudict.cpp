#include "apps/g2p/cmudict.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <stdexcept>

#include "autograd/serialize.h"
#include "data/hash.h"

namespace xg::g2p {

// ---- the dictionary -----------------------------------------------------------

namespace {

// A cursor over one line of the lexicon; every error names the line and column.
struct LineParser {
  const std::string& s;
  const std::string& name;
  int64_t line;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& what) const {
    const std::string got = i < s.size() ? quote_text(s.substr(i, 1)) : std::string("the end of the line");
    throw FormatError(fmt::format("{}: line {}: {} at column {}, got {}", name, line, what, i + 1, got));
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
  }
  bool at(char c) {
    ws();
    return i < s.size() && s[i] == c;
  }
  void expect(char c) {
    if (!at(c)) fail(fmt::format("expected '{}'", c));
    ++i;
  }
  std::string quoted() {
    expect('"');
    const size_t end = s.find('"', i);
    if (end == std::string::npos) fail("a word without its closing '\"'");
    std::string w = s.substr(i, end - i);
    i = end + 1;
    return w;
  }
  std::string atom() {  // letters, digits, '_' and '-'
    ws();
    const size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '-')) ++i;
    if (i == b) fail("expected a name");
    return s.substr(b, i - b);
  }
};

}  // namespace

bool is_vowel(const std::string& phone) {
  static const std::set<std::string> vowels = {"aa", "ae", "ah", "ao", "aw", "ax", "ay", "eh",
                                               "er", "ey", "ih", "iy", "ow", "oy", "uh", "uw"};
  return vowels.count(strip_stress(phone)) > 0;
}

std::string strip_stress(const std::string& phone) {
  std::string p = phone;
  while (!p.empty() && std::isdigit(static_cast<unsigned char>(p.back()))) p.pop_back();
  return p;
}

bool g2p_held_out(const std::string& word) { return data::fnv1a64(word) % 10 == 0; }

CmuDict parse_cmudict(std::istream& in, const std::string& name) {
  CmuDict d;
  std::string s;
  int64_t line = 0;
  bool header_seen = false;
  while (std::getline(in, s)) {
    ++line;
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!header_seen && s.rfind("MNCL", 0) == 0) {
      header_seen = true;
      continue;
    }
    header_seen = true;
    LineParser p{s, name, line};
    p.expect('(');
    std::string word = p.quoted();
    if (word.empty()) p.fail("an empty word");
    if (word.size() > kMaxLetters)
      throw FormatError(fmt::format("{}: line {}: a word of {} letters, more than the {} a dictionary word may have", name,
                                    line, word.size(), kMaxLetters));
    for (char& c : word) {
      if (static_cast<unsigned char>(c) < 33 || static_cast<unsigned char>(c) > 126)
        throw FormatError(fmt::format("{}: line {}: the word holds byte {} (printable ASCII expected)", name, line,
                                      static_cast<int>(static_cast<unsigned char>(c))));
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    p.atom();  // part of speech
    std::vector<std::string> pron;
    p.expect('(');
    while (!p.at(')')) {
      p.expect('(');
      p.expect('(');
      std::vector<std::string> syllable;
      while (!p.at(')')) {
        std::string phone = p.atom();
        for (char c : phone)
          if (!std::islower(static_cast<unsigned char>(c))) p.fail("a phone of lower-case letters");
        syllable.push_back(phone);
      }
      p.expect(')');
      if (syllable.empty()) p.fail("a syllable with no phone");
      const std::string stress = p.atom();
      if (stress.size() != 1 || stress[0] < '0' || stress[0] > '2') p.fail("a stress of 0, 1 or 2");
      p.expect(')');
      for (std::string& ph : syllable) {
        if (ph == "ax") ph = "ah";  // Festival's name for CMUdict's AH0 (see parse_cmudict in g2p.h)
        pron.push_back(is_vowel(ph) ? ph + stress : ph);
      }
    }
    p.expect(')');
    p.expect(')');
    p.ws();
    if (p.i != s.size()) p.fail("the end of the entry");
    if (pron.empty()) p.fail("a pronunciation with no syllable");
    if (pron.size() > kMaxPhones)
      throw FormatError(fmt::format("{}: line {}: a pronunciation of {} phones, more than the {} one may have", name, line,
                                    pron.size(), kMaxPhones));
    auto& list = d.prons[word];
    if (std::find(list.begin(), list.end(), pron) == list.end()) list.push_back(pron);
    ++d.entries;
  }
  if (d.entries == 0) throw FormatError(name + ": no dictionary entry in " + std::to_string(line) + " lines");
  return d;
}

CmuDict load_cmudict(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error("the dictionary " + path + " is not a regular file");
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read the dictionary " + path +
                             " (Debian's festlex-cmu package installs it: apt-get install festlex-cmu)");
  return parse_cmudict(in, path);
}

int64_t edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

G2PScores score_g2p(const std::vector<std::vector<std::string>>& outputs,
                    const std::vector<std::vector<std::vector<std::string>>>& references) {
  if (outputs.size() != references.size())
    throw std::invalid_argument(fmt::format("score_g2p: {} outputs for {} words", outputs.size(), references.size()));
  auto strip = [](std::vector<std::string> v) {
    for (auto& p : v) p = strip_stress(p);
    return v;
  };
  G2PScores s;
  s.words = static_cast<int64_t>(outputs.size());
  int64_t wrong[2] = {0, 0}, errors[2] = {0, 0}, length[2] = {0, 0};
  for (size_t w = 0; w < outputs.size(); ++w) {
    if (references[w].empty()) throw std::invalid_argument(fmt::format("score_g2p: word {} has no reference", w));
    for (int stress = 0; stress < 2; ++stress) {
      const auto out = stress ? outputs[w] : strip(outputs[w]);
      int64_t best = -1, best_len = 0;
      for (const auto& r : references[w]) {
        const auto ref = stress ? r : strip(r);
        const int64_t e = edit_distance(out, ref);
        if (best < 0 || e < best) best = e, best_len = static_cast<int64_t>(ref.size());
      }
      wrong[stress] += best != 0;
      errors[stress] += best;
      length[stress] += best_len;
    }
  }
  const double n = std::max<double>(1, static_cast<double>(s.words));
  s.wer = wrong[0] / n;
  s.wer_stress = wrong[1] / n;
  s.per = length[0] ? static_cast<double>(errors[0]) / static_cast<double>(length[0]) : 0;
  s.per_stress = length[1] ? static_cast<double>(errors[1]) / static_cast<double>(length[1]) : 0;
  return s;
}

}  // namespace xg::g2p
