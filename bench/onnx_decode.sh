#!/usr/bin/env bash
# ONNX Runtime's greedy decoding of the exported Transformer against xgrad's
# own decoder (models::greedy_decode), on the same 1,000 copy-task sources in
# the same batches of 100, at 1 and 2 threads (ORT's intraOpNumThreads,
# xgrad's pool), OPENBLAS_CORETYPE unset for both. Trains the default
# train_tasks model (2 layers, C 64, F 256) on the copy task, exports it with
# xg_export, then runs each side REPS times and prints every run's seconds.
# Takes /tmp/xg-build.lock so that no build runs beside it.
#   bash bench/onnx_decode.sh BUILD_DIR [REPS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: onnx_decode.sh BUILD_DIR [REPS] [STEPS]}
reps=${2:-5}
steps=${3:-1500}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
exec 9>/tmp/xg-build.lock
flock 9
lscpu | grep -E '^(Model name|Flags)'
export NODE_PATH=${NODE_PATH:-$build/onnxruntime/node_modules}
env -u OPENBLAS_CORETYPE "$build/apps/seq2seq/train_tasks" --task copy --min-len 2 --max-len 12 --steps "$steps" \
  --eval-size 200 --target 0 --no-samples --threads 2 --checkpoint "$dir/copy.safetensors" | tail -2
mkdir "$dir/onnx"
"$build/apps/xg_export/xg_export" "$dir/copy.safetensors" "$dir/onnx"
for t in 1 2; do
  for r in $(seq "$reps"); do
    env -u OPENBLAS_CORETYPE "$build/tests/onnx_decode_reference" "$dir/copy.safetensors" "$dir/ref.json" 1000 2 12 100 "$t" >/dev/null
    env -u OPENBLAS_CORETYPE node tests/onnx/run_decode.js "$dir/onnx" "$dir/ref.json" "$t" | grep -E 'greedy|relative'
  done
done
