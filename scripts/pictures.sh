#!/usr/bin/env bash
# Makes the applications' pictures in apps/<app>/pictures/ (needs a Release build and
# gnuplot; scripts/setup.sh installs it):
#   copy_reverse_curves.png  training curves of train_tasks on copy and reverse (trained here, ~1 min)
#   copy_attention.png       cross-attention of the copy model, every layer and head: a diagonal
#   reverse_attention.png    the same for reverse: an anti-diagonal
#   char_lm_curves.png       char_lm against its PyTorch twin by wall-clock, from the CSVs of
#                            bench/results/char_lm/ (bench/char_lm.sh makes them, 30 minutes each)
#   g2p_attention.png        letter-to-sound alignment, when G2P_CHECKPOINT names a g2p checkpoint
#   g2p_curves.png           from G2P_METRICS, a g2p metrics CSV (default: the default run's,
#                            bench/results/g2p/g2p_default.csv)
#
#   scripts/pictures.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seq2seq=apps/seq2seq/pictures char_lm=apps/char_lm/pictures g2p=apps/g2p/pictures
mkdir -p "$seq2seq" "$char_lm" "$g2p"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in seq2seq/train_tasks seq2seq/attention_map g2p/g2p; do
  [ -x "$build/apps/$p" ] || { echo "$0: $build/apps/$p is missing (run scripts/build.sh)" >&2; exit 1; }
done

for task in copy reverse; do
  "$build/apps/seq2seq/train_tasks" --task "$task" --steps 3000 --eval-every 100 --no-samples \
      --metrics "$tmp/$task.csv" --checkpoint "$tmp/$task.safetensors" | tail -1
done
scripts/plot_metrics.sh "$seq2seq/copy_reverse_curves.png" --title "train_tasks: copy and reverse (defaults, 2 threads)" \
    "$tmp/copy.csv=copy" "$tmp/reverse.csv=reverse"

input="3 4 5 6 7 8 9 10 11 12"
for task in copy reverse; do
  mkdir -p "$tmp/$task-att"
  "$build/apps/seq2seq/attention_map" --checkpoint "$tmp/$task.safetensors" --input "$input" --out "$tmp/$task-att"
  scripts/plot_heatmaps.sh "$seq2seq/${task}_attention.png" "$task: cross-attention for the input $input" \
      "$tmp/$task-att"/layer*_head*.txt
done

results=bench/results/char_lm
if ls "$results"/*.csv >/dev/null 2>&1; then
  args=()
  for f in "$results"/*.csv; do args+=("$f=$(basename "${f%.csv}")"); done
  scripts/plot_metrics.sh "$char_lm/char_lm_curves.png" --x elapsed_s \
      --title "character LM on fortunes: xgrad and PyTorch, 30 minutes each" "${args[@]}"
fi

if [ -n "${G2P_CHECKPOINT:-}" ]; then
  mkdir -p "$tmp/g2p-att"
  "$build/apps/g2p/g2p" attention --checkpoint "$G2P_CHECKPOINT" --input "${G2P_WORD:-phonetically}" --out "$tmp/g2p-att"
  scripts/plot_heatmaps.sh "$g2p/g2p_attention.png" "g2p: cross-attention for '${G2P_WORD:-phonetically}'" \
      "$tmp/g2p-att"/layer*_head*.txt
fi
G2P_METRICS=${G2P_METRICS:-bench/results/g2p/g2p_default.csv}
if [ -f "$G2P_METRICS" ]; then
  scripts/plot_metrics.sh "$g2p/g2p_curves.png" --title "g2p on CMUdict" "$G2P_METRICS=g2p"
fi
ls -l "$seq2seq" "$char_lm" "$g2p"
