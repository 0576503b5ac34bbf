#include "train/g2p.h"

#include "train/detail/checkpoint_io.h"
#include "train/detail/step_checks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/serialize.h"
#include "train/text.h"     // fnv1a64
#include "train/trainer.h"  // check_writable, meta_int, ModelLimits

namespace xg::train {

// ---- the dictionary -----------------------------------------------------------

namespace {

// A cursor over one line of the lexicon; every error names the line and column.
struct LineParser {
  const std::string& s;
  const std::string& name;
  int64_t line;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& what) const {
    const std::string got = i < s.size() ? fmt::format("'{}'", s[i]) : std::string("the end of the line");
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

bool g2p_held_out(const std::string& word) { return fnv1a64(word) % 10 == 0; }

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
    auto& list = d.prons[word];
    if (std::find(list.begin(), list.end(), pron) == list.end()) list.push_back(pron);
    ++d.entries;
  }
  if (d.entries == 0) throw FormatError(name + ": no dictionary entry in " + std::to_string(line) + " lines");
  return d;
}

CmuDict load_cmudict(const std::string& path) {
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

// ---- training ---------------------------------------------------------------------

G2POptions::G2POptions() {
  model.layers = 3;
  model.d_model = 256;
  model.heads = 4;
  model.d_ff = 1024;
  model.dropout = 0.1;
  model.pre_norm = true;
  model.tie_weights = false;
  precision = bf16_unsupported_reason().empty() ? Precision::bf16 : Precision::f32;
}

void G2POptions::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("G2POptions: " + what);
  };
  need(batch_size >= 1, fmt::format("batch_size {}: expected at least 1", batch_size));
  need(steps >= 1, fmt::format("steps {}: expected at least 1", steps));
  need(std::isfinite(time_limit) && time_limit >= 0, fmt::format("time_limit {}: expected a number >= 0", time_limit));
  need(std::isfinite(lr) && lr > 0, fmt::format("lr {}: expected a finite number > 0", lr));
  need(average >= 0 && average < 1, fmt::format("average {}: expected a fraction in [0, 1)", average));
  need(warmup >= 0 && warmup < steps, fmt::format("warmup {}: expected 0 to steps - 1 = {}", warmup, steps - 1));
  need(label_smoothing >= 0 && label_smoothing < 1,
       fmt::format("label_smoothing {}: expected a number in [0, 1)", label_smoothing));
  need(std::isfinite(clip_norm), fmt::format("clip_norm {}: expected a finite number", clip_norm));
  need(eval_every >= 1, fmt::format("eval_every {}: expected at least 1", eval_every));
  need(eval_words >= 0, fmt::format("eval_words {}: expected 0 (all) or more", eval_words));
  need(beam >= 1, fmt::format("beam {}: expected at least 1", beam));
  need(max_words >= 0, fmt::format("max_words {}: expected 0 (all) or more", max_words));
  need(checkpoint_every >= 0, fmt::format("checkpoint_every {}: expected 0 or more", checkpoint_every));
  need(!resume || !checkpoint.empty(), "resume needs a checkpoint path");
  need(precision != Precision::bf16 || bf16_unsupported_reason().empty(), "precision bf16: " + bf16_unsupported_reason());
  need(model.d_model > 0 && model.heads > 0 && model.d_model % model.heads == 0,
       fmt::format("d_model {} must be a positive multiple of heads {}", model.d_model, model.heads));
}

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = " ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> v;
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}

std::map<std::string, std::string> config_meta(const models::TransformerConfig& c) {
  return {{"cfg.src_vocab", std::to_string(c.src_vocab)}, {"cfg.tgt_vocab", std::to_string(c.tgt_vocab)},
          {"cfg.layers", std::to_string(c.layers)},       {"cfg.d_model", std::to_string(c.d_model)},
          {"cfg.heads", std::to_string(c.heads)},         {"cfg.d_ff", std::to_string(c.d_ff)},
          {"cfg.max_len", std::to_string(c.max_len)},     {"cfg.pre_norm", std::to_string(c.pre_norm)}};
}

