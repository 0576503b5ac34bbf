// Trains the Transformer on the copy or reverse task (apps/seq2seq/seq2seq.h is
// the task, train/ the loop).
//
//   train_tasks [--task copy|reverse] [--steps N] [--checkpoint PATH [--resume]] ...
//   mpirun -np 2 train_tasks ...       data parallel: --batch is split across the processes
//   train_tasks --help
//
// Exit codes: 0 done, 1 a runtime error (a non-finite loss, an unwritable
// checkpoint), 2 a usage error. Under mpirun, an error on any process ends
// the whole job (MPI_Abort) after printing it with the process's rank.
#include "apps/seq2seq/cli.h"
#include "apps/common/program.h"

int main(int argc, char** argv) {
  xg::seq2seq::TrainCommand cmd;
  const xg::cli::Parsed parsed = xg::seq2seq::parse_train_command(argc, argv, cmd);
  return xg::cli::run_program("train_tasks", argc, argv, parsed, cmd.threads, [&] {
    xg::seq2seq::Seq2SeqJob job(cmd.job);
    xg::train::fit(job, cmd.train, cmd.loop);
    return 0;
  });
}
