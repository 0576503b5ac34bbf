#!/usr/bin/env bash
# Training curves from metrics CSVs (train_tasks, char_lm, g2p, bench/char_lm.py
# all write one): loss, the evaluation metrics and the learning rate, one panel
# each, one line per file. Needs gnuplot (scripts/setup.sh installs it).
#
#   scripts/plot_metrics.sh OUT.png [--x COLUMN] [--title TEXT] CSV[=LABEL]...
#
# The x axis is the column named by --x (default: step; elapsed_s compares
# runs by wall-clock, train_s by seconds of training). Metrics are every column
# but step, loss, lr, tokens_per_s, elapsed_s and train_s, taken from the first
# file's header.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT.png [--x COLUMN] [--title TEXT] CSV[=LABEL]..." >&2; exit 2; }
out=$1; shift
x=step; title=""
files=(); labels=()
while [ $# -gt 0 ]; do
  case $1 in
    --x) x=$2; shift 2 ;;
    --title) title=${2//\'/\'\'}; shift 2 ;;  # '' is a quote inside gnuplot's '...'
    *) files+=("${1%%=*}"); if [[ $1 == *=* ]]; then labels+=("${1#*=}"); else labels+=("$(basename "${1%.csv}")"); fi; shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || { echo "$0: no CSV file given" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "$0: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
for f in "${files[@]}"; do [ -s "$f" ] || { echo "$0: $f is missing or empty" >&2; exit 1; }; done

# Column number of NAME in FILE's header (0 if absent).
col() { head -1 "$2" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1 | head -1 || true; }
IFS=',' read -r -a header < <(head -1 "${files[0]}")
metrics=()
for h in "${header[@]}"; do
  case $h in step|loss|lr|tokens_per_s|elapsed_s|train_s|"$x") ;; *) metrics+=("$h") ;; esac
done
[ -n "$(col "$x" "${files[0]}")" ] || { echo "$0: ${files[0]} has no column '$x'" >&2; exit 1; }

# One plot command over every file for the columns given.
plot_line() {
  local cmd="plot" sep="" f i c n
  for i in "${!files[@]}"; do
    f=${files[$i]}
    for c in "$@"; do
      n=$(col "$c" "$f"); [ -n "$n" ] || continue
      local name=${labels[$i]}
      [ $# -gt 1 ] && name="$name $c"
      cmd+="$sep '$f' using $(col "$x" "$f"):$n with linespoints pointsize 0.5 title '${name//_/ }'"
      sep=","
    done
  done
  echo "$cmd"
}
panels=2; [ ${#metrics[@]} -gt 0 ] && panels=3
{
  echo "set terminal pngcairo size 900,$((260 * panels)) font ',10'"
  echo "set output '$out'"
  echo "set datafile separator ','"
  echo "set key outside right"
  echo "set grid"
  echo "set multiplot layout $panels,1 title '${title//_/ }'"
  echo "set xlabel '${x//_/ }'"
  echo "set ylabel 'loss'"; plot_line loss
  if [ ${#metrics[@]} -gt 0 ]; then echo "set ylabel '${metrics[*]//_/ }'"; plot_line "${metrics[@]}"; fi
  echo "set ylabel 'learning rate'"; plot_line lr
  echo "unset multiplot"
} | gnuplot
echo "$out"
