#!/bin/bash
# A training step of apps/vision's models against bench/vision.py (the
# PyTorch twin): images per second over a short timed run of each, 1 and 2
# threads, float32 and bf16 (torch.autocast; xgrad --precision bf16), and
# each run's peak RSS (/usr/bin/time -v). Both sides with OPENBLAS_CORETYPE
# unset and glibc malloc keeping freed memory (bench/malloc_tunables; bench/compare.py
# says why); PyTorch's OpenBLAS gets as many threads as the run. PyTorch at 2
# threads also with OMP_WAIT_POLICY=passive: its OpenMP workers spin while
# waiting, which on 2 shared cores can cost it more than the second core gives.
#   bench/vision_speed.sh [SECONDS] [MODELS...]  (from the repository root, after a build)
# XG_PRECISIONS="f32" leaves bf16 out: on a CPU without AVX512_BF16, vision
# train refuses --precision bf16 and those rows would only print FAILED.
set -u
secs=${1:-40}
shift || true
models=${*:-cnn resnet vit}
precisions=${XG_PRECISIONS:-f32 bf16}
run() {  # label, command...: prints "label img/s rss_MB"
  local label=$1
  shift
  local log
  log=$(mktemp)
  env -u OPENBLAS_CORETYPE GLIBC_TUNABLES="$(cat bench/malloc_tunables)" /usr/bin/time -v "$@" > "$log" 2>&1
  local steps train rss
  steps=$(sed -n 's/.*final steps=\([0-9]*\).*/\1/p' "$log" | tail -1)
  train=$(sed -n 's/.*train_seconds=\([0-9.]*\).*/\1/p' "$log" | tail -1)
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$log")
  if [ -z "$steps" ] || [ -z "$train" ]; then
    echo "$label FAILED"; tail -5 "$log"; rm -f "$log"; return
  fi
  awk -v l="$label" -v s="$steps" -v t="$train" -v r="$rss" \
    'BEGIN { printf "%-44s %8.1f img/s %6d steps %7.1f s  peak RSS %6.0f MB\n", l, s * 128 / t, s, t, r / 1024 }'
  rm -f "$log"
}
for m in $models; do
  for t in 1 2; do
    for p in $precisions; do
      run "xgrad $m threads=$t $p" build/apps/vision/vision train --model "$m" --threads "$t" --precision "$p" \
        --time-limit "$secs" --eval-every 1000000 --log-every 1000000
      flag=""
      [ "$p" = bf16 ] && flag="--bf16"
      run "pytorch $m threads=$t $p" env OPENBLAS_NUM_THREADS="$t" /usr/bin/python3 bench/vision.py --model "$m" --threads "$t" --time-limit "$secs" $flag
      if [ "$t" = 2 ]; then
        run "pytorch $m threads=2 $p OMP_WAIT_POLICY=passive" \
          env OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/vision.py --model "$m" --threads 2 --time-limit "$secs" $flag
      fi
    done
  done
done
