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
#   rnn_vs_transformer.png   (seq2seq and g2p) held-out accuracy against seconds of training, from
#                            the equal-time runs' CSVs in bench/results/rnn_vs_transformer/
#   g2p_attention_rnn_vs_transformer.png
#                            when G2P_CHECKPOINT and G2P_RNN_CHECKPOINT name a Transformer and an
#                            RNN g2p checkpoint: for each of G2P_WORDS, the RNN's attention beside
#                            the mean of the Transformer's last-layer heads
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
if [ -n "${G2P_CHECKPOINT:-}" ] && [ -n "${G2P_RNN_CHECKPOINT:-}" ]; then
  panels=()
  for word in ${G2P_WORDS:-phonetically thoughtful xylophone}; do
    mkdir -p "$tmp/rnn-$word" "$tmp/tf-$word"
    "$build/apps/g2p/g2p" attention --checkpoint "$G2P_RNN_CHECKPOINT" --input "$word" --out "$tmp/rnn-$word" >/dev/null
    "$build/apps/g2p/g2p" attention --checkpoint "$G2P_CHECKPOINT" --input "$word" --out "$tmp/tf-$word" >/dev/null
    cp "$tmp/rnn-$word/layer0_head0.txt" "$tmp/${word}_RNN.txt"
    last=$(ls "$tmp/tf-$word"/layer*_head0.txt | sort -V | tail -1)
    # The mean over the last layer's heads: same headers, values averaged.
    awk 'FNR == 1 { files++; if (files == 1) header = $0; next }
         { label[FNR] = $1; for (i = 2; i <= NF; ++i) sum[FNR, i] += $i; if (NF > width) width = NF; rows = FNR }
         END { print header; for (r = 2; r <= rows; ++r) { line = label[r];
               for (i = 2; i <= width; ++i) line = line " " sum[r, i] / files; print line } }' \
        "${last%_head0.txt}"_head*.txt > "$tmp/${word}_Transformer_last_layer.txt"
    panels+=("$tmp/${word}_RNN.txt" "$tmp/${word}_Transformer_last_layer.txt")
  done
  HEATMAP_COLUMNS=2 scripts/plot_heatmaps.sh "$g2p/g2p_attention_rnn_vs_transformer.png" \
      "g2p: the RNN's attention and the Transformer's last-layer cross-attention, mean of its heads (letters x phones)" "${panels[@]}"
fi
eq=bench/results/rnn_vs_transformer
if [ -f "$eq/copy_rnn.csv" ]; then
  args=()
  for task in copy reverse; do
    for model in transformer rnn; do args+=("$eq/${task}_${model}.csv=$task $model"); done
  done
  scripts/plot_metrics.sh "$seq2seq/rnn_vs_transformer.png" --x train_s \
      --title "copy and reverse: the RNN and the Transformer by seconds of training" "${args[@]}"
fi
if [ -f "$eq/g2p_rnn.csv" ]; then
  scripts/plot_metrics.sh "$g2p/g2p_rnn_vs_transformer.png" --x elapsed_s \
      --title "g2p: the RNN and the Transformer, 1,200 s of training each (x: wall-clock, evaluations included)" \
      "$eq/g2p_transformer.csv=transformer" "$eq/g2p_rnn.csv=rnn"
fi
G2P_METRICS=${G2P_METRICS:-bench/results/g2p/g2p_default.csv}
if [ -f "$G2P_METRICS" ]; then
  scripts/plot_metrics.sh "$g2p/g2p_curves.png" --title "g2p on CMUdict" "$G2P_METRICS=g2p"
fi
ls -l "$seq2seq" "$char_lm" "$g2p"
