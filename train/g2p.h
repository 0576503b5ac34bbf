// Grapheme-to-phoneme on CMUdict 0.4 (Debian's festlex-cmu, Festival's
// format) with the encoder-decoder Transformer: the dictionary parser, a
// deterministic held-out split, training, beam-search decoding and word /
// phoneme error rates. examples/g2p.cpp is a thin program around it.
//
//   xg::train::G2POptions o;  o.steps = 20000;
//   xg::train::G2P g2p(o);                          // reads the dictionary
//   xg::train::run_g2p(g2p);                        // progress, evaluations, "final ... wer=..."
//   g2p.save("g2p.safetensors");
//   xg::train::Pronouncer("g2p.safetensors").pronounce("hello");  // {"hh", "ah", "l", "ow"}
#pragma once

#include <cstdio>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "models/transformer.h"
#include "optim/optim.h"
#include "train/tasks.h"  // Example, kFirstSymbol

namespace xg::train {

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

struct G2POptions {
  std::string dict = kCmudictPath;
  models::TransformerConfig model;  // vocabularies are taken from the dictionary
  int64_t batch_size = 128;         // (word, pronunciation) pairs a step
  // true: every batch holds words of one spelling length (little padding; each
  // pair still drawn with probability 1/pairs); false: pairs drawn uniformly.
  bool length_batches = true;
  // false (the default): the model learns and outputs phones without stress
  // digits ("er"; CMUdict's 39 phones, Festival's "ax" read as "ah0"), the
  // form of the target and of the published CMUdict anchors; a word's
  // pronunciations that differ only in stress become one training pair.
  // true: phones keep their stress ("er1", 54 phones), and the scores with
  // stress mean something.
  bool keep_stress = false;
  // bf16: forward and loss under Autocast(bf16). Default: bf16 where the CPU
  // runs it (AVX512_BF16), else f32 (as nanoGPT picks its dtype).
  Precision precision = Precision::f32;
  // The schedule (warm-up, then a cosine down to lr / 10) runs over whichever
  // ends first: `steps`, or `time_limit` seconds of training (> 0; 0: steps
  // only). A step's place in the schedule (its position) is the larger of
  // its number and steps x seconds / time_limit, so a run that the clock ends
  // still ends its cosine, on a fast machine or a slow one (budgeted
  // training); warm-up counts positions too. Seconds are those of step()
  // alone (evaluations excluded) and carry over a resume, which must keep the
  // same steps and time_limit. The defaults end the schedule by the clock on
  // the development machine (43,148 steps on 2026-11-24), in a run of 51
  // minutes with its evaluations.
  int64_t steps = 60000;
  double time_limit = 3000;
  double lr = 1.5e-3;               // warm-up + cosine peak
  // > 0: the model scored at the end (and saved for `pronounce`) is the mean
  // of the weights at kAverageSnapshots points spread evenly over this last
  // fraction of the schedule, the final weights the last of them
  // (checkpoint averaging; at most one snapshot a step, so a schedule of
  // fewer steps than that takes fewer); 0: the final weights.
  double average = 0.2;
  static constexpr int64_t kAverageSnapshots = 8;
  int64_t warmup = 1000;
  double label_smoothing = 0.1;
  double clip_norm = 1.0;
  uint64_t seed = 1;
  int64_t eval_every = 2000;
  int64_t eval_words = 1000;        // held-out words decoded greedily at each evaluation (0: all)
  int64_t beam = 4;                 // the final evaluation's beam, over every held-out word
  int64_t max_words = 0;            // > 0: train on the first N training words only (smoke runs)
  std::string checkpoint;
  int64_t checkpoint_every = 0;
  bool resume = false;
  G2POptions();                     // N=3, d_model 256, 4 heads, d_ff 1024, dropout 0.1, pre-norm; the precision above
  void validate() const;            // throws std::invalid_argument naming the first bad field
};

class G2P {
 public:
  explicit G2P(const G2POptions& o);  // reads the dictionary, builds model and optimiser
  double step();                      // one Adam step on draw_batch(); returns its loss
  // The next training batch (advances the data generator): `length_batches`
  // decides whether it holds one spelling length or any.
  std::vector<Example> draw_batch();
  int64_t steps_done() const { return step_; }
  double train_seconds() const { return train_seconds_; }  // in step(), over every session of the run
  // Where the run is in its schedule (see G2POptions::steps): at least
  // steps_done(); the run is over at options().steps.
  int64_t schedule_position() const;
  bool finished() const { return schedule_position() >= opts_.steps; }
  // Snapshots in the mean of the weights so far (options().average), and a
  // switch of the model's parameters to that mean: what run_g2p scores last.
  // After use_average() the last step's weights are kept aside: save() still
  // writes them as the training state (model.NAME; the mean as average.NAME),
  // and step() refuses to train the mean.
  int64_t averaged() const { return averaged_; }
  void use_average();
  double current_lr() const;
  // n words spread evenly over the (alphabetical) list of held-out words, or
  // of training words (n 0: all), decoded greedily (beam 1, batched) or by
  // beam search. Training words against held-out ones tell a model that has
  // not yet fitted its data (both high) from one that generalises poorly.
  enum class Words { held_out, training };
  G2PScores evaluate(int64_t n, int64_t beam, Words which = Words::held_out);
  void save(const std::string& path) const;
  void load(const std::string& path);  // throws std::invalid_argument listing what differs

