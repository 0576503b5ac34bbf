// xgrad's side of the decoding checks of the exported shipped models
// (tests/onnx/run_decode.js runs ONNX Runtime's side): reads a checkpoint
// as xg_export does, and writes OUT.json with
//   steps:  cases at several batch sizes and lengths, each the ids fed step
//           by step and xgrad's logits at every step (decode_step for the
//           Transformer; GPT::prefill of a prompt, then GPT::step);
//   greedy: (Transformer) N random sources of lengths LO..HI and xgrad's
//           greedy decodes of them (models::greedy_decode, BATCH rows at a
//           time), with its time in seconds at THREADS threads.
//   onnx_decode_reference CHECKPOINT OUT.json N LO HI BATCH THREADS
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "models/seq2seq_model.h"
#include "train/checkpoint.h"

using namespace xg;
using nlohmann::json;

namespace {

struct Options {
  std::string checkpoint, out;
  int64_t n, lo, hi, batch, threads;
};

std::vector<int64_t> random_ids(int64_t len, int64_t first, int64_t vocab, Generator& g) {
  std::vector<int64_t> v(static_cast<size_t>(len));
  for (auto& id : v) id = first + std::min(vocab - first - 1, static_cast<int64_t>(g.uniform() * double(vocab - first)));
  return v;
}

// Rows of different lengths padded with kPad into one (B,S) batch.
models::Batch pad_rows(const std::vector<std::vector<int64_t>>& rows) {
  size_t cols = 0;
  for (const auto& r : rows) cols = std::max(cols, r.size());
  models::Batch b{{}, static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)};
  for (const auto& r : rows) {
    b.ids.insert(b.ids.end(), r.begin(), r.end());
    b.ids.insert(b.ids.end(), cols - r.size(), models::kPad);
  }
  return b;
}

std::vector<float> floats(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

// The most tokens a batch decodes: twice its longest source plus 5 (as the
// applications allow), below the model's positions.
int64_t limit_of(const models::Batch& b, int64_t max_len) { return std::min(2 * b.cols + 5, max_len - 1); }

// One logits case: a (B,S) source, then `steps` greedy steps, each with the
// tokens fed and xgrad's logits (B,V).
json transformer_case(models::Transformer& m, const models::Batch& src, int64_t steps) {
  models::DecodeState st = m.start_decode(src);
  std::vector<int64_t> tokens(static_cast<size_t>(src.rows), models::kBos);
  json fed = json::array(), logits = json::array();
  for (int64_t t = 0; t < steps; ++t) {
    Tensor l = m.decode_step(st, tokens);
    fed.push_back(tokens);
    logits.push_back(floats(l));
    tokens = argmax(l, -1);
  }
  return {{"src", src.ids}, {"shape", {src.rows, src.cols}}, {"tokens", fed}, {"logits", logits},
          {"vocab", m.config().tgt_vocab}};
}

json transformer_reference(models::Transformer& m, const Options& o, Generator& g) {
  const int64_t v = m.config().src_vocab;
  json steps = json::array();
  for (const auto& [rows, len, n_steps] : std::vector<std::array<int64_t, 3>>{{1, o.lo, 6}, {2, o.hi, 9}, {5, 4, 7},
                                                                            {8, o.hi, 12}, {3, 1, 5}}) {
    std::vector<std::vector<int64_t>> src;
    for (int64_t r = 0; r < rows; ++r) src.push_back(random_ids(std::max<int64_t>(1, len - r % 3), models::kFirstSymbol, v, g));
    steps.push_back(transformer_case(m, pad_rows(src), n_steps));
  }
  std::vector<std::vector<int64_t>> sources;
  for (int64_t i = 0; i < o.n; ++i)
    sources.push_back(random_ids(o.lo + static_cast<int64_t>(g.uniform() * double(o.hi - o.lo + 1)) % (o.hi - o.lo + 1),
                                 models::kFirstSymbol, v, g));
  json outputs = json::array(), limits = json::array();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.n; i += o.batch) {
    const models::Batch b = pad_rows({sources.begin() + i, sources.begin() + std::min(o.n, i + o.batch)});
    limits.push_back(limit_of(b, m.config().max_len));
    for (auto& seq : models::greedy_decode(m, b, models::kBos, models::kEos, limits.back())) outputs.push_back(seq);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {{"steps", steps},
          {"greedy", {{"sources", sources}, {"outputs", outputs}, {"batch", o.batch}, {"limits", limits},
                      {"bos", models::kBos}, {"eos", models::kEos}, {"pad", models::kPad},
                      {"xgrad_seconds", seconds}, {"threads", o.threads}}}};
}

// GPT: each case prefills a random prompt (B,P), then feeds random tokens
// one a step; the logits of the prefill first, then of each step.
json gpt_reference(models::GPT& m, Generator& g) {
  json steps = json::array();
  for (const auto& [rows, p, n_steps] : std::vector<std::array<int64_t, 3>>{{1, 1, 6}, {3, 5, 8}, {6, 2, 4}, {2, 9, 3}}) {
    models::GPT::Cache cache = m.start_cache();
    const std::vector<int64_t> prompt = random_ids(rows * p, 0, m.config().vocab, g);
    json fed = json::array(), logits = json::array({floats(m.prefill(cache, models::Batch{prompt, rows, p}))});
    for (int64_t t = 0; t < n_steps; ++t) {
      const std::vector<int64_t> tokens = random_ids(rows, 0, m.config().vocab, g);
      fed.push_back(tokens);
      logits.push_back(floats(m.step(cache, tokens)));
    }
    steps.push_back({{"rows", rows}, {"prompt", prompt}, {"prompt_length", p}, {"tokens", fed}, {"logits", logits}});
  }
  return {{"steps", steps}};
}

json reference(const Options& o) {
  Metadata meta;
  train::load_checkpoint(o.checkpoint, meta);
  const std::string kind = train::metadata_string(meta, "kind", o.checkpoint);
  const train::InferenceCheckpoint ck = train::load_for_inference(o.checkpoint, kind, kind + " train");
  Generator g(2026);
  NoGradGuard no_grad;
  if (kind == "char_lm") {
    models::GPT m(models::GPTConfig::from_metadata(ck.metadata, o.checkpoint));
    m.load_state_dict(ck.weights);
    m.eval();
    return gpt_reference(m, g);
  }
  models::TransformerConfig c = *models::Seq2SeqConfig::from_metadata(ck.metadata, o.checkpoint).transformer();
  c.pad_id = models::kPad;
  models::Transformer m(c);
  m.load_state_dict(ck.weights);
  m.eval();
  return transformer_reference(m, o, g);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: onnx_decode_reference CHECKPOINT OUT.json N LO HI BATCH THREADS\n");
    return 2;
  }
  try {
    const Options o{argv[1], argv[2], std::stoll(argv[3]), std::stoll(argv[4]),
                    std::stoll(argv[5]), std::stoll(argv[6]), std::stoll(argv[7])};
    set_num_threads(static_cast<int>(o.threads));
    std::ofstream(o.out) << reference(o).dump() << "\n";
    std::printf("onnx_decode_reference: %s written\n", o.out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx_decode_reference: %s\n", e.what());
    return 1;
  }
  return 0;
}
