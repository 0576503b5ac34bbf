#include "apps/xg_export/xg_export.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/serialize.h"
#include "models/gpt.h"
#include "models/rnn_seq2seq.h"
#include "models/seq2seq.h"
#include "models/seq2seq_model.h"
#include "onnx/gpt.h"
#include "onnx/image_model.h"
#include "onnx/rnn_seq2seq.h"
#include "onnx/transformer.h"
#include "train/checkpoint.h"

namespace xg::xg_export {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// What a family's exporter gives back for the manifest.
struct Written {
  std::string family;
  std::vector<onnx::GraphSignature> graphs;
  json vocabulary;  // how ids map to symbols, as the application stores it
  json tokens;      // special ids (padding, BOS, EOS), when the family has them
};
// A family's exporter: the checkpoint (read for inference), its path, the folder to write into.
using Exporter = std::function<Written(const train::InferenceCheckpoint&, const std::string&, const std::string&)>;

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// seq2seq and g2p: an encoder-decoder of either family (cfg.model).
Written encoder_decoder(const train::InferenceCheckpoint& ck, const std::string& path, const std::string& dir,
                        const json& vocabulary) {
  models::Seq2SeqConfig config = models::Seq2SeqConfig::from_metadata(ck.metadata, path);
  config.set_pad_id(models::kPad);  // as the applications' decoders build it
  const json tokens = {{"pad", models::kPad}, {"bos", models::kBos}, {"eos", models::kEos}};
  if (const models::RNNSeq2SeqConfig* r = config.rnn()) {
    models::RNNSeq2Seq model(*r);
    model.load_state_dict(ck.weights);
    return {"rnn_seq2seq", onnx::export_rnn_seq2seq(model, dir), vocabulary, tokens};
  }
  models::Transformer model(*config.transformer());
  model.load_state_dict(ck.weights);
  return {"transformer", onnx::export_transformer(model, dir), vocabulary, tokens};
}

Written seq2seq(const train::InferenceCheckpoint& ck, const std::string& path, const std::string& dir) {
  const int64_t v = models::Seq2SeqConfig::from_metadata(ck.metadata, path).src_vocab();
  // The tasks' symbols are ids themselves: kFirstSymbol .. V-1 in both vocabularies.
  return encoder_decoder(ck, path, dir, {{"source", "ids"}, {"first_symbol", models::kFirstSymbol}, {"size", v}});
}

Written g2p(const train::InferenceCheckpoint& ck, const std::string& path, const std::string& dir) {
  const std::string letters = train::metadata_string(ck.metadata, "letters", path);
  std::vector<std::string> chars;
  for (char c : letters) chars.push_back(std::string(1, c));
  // Id kFirstSymbol + i is letters[i] (source) and phones[i] (target).
  return encoder_decoder(ck, path, dir,
                         {{"first_symbol", models::kFirstSymbol},
                          {"source", chars},
                          {"target", words(train::metadata_string(ck.metadata, "phones", path))}});
}

Written char_lm(const train::InferenceCheckpoint& ck, const std::string& path, const std::string& dir) {
  models::GPT model(models::GPTConfig::from_metadata(ck.metadata, path));
  model.load_state_dict(ck.weights);
  std::vector<int64_t> bytes;
  for (const std::string& w : words(train::metadata_string(ck.metadata, "vocab", path))) bytes.push_back(std::stoll(w));
  if (static_cast<int64_t>(bytes.size()) != model.config().vocab)
    throw FormatError(fmt::format("checkpoint {}: cfg.vocab {} but the stored vocabulary has {} characters", path,
                                  model.config().vocab, bytes.size()));
  return {"gpt", onnx::export_gpt(model, dir), {{"bytes", bytes}}, json::object()};  // id i is the byte bytes[i]
}

// An image classifier (apps/vision): one graph, images in, logits out; the
// classes are ids 0..classes-1 (Fashion-MNIST's names are the application's).
Written vision(const train::InferenceCheckpoint& ck, const std::string& path, const std::string& dir) {
  onnx::GraphSignature g = onnx::export_image_checkpoint(ck.metadata, ck.weights, path, dir);
  const std::string classes = g.outputs.at(0).axes.back();
  return {"vision", {g}, {{"classes", std::stoll(classes)}}, json::object()};
}

// By the checkpoint's metadata "kind" (train::Job::kind()).
const std::map<std::string, Exporter>& families() {
  static const std::map<std::string, Exporter> table = {
      {"seq2seq", seq2seq}, {"g2p", g2p}, {"char_lm", char_lm}, {"vision", vision}};
  return table;
}

json signature_json(const onnx::ValueSignature& v) { return {{"name", v.name}, {"dtype", v.dtype}, {"axes", v.axes}}; }

json manifest(const Written& w, const std::string& kind, const std::string& checkpoint, const Metadata& meta) {
  json graphs = json::array(), config = json::object();
  for (const onnx::GraphSignature& g : w.graphs) {
    json in = json::array(), out = json::array();
    for (const auto& v : g.inputs) in.push_back(signature_json(v));
    for (const auto& v : g.outputs) out.push_back(signature_json(v));
    graphs.push_back({{"file", g.file}, {"inputs", in}, {"outputs", out}});
  }
  for (const auto& [key, value] : meta)
    if (key.rfind("cfg.", 0) == 0) config[key.substr(4)] = value;
  return {{"family", w.family}, {"kind", kind},      {"checkpoint", checkpoint}, {"opset", 17},
          {"config", config},   {"tokens", w.tokens}, {"vocabulary", w.vocabulary}, {"graphs", graphs}};
}

// The checkpoint's metadata "kind", read with the checks every reader makes.
std::string kind_of(const std::string& checkpoint) {
  Metadata meta;
  train::load_checkpoint(checkpoint, meta);
  const std::string& kind = train::metadata_string(meta, "kind", checkpoint);
  if (!families().count(kind)) {
    std::string known;
    for (const auto& kv : families()) known += (known.empty() ? "" : ", ") + kv.first;
    throw std::invalid_argument("checkpoint " + checkpoint + " has kind '" + kind +
                                "', which xg_export does not know; it knows " + known);
  }
  return kind;
}

// Writes the family's files into `tmp`, then moves them into `outdir`.
Exported write_into(const std::string& checkpoint, const std::string& outdir, const std::string& tmp) {
  const std::string kind = kind_of(checkpoint);
  const train::InferenceCheckpoint ck = train::load_for_inference(checkpoint, kind, kind + " train");
  const Written w = families().at(kind)(ck, checkpoint, tmp);
  const std::string text = manifest(w, kind, checkpoint, ck.metadata).dump(2) + "\n";
  write_file_atomically(tmp + "/manifest.json", "xg_export", [&](const ByteSink& put) { put(text.data(), text.size()); });
  Exported e{w.family, {}};
  for (const auto& g : w.graphs) e.files.push_back(g.file);
  e.files.push_back("manifest.json");
  for (const std::string& f : e.files) fs::rename(tmp + "/" + f, outdir + "/" + f);
  return e;
}

}  // namespace