models::TransformerConfig read_config(const std::map<std::string, std::string>& m, const std::string& path) {
  models::TransformerConfig c;
  c.src_vocab = meta_int(m, "cfg.src_vocab", path, kFirstSymbol + 1, 1 << 12);
  c.tgt_vocab = meta_int(m, "cfg.tgt_vocab", path, kFirstSymbol + 1, 1 << 12);
  c.layers = meta_int(m, "cfg.layers", path, 1, ModelLimits::layers);
  c.d_model = meta_int(m, "cfg.d_model", path, 1, ModelLimits::d_model);
  c.heads = meta_int(m, "cfg.heads", path, 1, ModelLimits::heads);
  c.d_ff = meta_int(m, "cfg.d_ff", path, 1, ModelLimits::d_ff);
  c.max_len = meta_int(m, "cfg.max_len", path, 1, ModelLimits::max_len);
  c.pre_norm = meta_int(m, "cfg.pre_norm", path, 0, 1) != 0;
  c.tie_weights = false;
  c.dropout = 0;
  if (c.d_model % c.heads != 0)
    throw FormatError(fmt::format("checkpoint {}: cfg.d_model {} is not a multiple of cfg.heads {}", path, c.d_model,
                                  c.heads));
  return c;
}

std::vector<int64_t> encode_word(const std::string& word, const std::string& letters) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < word.size(); ++i) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(word[i])));
    const size_t k = letters.find(c);
    if (k == std::string::npos)
      throw std::invalid_argument(fmt::format("'{}': character {} at position {} is outside the training alphabet '{}'",
                                              word,
                                              std::isprint(static_cast<unsigned char>(word[i]))
                                                  ? fmt::format("'{}'", word[i])
                                                  : fmt::format("byte {}", static_cast<int>(static_cast<unsigned char>(word[i]))),
                                              i, letters));
    ids.push_back(kFirstSymbol + static_cast<int64_t>(k));
  }
  if (ids.empty()) throw std::invalid_argument("an empty word has no pronunciation");
  return ids;
}

std::vector<std::string> decode_phones(const std::vector<int64_t>& ids, const std::vector<std::string>& phones) {
  std::vector<std::string> out;
  for (int64_t id : ids)
    if (id >= kFirstSymbol && id - kFirstSymbol < static_cast<int64_t>(phones.size()))
      out.push_back(phones[static_cast<size_t>(id - kFirstSymbol)]);
  return out;
}

int64_t output_limit(const models::Transformer& m, size_t src_len) {
  return std::min<int64_t>(static_cast<int64_t>(src_len) * 2 + 5, m.config().max_len - 1);
}

}  // namespace

