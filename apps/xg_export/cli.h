// xg_export's command line: CHECKPOINT OUTDIR, parsed as the program parses
// it (apps/xg_export/main.cpp), for the program and the command-line fuzzer.
#pragma once

#include <string>

#include "apps/common/program.h"

namespace xg::xg_export {

// What the command line names.
struct ExportCommand {
  std::string checkpoint;  // a checkpoint written by train_tasks, g2p, char_lm or vision train
  std::string outdir;      // the folder the graphs and manifest.json go into
};

// Parses argv into `cmd`; Parsed says whether to run, or the exit code
// (0 after --help, 2 on a usage error) and the message to print.
cli::Parsed parse_export_command(int argc, const char* const* argv, ExportCommand& cmd);

}  // namespace xg::xg_export
