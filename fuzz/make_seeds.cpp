// Writes the fuzzers' seed corpora: valid inputs of each harness, from which
// libFuzzer mutates. Usage: make_seeds DIR (creates DIR/<harness>/...).
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/serialize.h"
#include "fuzz/fuzz_model.h"
#include "models/transformer.h"
#include "optim/optim.h"
#include "apps/seq2seq/seq2seq.h"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// An argument list as the CLI harness reads it: arguments separated by NUL.
std::string args(const std::vector<std::string>& a) {
  std::string s;
  for (size_t i = 0; i < a.size(); ++i) s += (i ? std::string(1, '\0') : "") + a[i];
  return s;
}

// `bytes` as one gzip member, as the dataset's .gz files are.
std::string gzip(const std::string& bytes) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  for (const char* h : {"", "/tensor_loader", "/module_loader", "/optim_loader", "/cli_train", "/cli_decode", "/cli_vision", "/cli_export", "/cmudict",
                        "/fortunes", "/idx"})
    ::mkdir((dir + h).c_str(), 0755);

  // A whole training checkpoint (tensors + metadata), tiny.
  xg::seq2seq::Seq2SeqOptions o;
  o.task.vocab = 8;
  o.task.max_len = 4;
  o.model.layers = 1;
  o.model.d_model = 8;
  o.model.heads = 2;
  o.model.d_ff = 16;
  o.eval_size = 4;
  o.batch_size = 4;
  xg::seq2seq::Seq2SeqJob job(o);
  xg::train::Trainer trainer(job, xg::seq2seq::default_recipe());
  trainer.step();
  trainer.save(dir + "/tensor_loader/checkpoint.safetensors");
  put(dir + "/module_loader/checkpoint.safetensors", slurp(dir + "/tensor_loader/checkpoint.safetensors"));

  // The module harness's own model, as its state_dict.
  xg::models::Transformer model(fuzz_model_config());
  xg::save_tensors(dir + "/module_loader/transformer.safetensors", model.state_dict());
  xg::save_tensors(dir + "/tensor_loader/transformer.safetensors", model.state_dict());

  // Optimiser state of the optimiser harness's parameters after one step.
  std::vector<xg::Tensor> params{xg::zeros({3, 2}), xg::zeros({2})};
  for (auto& t : params) {
    t.requires_grad_(true);
    t.set_grad(xg::ones(t.shape()));
  }
  xg::optim::Adam adam(params, xg::optim::AdamOptions{});
  adam.step();
  xg::save_tensors(dir + "/optim_loader/adam.safetensors", adam.state_dict());
  xg::optim::SGDOptions so;
  so.momentum = 0.9;
  xg::optim::SGD sgd(params, so);
  sgd.step();
  xg::save_tensors(dir + "/optim_loader/sgd.safetensors", sgd.state_dict());

  put(dir + "/cli_train/defaults", args({}));
  put(dir + "/cli_train/full",
      args({"--task", "reverse", "--vocab", "12", "--min-len", "2", "--max-len", "8", "--layers", "1", "--d-model", "32",
            "--heads", "4", "--d-ff", "64", "--dropout", "0.1", "--pre-norm", "--batch", "16", "--steps", "100",
            "--target", "0.9", "--schedule", "warmup_linear", "--lr", "0.001", "--warmup", "10", "--smoothing", "0",
            "--clip", "0", "--seed", "3", "--threads", "1", "--precision", "f32", "--eval-every", "10", "--eval-size",
            "50", "--log-every", "5", "--checkpoint", "x.safetensors", "--checkpoint-every", "10", "--resume",
            "--metrics", "m.csv", "--detect-anomaly", "--no-samples"}));
  put(dir + "/cli_train/equals", args({"--steps=10", "--lr=0.5", "--resume=true", "--checkpoint=c"}));
  put(dir + "/cli_train/help", args({"--help"}));
  put(dir + "/cli_decode/beam", args({"--checkpoint", "c.safetensors", "--beam", "4", "--alpha", "0.6", "--max-len",
                                      "20", "--threads", "1", "3 4 5", "6 7"}));
  put(dir + "/cli_decode/greedy", args({"--checkpoint=c", "3"}));
  put(dir + "/cli_vision/train", args({"train", "--model", "resnet", "--steps", "10", "--batch", "32", "--lr", "0.1",
                                       "--precision", "bf16", "--time-limit", "60", "--checkpoint", "v.safetensors"}));
  put(dir + "/cli_vision/vit", args({"train", "--model=vit", "--patch=7", "--d-model=16", "--heads=2"}));
  put(dir + "/cli_vision/evaluate", args({"evaluate", "--checkpoint", "v.safetensors", "--threads", "1"}));
  put(dir + "/cli_vision/help", args({"--help"}));
  put(dir + "/cli_export/export", args({"copy.safetensors", "copy_onnx"}));
  put(dir + "/cli_export/help", args({"--help"}));
  // CMUdict in Festival's format (the real file's first entries, a stressed
  // vowel, a word with two pronunciations) and fortune files.
  put(dir + "/cmudict/entries",
      "MNCL\n(\"a\" dt (((ax) 0)))\n(\"a\" n (((ey) 1)))\n(\"aaa\" nil (((t r ih) 1) ((p ax) 0) ((l ey) 1)))\n"
      "(\"adversity\" nil (((ae d) 0) ((v er) 1) ((s ih) 0) ((t iy) 0)))\n");
  put(dir + "/cmudict/header_only", "MNCL\n");
  // IDX: labels (rank 1) and two 3x4 images (rank 3), plain and gzip.
  const std::string labels = std::string("\0\0\x08\x01\0\0\0\x03", 8) + std::string("\x01\x09\x00", 3);
  std::string images = std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x03\0\0\0\x04", 16);
  for (int i = 0; i < 24; ++i) images += static_cast<char>(i * 10);
  put(dir + "/idx/labels", labels);
  put(dir + "/idx/images", images);
  put(dir + "/idx/images.gz", gzip(images));
  put(dir + "/fortunes/two", "A fortune.\n%\nAnother,\n\t-- on two lines\n%\n");
  put(dir + "/fortunes/unterminated", "No final percent line\n%\n%\n\n%\nlast");
  std::printf("make_seeds: wrote the seed corpora under %s\n", dir.c_str());
  return 0;
}
