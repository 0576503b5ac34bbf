#!/usr/bin/env bash
# The character-LM comparison of apps/char_lm/README.md: char_lm (xgrad) and its PyTorch
# twin bench/char_lm.py on the same model, data order and schedule, each for
# MINUTES of training (default 30) on this machine, one after the other, with
# OPENBLAS_CORETYPE unset. Writes logs and metrics CSVs to bench/results/char_lm/.
#
#   bash bench/char_lm.sh [MINUTES]
#
# Runs, in order: xgrad bf16 (2 threads), PyTorch bf16 autocast (2 threads:
# its best in bench/run.sh on this model), PyTorch as shipped (f32, its default
# thread count, which is 1 on these machines).
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/prepare.sh
minutes=${1:-30}
out=bench/results/char_lm
mkdir -p "$out"
common=(--steps 16000 --warmup 200 --time-limit $((minutes * 60)) --eval-every 2000 --eval-chars 65536 --log-every 500)
run() { local name=$1; shift; echo "== $name"; env -u OPENBLAS_CORETYPE "$@" "${common[@]}" --metrics "$out/$name.csv" > "$out/$name.log" 2>&1; tail -1 "$out/$name.log"; }
run xgrad_bf16 build/apps/char_lm/char_lm train --precision bf16 --threads 2
run torch_bf16 /usr/bin/python3 bench/char_lm.py --precision bf16 --threads 2
run torch_shipped /usr/bin/python3 bench/char_lm.py
