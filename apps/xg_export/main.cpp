// xg_export CHECKPOINT OUTDIR: a shipped model's checkpoint (seq2seq, g2p:
// the Transformer or the recurrent model; char_lm: the GPT; vision: the
// CNN, ResNet or ViT) written as ONNX graphs into OUTDIR (created if needed),
// with a manifest.json naming the family, each graph's inputs and outputs
// (names, dtypes, axes) and the vocabulary. docs/onnx.md says how to decode
// with them in ONNX Runtime. Exit codes: 0 written, 1 an error (nothing
// written), 2 a usage error.
#include <cstdio>

#include "apps/xg_export/cli.h"
#include "apps/xg_export/xg_export.h"

int main(int argc, char** argv) {
  xg::xg_export::ExportCommand cmd;
  const xg::cli::Parsed parsed = xg::xg_export::parse_export_command(argc, argv, cmd);
  const std::string &checkpoint = cmd.checkpoint, &outdir = cmd.outdir;
  return xg::cli::run_program("xg_export", argc, argv, parsed, 1, [&] {
    const xg::xg_export::Exported e = xg::xg_export::export_checkpoint(checkpoint, outdir);
    std::printf("xg_export: %s model from %s:", e.family.c_str(), checkpoint.c_str());
    for (const std::string& f : e.files) std::printf(" %s", f.c_str());
    std::printf(" written to %s\n", outdir.c_str());
    return 0;
  });
}
