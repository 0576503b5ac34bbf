// An encoder-decoder of either family, the Transformer or the recurrent
// RNNSeq2Seq, behind one interface: what a training job, a decoder and an
// attention picture need, whichever model a run or a checkpoint has.
//
//   xg::models::RNNSeq2SeqConfig rnn;  rnn.attention = "general";
//   auto model = xg::models::make_seq2seq(rnn);   // a Seq2SeqConfig holds either family's configuration
//   Tensor loss = model->loss(make_batch(examples), 0.1);
//   auto back = xg::models::Seq2SeqConfig::from_metadata(metadata, path);  // reads cfg.model
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "models/rnn_seq2seq.h"
#include "models/seq2seq.h"
#include "models/transformer.h"

namespace xg::models {

// The common interface; token ids follow models/seq2seq.h (kBos, kEos).
class Seq2SeqModel {
 public:
  virtual ~Seq2SeqModel() = default;
  virtual nn::Module& module() = 0;                // the model itself, to train, save and load
  virtual Generator& dropout_generator() = 0;      // its dropout layers' generator
  virtual int64_t width() const = 0;               // the noam schedule's model width
  virtual std::string describe() const = 0;        // "Transformer N=2 d_model=64 ..." for a run's header
  virtual Metadata to_metadata() const = 0;        // the configuration's checkpoint keys
  virtual double parameter_count() const = 0;      // computed from the configuration
  virtual int64_t src_vocab() const = 0;           // source ids are 0..src_vocab-1
  virtual int64_t max_positions() const = 0;       // the longest sequence it takes
  // Mean cross-entropy of the batch's targets, padding ignored.
  virtual Tensor loss(const TrainBatch& batch, double label_smoothing) = 0;
  // Greedy decoding of every row of src, at most max_len tokens each.
  virtual std::vector<std::vector<int64_t>> greedy(const Batch& src, int64_t max_len) = 0;
  // Beam search over one source (models/beam_search.h).
  virtual std::vector<int64_t> beam(const std::vector<int64_t>& src, int64_t max_len, int64_t beam_size,
                                    double alpha) = 0;
  // Where the decoder looks while it produces `out` from `src` (teacher
  // forced on BOS + out, no gradient): one (H,T,S) tensor per attention
  // layer (the RNN has one, with H = 1), row t the position predicting out[t]
  // (the last, EOS).
  virtual std::vector<Tensor> attention_maps(const std::vector<int64_t>& src, const std::vector<int64_t>& out) = 0;
};

// The two families. Their words ("transformer", "rnn") are those of the
// programs' --model and of a checkpoint's cfg.model, and are read there only.
enum class Seq2SeqKind { transformer, rnn };
// Their words, in this order: transformer, rnn.
const std::vector<std::pair<std::string, Seq2SeqKind>>& seq2seq_kinds();
const std::string& seq2seq_kind_word(Seq2SeqKind kind);  // "transformer" or "rnn"

// Either family's configuration, as a run or a checkpoint has it.
struct Seq2SeqConfig {
  std::variant<TransformerConfig, RNNSeq2SeqConfig> family;  // the chosen family's configuration
  Seq2SeqConfig() = default;  // the default Transformer
  Seq2SeqConfig(const TransformerConfig& c) : family(c) {}  // implicit: either configuration is one
  Seq2SeqConfig(const RNNSeq2SeqConfig& c) : family(c) {}    // implicit: the same for an RNN
  // `kind`'s configuration of the two: a program's options hold both, since
  // its command line sets options of both before --model chooses.
  static Seq2SeqConfig choose(Seq2SeqKind kind, const TransformerConfig& transformer, const RNNSeq2SeqConfig& rnn);
  Seq2SeqKind kind() const;
  const TransformerConfig* transformer() const { return std::get_if<TransformerConfig>(&family); }  // null: an RNN
  const RNNSeq2SeqConfig* rnn() const { return std::get_if<RNNSeq2SeqConfig>(&family); }  // null: a Transformer
  // The chosen configuration's checkpoint keys (the RNN's include cfg.model = rnn).
  Metadata to_metadata() const;
  // cfg.model "rnn" reads an RNNSeq2SeqConfig, no cfg.model (or
  // "transformer") a TransformerConfig; throws FormatError naming `path`,
  // the key and the accepted values.
  static Seq2SeqConfig from_metadata(const Metadata& metadata, const std::string& path);
  double parameter_count() const;  // of the chosen configuration, without building it
  int64_t src_vocab() const;       // source ids are 0..src_vocab-1
  int64_t tgt_vocab() const;       // target ids are 0..tgt_vocab-1
  // Sets both vocabularies and the padding id of the chosen configuration.
  void set_vocab(int64_t vocab, int64_t pad_id);
  void set_pad_id(int64_t pad_id);  // the padding id of both vocabularies
  // The longest sequence the chosen model takes (the Transformer's max_len).
  int64_t max_positions() const;
  void validate() const;  // the chosen configuration's validate()
};

std::unique_ptr<Seq2SeqModel> make_seq2seq(const Seq2SeqConfig& config);  // builds the chosen model (validates)
}  // namespace xg::models
