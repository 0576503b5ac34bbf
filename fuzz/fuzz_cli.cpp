// libFuzzer harness: the command lines of train_tasks, decode
// (XG_FUZZ_DECODE), vision (XG_FUZZ_VISION: train, evaluate, predict,
// picture) or xg_export (XG_FUZZ_EXPORT), parsed exactly as the programs
// parse them. The input is
// split at NUL bytes into argv. Every outcome must be a run, --help (exit 0)
// or a usage error (exit 2) with a message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "apps/common/program.h"
#include "apps/seq2seq/cli.h"
#include "apps/vision/cli.h"
#include "apps/xg_export/cli.h"

#ifndef XG_FUZZ_DECODE
#define XG_FUZZ_DECODE 0
#endif
#ifndef XG_FUZZ_VISION
#define XG_FUZZ_VISION 0
#endif
#ifndef XG_FUZZ_EXPORT
#define XG_FUZZ_EXPORT 0
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"prog"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  xg::cli::Parsed p;
  if (XG_FUZZ_EXPORT) {
    xg::xg_export::ExportCommand cmd;
    p = xg::xg_export::parse_export_command(static_cast<int>(argv.size()), argv.data(), cmd);
  } else if (XG_FUZZ_VISION) {
    xg::vision::VisionCommand cmd;
    p = xg::vision::parse_vision_command(static_cast<int>(argv.size()), argv.data(), cmd);
  } else if (XG_FUZZ_DECODE) {
    xg::seq2seq::DecodeCommand cmd;
    p = xg::seq2seq::parse_decode_command(static_cast<int>(argv.size()), argv.data(), cmd);
  } else {
    xg::seq2seq::TrainCommand cmd;
    p = xg::seq2seq::parse_train_command(static_cast<int>(argv.size()), argv.data(), cmd);
  }
  if (!p.run && p.exit_code != 0 && p.exit_code != 2) std::abort();  // only 0 (help) or 2 (usage)
  if (!p.run && p.message.empty()) std::abort();                    // never a silent refusal
  return 0;
}