G2P::G2P(const G2POptions& o) : opts_((o.validate(), o)), dict_(load_cmudict(o.dict)), data_gen_(o.seed) {
  if (!opts_.keep_stress)  // the pronunciations the model learns: without stress, duplicates merged
    for (auto& [word, prons] : dict_.prons) {
      std::vector<std::vector<std::string>> plain;
      for (auto p : prons) {
        for (auto& ph : p) ph = strip_stress(ph);
        if (std::find(plain.begin(), plain.end(), p) == plain.end()) plain.push_back(std::move(p));
      }
      prons = std::move(plain);
    }
  std::set<char> letters;
  std::set<std::string> phones;
  for (const auto& [word, prons] : dict_.prons) {
    letters.insert(word.begin(), word.end());
    for (const auto& p : prons) phones.insert(p.begin(), p.end());
  }
  letters_.assign(letters.begin(), letters.end());
  phones_.assign(phones.begin(), phones.end());
  std::map<std::string, int64_t> phone_id;
  for (size_t k = 0; k < phones_.size(); ++k) phone_id[phones_[k]] = kFirstSymbol + static_cast<int64_t>(k);
  size_t longest = 1;
  int64_t words = 0;
  for (const auto& [word, prons] : dict_.prons) {
    for (const auto& p : prons) longest = std::max({longest, word.size(), p.size()});
    if (g2p_held_out(word)) {
      test_words_.push_back(word);
      continue;
    }
    if (opts_.max_words > 0 && words >= opts_.max_words) continue;
    ++words;
    train_words_.push_back(word);
    for (const auto& p : prons) {
      Example e;
      e.src = encode_word(word, letters_);
      for (const auto& ph : p) e.tgt.push_back(phone_id.at(ph));
      train_.push_back(std::move(e));
    }
  }
  if (train_.empty())
    throw std::invalid_argument(fmt::format("{}: no word to train on ({} words in the dictionary, {} held out for "
                                            "testing)",
                                            opts_.dict, dict_.prons.size(), test_words_.size()));
  // Buckets of one spelling length; a bucket smaller than a batch joins the
  // previous one (the first joins the next), so no batch repeats a pair often.
  std::stable_sort(train_.begin(), train_.end(),
                   [](const Example& a, const Example& b) { return a.src.size() < b.src.size(); });
  for (int64_t i = 0, n = static_cast<int64_t>(train_.size()); i < n;) {
    int64_t j = i;
    while (j < n && train_[static_cast<size_t>(j)].src.size() == train_[static_cast<size_t>(i)].src.size()) ++j;
    if (!buckets_.empty() && (j - i < opts_.batch_size || buckets_.back().second - buckets_.back().first < opts_.batch_size))
      buckets_.back().second = j;
    else
      buckets_.emplace_back(i, j);
    i = j;
  }

  models::TransformerConfig c = opts_.model;
  c.src_vocab = kFirstSymbol + static_cast<int64_t>(letters_.size());
  c.tgt_vocab = kFirstSymbol + static_cast<int64_t>(phones_.size());
  c.tie_weights = false;
  c.max_len = static_cast<int64_t>(longest) * 2 + 8;  // outputs may run past the longest reference
  c.pad_id = kPad;
  c.seed = opts_.seed;
  opts_.model = c;
  model_ = std::make_shared<models::Transformer>(c);
  optim::AdamOptions a;
  a.lr = opts_.lr;
  a.beta2 = 0.98;
  a.weight_decay = 0.01;
  opt_ = std::make_unique<optim::AdamW>(optim::weight_decay_groups(model_->named_parameters(), 0.01), a);
  schedule_ = std::make_unique<optim::WarmupCosine>(opts_.lr, opts_.warmup, opts_.steps, opts_.lr / 10);
}

int64_t G2P::position_at(int64_t step, double seconds) const {
  if (opts_.time_limit <= 0) return step;
  const double by_time = static_cast<double>(opts_.steps) * std::min(1.0, seconds / opts_.time_limit);
  return std::max(step, static_cast<int64_t>(by_time));
}

int64_t G2P::schedule_position() const { return position_at(step_, train_seconds_); }

double G2P::current_lr() const { return schedule_->lr(std::clamp<int64_t>(schedule_position(), 1, opts_.steps)); }

std::vector<Example> G2P::draw_batch() {
  std::vector<Example> batch;
  batch.reserve(static_cast<size_t>(opts_.batch_size));
  const uint64_t n = train_.size();
  if (opts_.length_batches) {
    // A pair drawn uniformly picks the bucket (so a bucket comes up in
    // proportion to its size), then the batch is drawn uniformly from it:
    // every pair still has probability 1 / pairs.
    const int64_t pair = static_cast<int64_t>(data_gen_.engine()() % n);
    const auto [begin, end] = *std::upper_bound(buckets_.begin(), buckets_.end(), pair,
                                                [](int64_t i, const auto& b) { return i < b.second; });
    const uint64_t size = static_cast<uint64_t>(end - begin);
    for (int64_t i = 0; i < opts_.batch_size; ++i)
      batch.push_back(train_[static_cast<size_t>(begin) + data_gen_.engine()() % size]);
  } else {
    for (int64_t i = 0; i < opts_.batch_size; ++i) batch.push_back(train_[data_gen_.engine()() % n]);
  }
  return batch;
}

double G2P::step() {
  if (!last_.empty())
    throw std::logic_error("G2P::step: the model holds the mean of the weights (use_average()), not the training state");
  const auto t0 = std::chrono::steady_clock::now();
  const TrainBatch b = make_batch(draw_batch());
  const int64_t at = step_ + 1;
  model_->train();
  opt_->zero_grad();
  Tensor loss;
  {
    Autocast cast(opts_.precision);
    loss = model_->loss(b.src, b.tgt_in, b.tgt_out, opts_.label_smoothing);
  }
  const double value = loss.item();
  detail::check_loss(value, at);
  loss.backward();
  detail::clip_or_stop(model_->named_parameters(), opts_.clip_norm, at);
  step_ = at;
  opt_->set_lr(current_lr());
  opt_->step();
  train_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  snapshot_if_due();
  return value;
}