// Into an existing folder.
Exported export_into(const std::string& checkpoint, const std::string& outdir) {
  train::check_outputs({{"OUTDIR", outdir, /*folder=*/true}});
  const std::string tmp = outdir + "/.xg_export.tmp." + std::to_string(::getpid());
  fs::create_directory(tmp);
  try {
    Exported e = write_into(checkpoint, outdir, tmp);
    fs::remove_all(tmp);
    return e;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

Exported export_checkpoint(const std::string& checkpoint, const std::string& given) {
  // An empty path would put the files at the root: check_outputs skips empty paths (optional outputs).
  if (given.empty()) throw std::runtime_error("OUTDIR is empty: expected a folder");
  std::string outdir = given;
  while (outdir.size() > 1 && outdir.back() == '/') outdir.pop_back();
  std::error_code ec;
  if (fs::exists(outdir, ec)) return export_into(checkpoint, outdir);
  // A new OUTDIR: written whole under another name beside it, then renamed
  // into place, so that a failed export leaves no folder behind.
  train::check_outputs({{"OUTDIR", outdir, /*folder=*/false}});  // its parent exists and can be written
  const std::string staging = outdir + ".xg_export.new." + std::to_string(::getpid());
  fs::create_directory(staging);
  try {
    Exported e = export_into(checkpoint, staging);
    fs::rename(staging, outdir);
    return e;
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
}

std::vector<std::string> exported_kinds() {
  std::vector<std::string> kinds;
  for (const auto& kv : families()) kinds.push_back(kv.first);
  return kinds;
}

}  // namespace xg::xg_export
