#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang-14, ASan + UBSan) into build-fuzz/ and
# runs each from a seed corpus of valid files for SECONDS (default 60), or
# until RUNS executions when given, one harness per core at a time. Exits 1
# when any harness found a crash, leak, timeout or out-of-memory (the input
# is kept under build-fuzz/findings/).
#   scripts/fuzz.sh [SECONDS] [RUNS]      e.g. scripts/fuzz.sh 3600 1000000
# Harnesses: tensor_loader (safetensors bytes; then the checkpoint metadata),
# module_loader (a Transformer's load_state_dict), optim_loader (Adam and SGD
# state), cli_train, cli_decode, cli_vision and cli_export (the programs' command lines), cmudict
# (g2p's CMUdict parser), fortunes (char_lm's fortune-file reader and byte
# vocabulary) and idx (data/'s IDX reader, plain and gzip).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
runs=${2:--1}
dir=build-fuzz
# The float32 engine is OpenBLAS here: oneDNN's OpenMP runtime is GCC's, and
# no harness multiplies matrices.
cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXG_FUZZ=ON \
      -DXG_GEMM=openblas -DXG_BUILD_TESTS=OFF >/dev/null
harnesses=(tensor_loader module_loader optim_loader cli_train cli_decode cli_vision cli_export cmudict fortunes idx)
start=$(date +%s)
cmake --build "$dir" -j"$(nproc)" --target make_seeds "${harnesses[@]/#/fuzz_}" >/dev/null
echo "fuzz: built in $(( $(date +%s) - start )) s"
"$dir/fuzz/make_seeds" "$dir/seeds" >/dev/null
mkdir -p "$dir/findings"
# One harness: its summary line in $dir/fuzz_$h.result; fails on a finding.
fuzz_one() {
  local h=$1 dict=fuzz/safetensors.dict
  [[ $h == cli_* ]] && dict=fuzz/cli.dict
  [[ $h == cmudict ]] && dict=fuzz/cmudict.dict
  [[ $h == fortunes ]] && dict=fuzz/fortunes.dict
  [[ $h == idx ]] && dict=fuzz/idx.dict
  mkdir -p "$dir/corpus/$h"
  local log="$dir/fuzz_$h.log" out="$dir/fuzz_$h.result"
  # -rss_limit_mb / -malloc_limit_mb: an input that allocates past 2 GiB is a finding.
  if ! "$dir/fuzz/fuzz_$h" "$dir/corpus/$h" "$dir/seeds/$h" -dict="$dict" -max_total_time="$seconds" \
       -runs="$runs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$dir/findings/$h-" >"$log" 2>&1; then
    { echo "fuzz: $h FAILED (log: $log, input under $dir/findings/):"
      grep -E "ERROR|SUMMARY|==[0-9]+==" "$log" | head -5; } >"$out"
    return 1
  fi
  local execs secs
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  secs=$(sed -nE 's/^Done [0-9]+ runs in ([0-9]+) second.*/\1/p' "$log" | tail -1)
  echo "fuzz: $h: ${execs:-?} executions in ${secs:-?} s, no crash (corpus $(ls "$dir/corpus/$h" | wc -l) inputs)" >"$out"
}
# One harness per core at a time (each is single-threaded).
rm -f "$dir"/fuzz_*.result
status=0
running=0
for h in "${harnesses[@]}"; do
  if (( running >= $(nproc) )); then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$h" &
  running=$((running + 1))
done
while (( running > 0 )); do
  wait -n || status=1
  running=$((running - 1))
done
for h in "${harnesses[@]}"; do cat "$dir/fuzz_$h.result"; done
exit $status