int64_t G2P::snapshots_due(int64_t position) const {
  // Snapshot k (1..n) is due at position from + k (steps - from) / n: the last at the end of the schedule.
  if (opts_.average <= 0) return 0;
  const int64_t n = G2POptions::kAverageSnapshots;
  const int64_t from = opts_.steps - static_cast<int64_t>(std::llround(opts_.average * static_cast<double>(opts_.steps)));
  const int64_t at = std::min(position, opts_.steps);
  int64_t due = 0;
  while (due < n && at >= from + (due + 1) * (opts_.steps - from) / n) ++due;
  return due;
}

void G2P::snapshot_if_due() {
  if (averaged_ >= snapshots_due(schedule_position())) return;  // at most one a step
  NoGradGuard no_grad;
  const auto params = model_->named_parameters();
  if (average_.empty())
    for (const auto& [name, p] : params) average_.push_back(p.detach().clone());
  else  // running mean: m += (p - m) / k
    for (size_t i = 0; i < params.size(); ++i)
      average_[i].copy_(average_[i] + (params[i].second.detach() - average_[i]) * (1.0 / static_cast<double>(averaged_ + 1)));
  ++averaged_;
}

void G2P::use_average() {
  if (averaged_ == 0) throw std::logic_error("G2P::use_average: no snapshot of the weights has been taken yet");
  if (!last_.empty()) return;
  NoGradGuard no_grad;
  auto params = model_->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    last_.push_back(params[i].second.detach().clone());
    params[i].second.copy_(average_[i]);
  }
}

G2PScores G2P::evaluate(int64_t n, int64_t beam, Words which) {
  const std::vector<std::string>& list = which == Words::held_out ? test_words_ : train_words_;
  const size_t total = list.size();
  const size_t count = n > 0 ? std::min<size_t>(static_cast<size_t>(n), total) : total;
  auto word = [&](size_t k) -> const std::string& { return list[k * total / count]; };  // evenly spread
  Autocast cast(opts_.precision);
  std::vector<std::vector<std::string>> outputs;
  std::vector<std::vector<std::vector<std::string>>> refs;
  const size_t chunk = 256;
  for (size_t start = 0; start < count; start += chunk) {
    const size_t end = std::min(count, start + chunk);
    if (beam == 1) {
      std::vector<Example> ex;
      for (size_t w = start; w < end; ++w) ex.push_back(Example{encode_word(word(w), letters_), {}});
      const TrainBatch b = make_batch(ex);
      const int64_t limit = output_limit(*model_, static_cast<size_t>(b.src.cols));
      for (const auto& ids : models::greedy_decode(*model_, b.src, kBos, kEos, limit))
        outputs.push_back(decode_phones(ids, phones_));
    } else {
      for (size_t w = start; w < end; ++w) {
        const auto src = encode_word(word(w), letters_);
        outputs.push_back(decode_phones(
            models::beam_search(*model_, src, kBos, kEos, output_limit(*model_, src.size()), beam), phones_));
      }
    }
    for (size_t w = start; w < end; ++w) refs.push_back(dict_.prons.at(word(w)));
  }
  return score_g2p(outputs, refs);
}

namespace {
std::map<std::string, std::string> identity_meta(const G2POptions& o, const std::string& letters,
                                                 const std::vector<std::string>& phones) {
  auto m = config_meta(o.model);
  m["letters"] = letters;
  m["phones"] = join(phones);
  m["seed"] = std::to_string(o.seed);
  m["batch"] = std::to_string(o.batch_size);
  m["steps"] = std::to_string(o.steps);
  m["time_limit"] = fmt::format("{}", o.time_limit);
  m["average"] = fmt::format("{}", o.average);
  m["lr"] = fmt::format("{}", o.lr);
  m["warmup"] = std::to_string(o.warmup);
  m["max_words"] = std::to_string(o.max_words);
  m["length_batches"] = o.length_batches ? "1" : "0";  // the data order (precision may change on resume)
  m["stress"] = o.keep_stress ? "keep" : "drop";
  return m;
}
}  // namespace

