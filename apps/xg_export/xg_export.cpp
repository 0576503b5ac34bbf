#include "apps/xg_export/xg_export.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
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
  std::string model;  // the manifest's config.model: the model's word within its family
  std::vector<onnx::GraphSignature> graphs;
  json vocabulary;  // how ids map to symbols, as the application stores it
  json tokens;      // special ids (padding, BOS, EOS), when the family has them
  json usage;       // how to run the graphs: "decoding" (the length rule) or "preprocessing"
};
// A family's exporter: the checkpoint (read for inference), its path, the folder to write into.
using Exporter = std::function<Written(const train::InferenceCheckpoint&, const std::string&, const std::string&)>;

// A metadata value as a JSON number when the whole of it is one, else as text.
json number_or_text(const std::string& v) {
  if (v.empty()) return v;
  char* end = nullptr;
  const long long i = std::strtoll(v.c_str(), &end, 10);
  if (*end == '\0') return i;
  const double d = std::strtod(v.c_str(), &end);
  if (*end == '\0' && std::isfinite(d)) return d;
  return v;
}

// metadata value `key` of `path` as a finite number, or a FormatError naming both.
double number(const std::string& v, const std::string& key, const std::string& path) {
  const json n = number_or_text(v);
  if (!n.is_number()) throw FormatError(fmt::format("checkpoint {}: {} '{}' is not a number", path, key, v));
  return n.get<double>();
}

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
  // The applications' decoders' rule (apps/common/encoder_decoder.h, output_limit): at most
  // per_source_token * |src| + extra tokens, and never past at_most; decoding ends at eos.
  const json usage = {{"decoding",
                       {{"end", models::kEos},
                        {"max_tokens",
                         {{"per_source_token", models::kOutputPerSourceToken},
                          {"extra", models::kOutputExtra},
                          {"at_most", config.max_positions() - 1}}}}}};
  const std::string word = models::seq2seq_kind_word(config.kind());
  if (const models::RNNSeq2SeqConfig* r = config.rnn()) {
    models::RNNSeq2Seq model(*r);
    model.load_state_dict(ck.weights);
    return {"rnn_seq2seq", word, onnx::export_rnn_seq2seq(model, dir), vocabulary, tokens, usage};
  }
  models::Transformer model(*config.transformer());
  model.load_state_dict(ck.weights);
  return {"transformer", word, onnx::export_transformer(model, dir), vocabulary, tokens, usage};
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
  return {"gpt", "gpt", onnx::export_gpt(model, dir), {{"bytes", bytes}}, json::object(), json::object()};  // id i is the byte bytes[i]
}

// An image classifier (apps/vision): one graph, images in, logits out; the
// classes are ids 0..classes-1, named as the checkpoint names them; its
// input as the checkpoint describes it (apps/vision's input_metadata). A
// checkpoint written before it recorded them exports without them.
Written vision(const train::InferenceCheckpoint& ck, const std::string& path, const std::string& dir) {
  onnx::GraphSignature g = onnx::export_image_checkpoint(ck.metadata, ck.weights, path, dir);
  const int64_t classes = std::stoll(g.outputs.at(0).axes.back());
  json vocabulary = {{"classes", classes}}, usage = json::object();
  const auto& m = ck.metadata;
  if (m.count("classes")) {
    std::vector<std::string> names;
    std::stringstream in(m.at("classes"));
    for (std::string name; std::getline(in, name, ',');) names.push_back(name);
    if (static_cast<int64_t>(names.size()) != classes)
      throw FormatError(fmt::format("checkpoint {}: {} class names for {} classes", path, names.size(), classes));
    vocabulary["names"] = names;
  }
  if (m.count("input.layout") && m.count("input.scale") && m.count("input.mean") && m.count("input.std"))
    usage["preprocessing"] = {{"layout", m.at("input.layout")},
                              {"scale", number(m.at("input.scale"), "input.scale", path)},
                              {"mean", number(m.at("input.mean"), "input.mean", path)},
                              {"std", number(m.at("input.std"), "input.std", path)},
                              {"rule", "x = (scale * pixel - mean) / std"}};
  return {"vision", train::metadata_string(m, "model", path), {g}, vocabulary, json::object(), usage};
}

// By the checkpoint's metadata "kind" (train::Job::kind()).
const std::map<std::string, Exporter>& families() {
  static const std::map<std::string, Exporter> table = {
      {"seq2seq", seq2seq}, {"g2p", g2p}, {"char_lm", char_lm}, {"vision", vision}};
  return table;
}

json signature_json(const onnx::ValueSignature& v) { return {{"name", v.name}, {"dtype", v.dtype}, {"axes", v.axes}}; }

json manifest(const Written& w, const std::string& kind, const std::string& checkpoint, const Metadata& meta) {
  json graphs = json::array(), config = {{"model", w.model}};
  for (const onnx::GraphSignature& g : w.graphs) {
    json in = json::array(), out = json::array();
    for (const auto& v : g.inputs) in.push_back(signature_json(v));
    for (const auto& v : g.outputs) out.push_back(signature_json(v));
    graphs.push_back({{"file", g.file}, {"inputs", in}, {"outputs", out}});
  }
  for (const auto& [key, value] : meta)
    if (key.rfind("cfg.", 0) == 0 && key != "cfg.model") config[key.substr(4)] = number_or_text(value);
  json out = {{"family", w.family}, {"kind", kind},      {"checkpoint", checkpoint}, {"opset", 17},
              {"config", config},   {"tokens", w.tokens}, {"vocabulary", w.vocabulary}, {"graphs", graphs}};
  for (const auto& [key, value] : w.usage.items()) out[key] = value;
  return out;
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
