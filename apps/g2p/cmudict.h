// CMUdict 0.4 as Debian's festlex-cmu ships it (Festival's lexicon format):
// the parser, the held-out split, and word / phoneme error rates.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace xg::g2p {

inline constexpr const char* kCmudictPath = "/usr/share/festival/dicts/cmu/cmudict-0.4.out";

// Festival's lexicon format, one entry a line after a "MNCL" header:
//   ("adversity" nil (((ae d) 0) ((v er) 1) ((s ih) 0) ((t iy) 0)))
// word, part of speech, then syllables (phones, stress). A phone keeps its
// syllable's stress as a digit when it is a vowel ("er1"), as CMUdict writes
// it; consonants carry none. Festival writes CMUdict's AH0 as "ax" (in this
// file: 50,044 times, every one in an unstressed syllable, while "ah" stands
// in stressed ones but for 6 of Festival's own additions); the parser reads it
// back as "ah0", so the phones are CMUdict's 39 and stress is in the digits
// alone (without them "ax" would still tell an unstressed "ah" from a stressed
// one). Words are lower-cased; a word listed several times (one entry per part
// of speech) keeps each distinct pronunciation.
struct CmuDict {
  std::map<std::string, std::vector<std::vector<std::string>>> prons;  // word -> its pronunciations
  int64_t entries = 0;                                                 // lines read as entries
};
// The longest word and pronunciation an entry may have: CMUdict's longest
// are 22 letters and 20 phones; the model's positions grow with them.
inline constexpr size_t kMaxLetters = 64, kMaxPhones = 64;
// Throws FormatError "NAME: line N: ..." naming the first malformed line.
CmuDict parse_cmudict(std::istream& in, const std::string& name);
CmuDict load_cmudict(const std::string& path = kCmudictPath);  // also names a missing file and its package

bool is_vowel(const std::string& phone);             // aa ae ah ao aw ax ay eh er ey ih iy ow oy uh uw (stress or not)
std::string strip_stress(const std::string& phone);  // "er1" -> "er"
bool g2p_held_out(const std::string& word);          // fnv1a64(word) % 10 == 0: the test split (10%)
// Levenshtein distance (insertions, deletions, substitutions cost 1).
int64_t edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b);

// Word error rate: a word is right when the output equals one of its
// pronunciations. Phoneme error rate: the smallest edit distance to one of
// them, summed, over the summed length of that pronunciation. Each with and
// without stress (digits removed from both sides).
struct G2PScores {
  int64_t words = 0;
  double wer = 0, per = 0;                // without stress
  double wer_stress = 0, per_stress = 0;  // with stress (meaningless for a model trained without it)
};
G2PScores score_g2p(const std::vector<std::vector<std::string>>& outputs,
                    const std::vector<std::vector<std::vector<std::string>>>& references);

}  // namespace xg::g2p