  const G2POptions& options() const { return opts_; }
  const std::vector<std::string>& test_words() const { return test_words_; }
  const std::vector<std::string>& train_words() const { return train_words_; }  // alphabetical
  int64_t train_pairs() const { return static_cast<int64_t>(train_.size()); }
  models::Transformer& model() { return *model_; }
  const std::string& letters() const { return letters_; }
  const std::vector<std::string>& phones() const { return phones_; }

 private:
  G2POptions opts_;
  CmuDict dict_;
  std::string letters_;              // the alphabet, sorted
  std::vector<std::string> phones_;  // sorted; with stress digits when keep_stress
  std::vector<Example> train_;           // sorted by spelling length
  std::vector<std::pair<int64_t, int64_t>> buckets_;  // [begin, end) of train_, in order: one spelling length (or a few)
  std::vector<std::string> test_words_, train_words_;
  std::shared_ptr<models::Transformer> model_;
  std::unique_ptr<optim::AdamW> opt_;
  std::unique_ptr<optim::WarmupCosine> schedule_;
  Generator data_gen_;
  int64_t step_ = 0;
  double train_seconds_ = 0;
  std::vector<Tensor> average_;  // the mean of the snapshots, one per model_->named_parameters()
  int64_t averaged_ = 0;         // snapshots in it
  std::vector<Tensor> last_;     // after use_average(): the last step's weights
  int64_t position_at(int64_t step, double seconds) const;  // schedule_position() of a step and time
  int64_t snapshots_due(int64_t position) const;
  void snapshot_if_due();
};

// What `g2p` needs from a checkpoint: alphabet, phones, the model.
class Pronouncer {
 public:
  explicit Pronouncer(const std::string& checkpoint);
  // Phones of a word (lower-cased first); throws std::invalid_argument naming
  // a character outside the training alphabet, and the alphabet.
  std::vector<std::string> pronounce(const std::string& word, int64_t beam = 4);
  models::Transformer& model() { return *model_; }
  std::vector<int64_t> encode(const std::string& word) const;  // source ids (same checks)
  const std::vector<std::string>& phones() const { return phones_; }

 private:
  std::string letters_;
  std::vector<std::string> phones_;
  std::shared_ptr<models::Transformer> model_;
};

struct G2PLoop {
  int64_t log_every = 200;
  std::string metrics;  // CSV: step,loss,lr,wer,per[,wer_stress,per_stress with keep_stress],elapsed_s
  std::FILE* out = stdout;
};
struct G2PResult {
  int64_t steps = 0;
  G2PScores final_scores;  // every held-out word, options().beam
  G2PScores train_scores;  // up to 1,000 training words spread over the list, greedy
  double train_seconds = 0;  // G2P::train_seconds(): resumed sessions included
};
G2PResult run_g2p(G2P& g2p, const G2PLoop& loop = {});

}  // namespace xg::train
