// Trains the Transformer on the copy or reverse task (train/ does the work).
//
//   train_tasks [--task copy|reverse] [--steps N] [--checkpoint PATH [--resume]] ...
//   mpirun -np 2 train_tasks ...       data parallel: --batch is split across the processes
//   train_tasks --help
//
// Exit codes: 0 done, 1 a runtime error (a non-finite loss, an unwritable
// checkpoint), 2 a usage error. Under mpirun, an error on any process ends
// the whole job (MPI_Abort) after printing it with the process's rank.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autograd/autograd.h"
#include "distributed/dist.h"
#include "train/cli.h"

int main(int argc, char** argv) {
  xg::train::TrainCommand cmd;
  const xg::train::Parsed parsed = xg::train::parse_train_command(argc, argv, cmd);
  if (!parsed.run) {
    std::fprintf(parsed.exit_code ? stderr : stdout, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  try {
    xg::dist::Environment env(&argc, &argv);
    try {
      // Default: XG_NUM_THREADS / OMP_NUM_THREADS when set, else this process's cores.
      if (cmd.threads > 0) xg::set_num_threads(cmd.threads);
      else if (!std::getenv("XG_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS"))
        xg::set_num_threads(xg::dist::cores_per_rank());
      xg::train::Trainer trainer(cmd.train);
      xg::train::run(trainer, cmd.loop);
      return 0;
    } catch (const std::exception& e) {
      if (xg::dist::world_size() == 1) throw;
      xg::dist::abort(1, "train_tasks: rank " + std::to_string(xg::dist::rank()) + ": " + e.what());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_tasks: %s\n", e.what());
    return 1;
  }
}