void G2P::save(const std::string& path) const {
  std::map<std::string, Tensor> all;
  for (auto& [k, v] : model_->state_dict()) all["model." + k] = v;
  for (auto& [k, v] : opt_->state_dict()) all["optim." + k] = v;
  const auto params = model_->named_parameters();
  for (size_t i = 0; i < last_.size(); ++i) all["model." + params[i].first] = last_[i];  // the training state
  for (size_t i = 0; i < average_.size(); ++i) all["average." + params[i].first] = average_[i];
  auto meta = identity_meta(opts_, letters_, phones_);
  meta["averaged"] = std::to_string(averaged_);
  meta["finished"] = finished() ? "1" : "0";  // pronounce takes the mean of a finished run only
  meta["kind"] = "g2p";
  meta["step"] = std::to_string(step_);
  meta["train_seconds"] = fmt::format("{:.17g}", train_seconds_);
  meta["data_gen"] = data_gen_.state();
  meta["dropout_gen"] = model_->dropout_generator().state();
  save_tensors(path, all, meta);
}

void G2P::load(const std::string& path) {
  std::map<std::string, std::string> meta;
  auto all = load_tensors(path, &meta);
  detail::check_same_run(identity_meta(opts_, letters_, phones_), meta, path,
                         {{"phones", "phones differ"}, {"letters", "letters differ"}});
  const int64_t step = meta_int(meta, "step", path, 0, opts_.steps);
  if (!meta.count("data_gen") || !meta.count("dropout_gen") || !meta.count("train_seconds"))
    throw FormatError("checkpoint " + path + ": metadata lacks the generator states or train_seconds");
  const std::string& t = meta.at("train_seconds");
  char* end = nullptr;
  const double seconds = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0)
    throw FormatError("checkpoint " + path + ": train_seconds '" + t + "' is not a number of seconds >= 0");
  // The mean of the weights: average.NAME for every parameter once a snapshot is in it, none before.
  const int64_t averaged = meta_int(meta, "averaged", path, 0, G2POptions::kAverageSnapshots);
  const int64_t due = snapshots_due(position_at(step, seconds));
  if (averaged > due)
    throw FormatError(fmt::format("checkpoint {}: averaged={}, more snapshots than the {} due by step {}", path,
                                  averaged, due, step));
  std::vector<Tensor> average;
  std::set<std::string> names;
  for (const auto& [name, p] : model_->named_parameters()) {
    names.insert("average." + name);
    auto it = all.find("average." + name);
    if (averaged == 0) continue;
    if (it == all.end())
      throw FormatError(fmt::format("checkpoint {}: averaged={} but average.{} is missing", path, averaged, name));
    if (it->second.shape() != p.shape() || it->second.dtype() != p.dtype())
      throw FormatError(fmt::format("checkpoint {}: average.{} does not match the parameter's shape or dtype", path, name));
    average.push_back(it->second);
  }
  for (auto it = all.begin(); it != all.end();) {
    if (it->first.rfind("average.", 0) != 0) {
      ++it;
      continue;
    }
    if (averaged == 0) throw FormatError(fmt::format("checkpoint {}: {} with averaged=0", path, it->first));
    if (!names.count(it->first))
      throw FormatError(fmt::format("checkpoint {}: {} is no parameter of the model", path, it->first));
    it = all.erase(it);
  }
  const detail::SplitState state = detail::split_state(all, path);
  Generator data_gen, dropout_gen;
  data_gen.set_state(meta.at("data_gen"));
  dropout_gen.set_state(meta.at("dropout_gen"));
  model_->load_state_dict(state.model);
  opt_->load_state_dict(state.optim);
  step_ = step;
  train_seconds_ = seconds;
  average_ = std::move(average);
  averaged_ = averaged;
  last_.clear();
  data_gen_ = data_gen;
  model_->dropout_generator() = dropout_gen;
}

