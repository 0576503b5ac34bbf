#include "apps/xg_export/cli.h"

#include "apps/common/cli.h"

namespace xg::xg_export {

cli::Parsed parse_export_command(int argc, const char* const* argv, ExportCommand& cmd) {
  auto setup = [&](CLI::App& app) {
    app.description("Writes a checkpoint's model as ONNX graphs and a manifest.json into OUTDIR.");
    app.add_option("CHECKPOINT", cmd.checkpoint, "a checkpoint written by train_tasks, g2p, char_lm or vision train")
        ->required();
    app.add_option("OUTDIR", cmd.outdir,
                   "a folder, created if it does not exist (its parent must); its files of the same names are "
                   "replaced")
        ->required();
  };
  return cli::parse_with("xg_export", argc, argv, setup, [] {});
}

}  // namespace xg::xg_export
