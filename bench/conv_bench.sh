#!/usr/bin/env bash
# Convolution layers, xgrad (bench/conv_bench.cpp) beside PyTorch
# (bench/conv_bench.py), at 1 and 2 threads, then a table of ratios
# (bench/conv_compare.py). OPENBLAS_CORETYPE is unset for every side.
# PyTorch at 2 threads runs twice, torch 2 threads with OpenBLAS 1 and torch 1
# with OpenBLAS 2, and the faster of the two counts (its best split).
# Takes /tmp/xg-build.lock so that no build runs beside it.
#   bash bench/conv_bench.sh BUILD_DIR [--reps R] [--warmup W] [--batch N]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: conv_bench.sh BUILD_DIR [flags]}
shift
out=$(mktemp)
tunables=$(cat bench/malloc_tunables)  # glibc malloc keeps freed memory, both sides (bench/compare.py says why)
exec 9>/tmp/xg-build.lock
flock 9
lscpu | grep -E '^(Model name|Flags)'
for t in 1 2; do
  env -u OPENBLAS_CORETYPE GLIBC_TUNABLES="$tunables" "$build/bench/conv_bench" --threads "$t" "$@" | tee -a "$out"
done
env -u OPENBLAS_CORETYPE GLIBC_TUNABLES="$tunables" OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/conv_bench.py --threads 1 "$@" | tee -a "$out"
env -u OPENBLAS_CORETYPE GLIBC_TUNABLES="$tunables" OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/conv_bench.py --threads 2 "$@" | tee -a "$out"
env -u OPENBLAS_CORETYPE GLIBC_TUNABLES="$tunables" OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/conv_bench.py --threads 1 "$@" |
  sed 's/"threads": 1/"threads": 2, "split": "torch1_openblas2"/' | tee -a "$out"
/usr/bin/python3 bench/conv_compare.py "$out"
rm -f "$out"