Pronouncer::Pronouncer(const std::string& checkpoint) {
  std::map<std::string, std::string> meta;
  auto all = load_tensors(checkpoint, &meta);
  if (!meta.count("kind") || meta.at("kind") != "g2p")
    throw FormatError("checkpoint " + checkpoint + " was not written by g2p train (no kind=g2p in its metadata)");
  if (!meta.count("letters") || !meta.count("phones"))
    throw FormatError("checkpoint " + checkpoint + ": metadata lacks the alphabet or the phones");
  letters_ = meta.at("letters");
  phones_ = split_words(meta.at("phones"));
  models::TransformerConfig c = read_config(meta, checkpoint);
  if (c.src_vocab != kFirstSymbol + static_cast<int64_t>(letters_.size()) ||
      c.tgt_vocab != kFirstSymbol + static_cast<int64_t>(phones_.size()))
    throw FormatError(fmt::format("checkpoint {}: vocabularies {} and {} do not match {} letters and {} phones",
                                  checkpoint, c.src_vocab, c.tgt_vocab, letters_.size(), phones_.size()));
  model_ = std::make_shared<models::Transformer>(c);
  // The weights a finished run was scored with: the mean of its snapshots
  // where it took any (average.NAME); else, and for a run still under way,
  // the last step's (model.NAME).
  std::map<std::string, Tensor> weights, average;
  for (auto& [k, v] : all) {
    if (k.rfind("model.", 0) == 0) weights[k.substr(6)] = v;
    if (k.rfind("average.", 0) == 0) average[k.substr(8)] = v;
  }
  const bool finished = meta.count("finished") && meta.at("finished") == "1";
  if (finished && !average.empty()) {
    for (auto& [k, v] : average) {
      if (!weights.count(k))
        throw FormatError("checkpoint " + checkpoint + ": average." + k + " has no model." + k + " beside it");
      weights[k] = v;
    }
  }
  model_->load_state_dict(weights);
}

std::vector<int64_t> Pronouncer::encode(const std::string& word) const { return encode_word(word, letters_); }

std::vector<std::string> Pronouncer::pronounce(const std::string& word, int64_t beam) {
  const auto src = encode(word);
  if (static_cast<int64_t>(src.size()) >= model_->config().max_len)
    throw std::invalid_argument(fmt::format("'{}': {} letters, more than the model's {} positions", word, src.size(),
                                            model_->config().max_len - 1));
  return decode_phones(models::beam_search(*model_, src, kBos, kEos, output_limit(*model_, src.size()), beam), phones_);
}

// ---- the loop -----------------------------------------------------------------------

