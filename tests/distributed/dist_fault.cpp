// A job whose rank 1 fails while rank 0 waits in a collective: the job must
// end with an error naming the failure, not hang. tests/CMakeLists.txt runs
//   dist_fault kill    rank 1 is killed (SIGKILL)
//   dist_fault throw   rank 1 lets an exception escape main
#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "autograd/xg.h"
#include "distributed/dist.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  xg::dist::Environment env(&argc, &argv);
  xg::Tensor t = xg::ones({4});
  xg::dist::allreduce(t);  // everyone is up
  if (xg::dist::rank() == 1) {
    if (mode == "kill") std::raise(SIGKILL);
    if (mode == "throw") throw std::runtime_error("rank 1 fails on purpose");
  }
  xg::dist::allreduce(t);  // rank 0 waits here for rank 1, which never comes
  std::printf("dist_fault: rank %d finished, which it should not have\n", xg::dist::rank());
  return 0;
}
