#include "apps/g2p/g2p.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>

#include "apps/common/smoothing.h"
#include "autograd/autograd.h"
#include "autograd/require.h"
#include "distributed/dist.h"
#include "train/checkpoint.h"

namespace xg::g2p {

using models::kBos;
using models::kEos;
using models::kFirstSymbol;
using models::kPad;

// ---- training ---------------------------------------------------------------------

G2POptions::G2POptions() {
  model.layers = 3;
  model.d_model = 256;
  model.heads = 4;
  model.d_ff = 1024;
  model.dropout = 0.1;
  model.pre_norm = true;
  model.tie_weights = false;
  rnn.embed = 128;
  rnn.hidden = 256;
}

train::TrainOptions default_recipe() {
  train::TrainOptions o;
  o.steps = 60000;
  o.time_limit = 3000;
  o.clock_schedule = true;
  o.schedule = "warmup_cosine";
  o.lr = 1.5e-3;
  o.warmup = 1000;
  o.beta1 = 0.9;
  o.beta2 = 0.98;
  o.weight_decay = 0.01;
  o.clip_norm = 1.0;
  o.average = 0.2;
  o.precision = bf16_unsupported_reason().empty() ? Precision::bf16 : Precision::f32;
  return o;
}

void G2POptions::validate() const {
  auto need = [](bool ok, const std::string& what) { require(ok, what, "G2POptions: "); };
  need(batch_size >= 1, fmt::format("batch_size {}: expected at least 1", batch_size));
  train::check_batch_per_process(batch_size, "pair");
  apps::check_label_smoothing(label_smoothing, "G2POptions: ");
  need(eval_words >= 0, fmt::format("eval_words {}: expected 0 (all) or more", eval_words));
  need(beam >= 1, fmt::format("beam {}: expected at least 1", beam));
  need(max_words >= 0, fmt::format("max_words {}: expected 0 (all) or more", max_words));
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

std::vector<int64_t> encode_word(const std::string& word, const std::string& letters) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < word.size(); ++i) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(word[i])));
    const size_t k = letters.find(c);
    if (k == std::string::npos)
      throw std::invalid_argument(fmt::format("{}: character {} at position {} is outside the training alphabet '{}'",
                                              quote_text(word),
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

}  // namespace

G2PJob::G2PJob(const G2POptions& o)
    : EncoderDecoderJob(o.seed), opts_((o.validate(), o)), dict_(load_cmudict(o.dict)) {
  read_alphabets();
  const size_t longest = split_words();
  cut_buckets();
  build_model(longest);
}

void G2PJob::read_alphabets() {
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
}

size_t G2PJob::split_words() {
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
  if (test_words_.empty())
    throw std::invalid_argument(fmt::format("{}: no held-out word to evaluate on: all {} words fall in the training "
                                            "split (a word is held out when fnv1a64(word) % 10 == 0)",
                                            opts_.dict, dict_.prons.size()));
  if (train_.empty())
    throw std::invalid_argument(fmt::format("{}: no word to train on ({} words in the dictionary, {} held out for "
                                            "testing)",
                                            opts_.dict, dict_.prons.size(), test_words_.size()));
  return longest;
}

void G2PJob::cut_buckets() {
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
}

void G2PJob::build_model(size_t longest) {
  models::TransformerConfig c = opts_.model;
  c.src_vocab = kFirstSymbol + static_cast<int64_t>(letters_.size());
  c.tgt_vocab = kFirstSymbol + static_cast<int64_t>(phones_.size());
  c.tie_weights = false;
  c.max_len = static_cast<int64_t>(longest) * 2 + 8;  // outputs may run past the longest reference
  c.pad_id = kPad;
  c.seed = opts_.seed;
  opts_.model = c;
  models::RNNSeq2SeqConfig r = opts_.rnn;
  r.src_vocab = c.src_vocab;
  r.tgt_vocab = c.tgt_vocab;
  r.pad_id = kPad;
  r.seed = opts_.seed;
  opts_.rnn = r;
  config_ = models::Seq2SeqConfig::choose(opts_.model_kind, c, r);
  config_.validate();
  model_ = models::make_seq2seq(config_);
}

std::string G2PJob::describe() {
  return fmt::format("dict={} ({} training pairs, {} held-out words) letters={} phones={} ({} stress) | {} | batch {} ({})",
                     opts_.dict, train_pairs(), test_words_.size(), letters_.size(), phones_.size(),
                     opts_.keep_stress ? "with" : "without", model_->describe(), opts_.batch_size,
                     opts_.length_batches ? "one spelling length" : "random lengths");
}

std::vector<Example> G2PJob::draw_batch() {
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

train::StepLoss G2PJob::loss(const train::Shard& shard) {
  // The same global batch on every process (one data generator); each keeps its rows.
  return shard_loss(draw_batch(), shard, opts_.label_smoothing);
}

G2PScores G2PJob::evaluate_words(int64_t n, int64_t beam, Words which) {
  const std::vector<std::string>& list = which == Words::held_out ? test_words_ : train_words_;
  const size_t total = list.size();
  const size_t count = n > 0 ? std::min<size_t>(static_cast<size_t>(n), total) : total;
  auto word = [&](size_t k) -> const std::string& { return list[k * total / count]; };  // evenly spread
  NoGradGuard no_grad;
  model_->module().eval();
  std::vector<std::vector<std::string>> outputs;
  std::vector<std::vector<std::vector<std::string>>> refs;
  const size_t chunk = 256;
  for (size_t start = 0; start < count; start += chunk) {
    const size_t end = std::min(count, start + chunk);
    if (beam == 1) {
      std::vector<Example> ex;
      for (size_t w = start; w < end; ++w) ex.push_back(Example{encode_word(word(w), letters_), {}});
      const models::TrainBatch b = models::make_batch(ex);
      const int64_t limit = apps::output_limit(config_, static_cast<size_t>(b.src.cols));
      for (const auto& ids : model_->greedy(b.src, limit))
        outputs.push_back(decode_phones(ids, phones_));
    } else {
      for (size_t w = start; w < end; ++w) {
        const auto src = encode_word(word(w), letters_);
        outputs.push_back(decode_phones(
            model_->beam(src, apps::output_limit(config_, src.size()), beam, 0.6), phones_));
      }
    }
    for (size_t w = start; w < end; ++w) refs.push_back(dict_.prons.at(word(w)));
  }
  return score_g2p(outputs, refs);
}

train::Evaluation G2PJob::evaluate(train::EvalStage stage, int64_t step) {
  const bool stress = opts_.keep_stress;  // without it, scores with stress mean nothing and are not reported
  auto metrics = [&](const G2PScores& s) {
    train::Metrics m = {{"wer", s.wer}, {"per", s.per}};
    if (stress) m.insert(m.end(), {{"wer_stress", s.wer_stress}, {"per_stress", s.per_stress}});
    return m;
  };
  train::Evaluation e;
  G2PScores s;
  if (stage == train::EvalStage::periodic) {
    s = evaluate_words(opts_.eval_words, 1);
    check_.reset();
    e.about = fmt::format("({} held-out words, greedy)", s.words);
  } else if (stage == train::EvalStage::check) {
    check_ = s = evaluate_words(0, 1);
    e.about = fmt::format("({} held-out words, greedy)", s.words);
  } else {
    // With beam 1 the final scores are the check's on the same weights (the mean), when there was one.
    s = check_ && opts_.beam == 1 ? *check_ : evaluate_words(0, opts_.beam);
    e.about = fmt::format("({} held-out words, beam {})", s.words, opts_.beam);
    train_scores_ = evaluate_words(1000, 1, Words::training);
    const std::string with_stress =
        stress ? fmt::format(" wer_stress {:.4f} per_stress {:.4f}", train_scores_.wer_stress, train_scores_.per_stress)
               : "";
    e.lines.push_back(fmt::format("training words step {}: wer {:.4f} per {:.4f}{} ({} training words, greedy)", step,
                                  train_scores_.wer, train_scores_.per, with_stress, train_scores_.words));
  }
  e.metrics = metrics(s);
  return e;
}

std::string G2PJob::final_line(const train::RunSummary& r) const {
  auto value = [&](const char* name) { return r.final.metric(name); };
  return fmt::format("steps={} wer={:.4f} per={:.4f}{} train_seconds={:.1f} train_wer={:.4f} train_per={:.4f}", r.steps,
                     value("wer"), value("per"),
                     opts_.keep_stress
                         ? fmt::format(" wer_stress={:.4f} per_stress={:.4f}", value("wer_stress"), value("per_stress"))
                         : std::string(),
                     r.train_seconds, train_scores_.wer, train_scores_.per);
}

// What must match for a run to continue another: the model, the alphabet and
// phones, and what decides the data order (the trainer adds the schedule's).
Metadata G2PJob::identity() const {
  Metadata m = EncoderDecoderJob::identity();
  m["letters"] = letters_;
  m["phones"] = join(phones_);
  m["seed"] = std::to_string(opts_.seed);
  m["batch"] = std::to_string(opts_.batch_size);
  m["max_words"] = std::to_string(opts_.max_words);
  m["length_batches"] = opts_.length_batches ? "1" : "0";
  m["stress"] = opts_.keep_stress ? "keep" : "drop";
  return m;
}

Pronouncer::Pronouncer(const std::string& checkpoint) {
  load(checkpoint, "g2p", "g2p train", [&](const train::InferenceCheckpoint& ck) {
    const Metadata& meta = ck.metadata;
    letters_ = train::metadata_string(meta, "letters", checkpoint);
    phones_ = split_words(train::metadata_string(meta, "phones", checkpoint));
    const models::Seq2SeqConfig config = models::Seq2SeqConfig::from_metadata(meta, checkpoint);
    const int64_t src_vocab = config.src_vocab(), tgt_vocab = config.tgt_vocab();
    if (src_vocab != kFirstSymbol + static_cast<int64_t>(letters_.size()) ||
        tgt_vocab != kFirstSymbol + static_cast<int64_t>(phones_.size()))
      throw FormatError(fmt::format("checkpoint {}: vocabularies {} and {} do not match {} letters and {} phones",
                                    checkpoint, src_vocab, tgt_vocab, letters_.size(), phones_.size()));
    return config;
  });
}

std::vector<int64_t> Pronouncer::encode(const std::string& word) const { return encode_word(word, letters_); }

std::vector<std::string> Pronouncer::pronounce(const std::string& word, int64_t beam) {
  const auto src = encode(word);
  const int64_t positions = config().max_positions();
  if (static_cast<int64_t>(src.size()) >= positions)
    throw std::invalid_argument(fmt::format("{}: {} letters, more than the model's {} positions", quote_text(word), src.size(),
                                            positions - 1));
  return decode_phones(model().beam(src, apps::output_limit(config(), src.size()), beam, 0.6), phones_);
}

}  // namespace xg::g2p