G2PResult run_g2p(G2P& g2p, const G2PLoop& loop) {
  const G2POptions& o = g2p.options();
  std::FILE* out = loop.out;
  if (loop.log_every < 1) throw std::invalid_argument(fmt::format("log_every {}: expected at least 1", loop.log_every));
  detail::resume_if_asked(g2p, o.checkpoint, o.resume, true, out);
  const auto& c = g2p.model().config();
  fmt::print(out,
             "dict={} ({} training pairs, {} held-out words) letters={} phones={} | Transformer N={} d_model={} "
             "heads={} d_ff={} dropout={:g} {} | {} parameters | batch {} ({}), warmup_cosine lr {:g} over {}, {}, "
             "{} threads, {}\n",
             o.dict, g2p.train_pairs(), g2p.test_words().size(), g2p.letters().size(),
             fmt::format("{} ({} stress)", g2p.phones().size(), o.keep_stress ? "with" : "without"), c.layers,
             c.d_model, c.heads, c.d_ff, c.dropout, c.pre_norm ? "pre-norm" : "post-norm", g2p.model().num_parameters(),
             o.batch_size, o.length_batches ? "one spelling length" : "random lengths", o.lr,
             o.time_limit > 0 ? fmt::format("{} steps or {:g} s of training", o.steps, o.time_limit)
                              : fmt::format("{} steps", o.steps),
             o.average > 0 ? fmt::format("averaging the last {:g}%", 100 * o.average) : std::string("no averaging"),
             num_threads(),
             precision_name(o.precision));
  std::fflush(out);
  const bool stress = o.keep_stress;  // without it, scores with stress mean nothing and are not reported
  const detail::MetricsFile metrics_file(
      loop.metrics, stress ? "step,loss,lr,wer,per,wer_stress,per_stress,elapsed_s" : "step,loss,lr,wer,per,elapsed_s",
      g2p.steps_done() > 0);
  std::FILE* metrics = metrics_file.get();
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const auto start = clock::now();
  const bool tty = ::isatty(::fileno(out));
  G2PResult r;
  double loss_sum = 0;
  int64_t window = 0;
  auto with_stress = [&](const G2PScores& s) {
    return stress ? fmt::format(" | with stress: wer {:.4f} per {:.4f}", s.wer_stress, s.per_stress) : std::string();
  };
  auto report = [&](const char* what, int64_t step, const G2PScores& s, const char* how) {
    if (tty) fmt::print(out, "\n");
    fmt::print(out, "{} step {}: wer {:.4f} per {:.4f}{} ({} held-out words, {})\n", what, step, s.wer, s.per,
               with_stress(s), s.words, how);
    if (metrics) {
      const std::string stress_columns = stress ? fmt::format("{:.6f},{:.6f},", s.wer_stress, s.per_stress) : "";
      std::fprintf(metrics, "%lld,%.6f,%.6g,%.6f,%.6f,%s%.1f\n", static_cast<long long>(step),
                   window ? loss_sum / static_cast<double>(window) : NAN, g2p.current_lr(), s.wer, s.per,
                   stress_columns.c_str(), since(start));
      std::fflush(metrics);
    }
    loss_sum = 0;
    window = 0;
  };
  while (!g2p.finished()) {
    const double loss = g2p.step();
    loss_sum += loss;
    ++window;
    const int64_t step = g2p.steps_done();
    const std::string line =
        fmt::format("step {} ({:.1f}% of the schedule) loss {:.4f} lr {:.2e} elapsed {:.0f}s", step,
                    100.0 * static_cast<double>(g2p.schedule_position()) / static_cast<double>(o.steps), loss,
                    g2p.current_lr(), since(start));
    if (tty) fmt::print(out, "\r{}\x1b[K", line);
    else if (step % loop.log_every == 0) fmt::print(out, "{}\n", line);
    std::fflush(out);
    const bool at_end = g2p.finished();
    if (step % o.eval_every == 0 && !at_end) report("eval", step, g2p.evaluate(o.eval_words, 1), "greedy");
    if (!o.checkpoint.empty() && ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || at_end))
      g2p.save(o.checkpoint);
  }
  r.steps = g2p.steps_done();
  r.train_seconds = g2p.train_seconds();
  std::optional<G2PScores> mean_greedy;  // the final scores too when the final beam is 1
  const std::string snapshots = fmt::format("{} snapshot{}", g2p.averaged(), g2p.averaged() == 1 ? "" : "s");
  if (g2p.averaged() > 0) {  // what averaging changed, greedy over every held-out word
    const G2PScores last = g2p.evaluate(0, 1);
    g2p.use_average();
    const G2PScores mean = *(mean_greedy = g2p.evaluate(0, 1));
    if (tty) fmt::print(out, "\n");
    fmt::print(out,
               "averaging {} of the last {:g}% of the schedule: greedy over all {} held-out words, wer {:.4f} "
               "per {:.4f} (last step) -> wer {:.4f} per {:.4f} (the mean, scored from here on)\n",
               snapshots, 100 * o.average, mean.words, last.wer, last.per, mean.wer, mean.per);
  }
  r.final_scores = mean_greedy && o.beam == 1 ? *mean_greedy : g2p.evaluate(0, o.beam);
  report("final eval", r.steps, r.final_scores,
         (g2p.averaged() > 0 ? fmt::format("beam {}, the mean of {}", o.beam, snapshots)
                             : fmt::format("beam {}", o.beam)).c_str());
  r.train_scores = g2p.evaluate(1000, 1, G2P::Words::training);
  fmt::print(out, "training words step {}: wer {:.4f} per {:.4f}{} ({} training words, greedy)\n", r.steps,
             r.train_scores.wer, r.train_scores.per, with_stress(r.train_scores), r.train_scores.words);
  fmt::print(out, "final steps={} wer={:.4f} per={:.4f}{} train_seconds={:.1f} train_wer={:.4f} train_per={:.4f}\n",
             r.steps, r.final_scores.wer, r.final_scores.per,
             stress ? fmt::format(" wer_stress={:.4f} per_stress={:.4f}", r.final_scores.wer_stress,
                                  r.final_scores.per_stress)
                    : std::string(),
             r.train_seconds, r.train_scores.wer, r.train_scores.per);
  std::fflush(out);
  return r;
}

}  // namespace xg::train
