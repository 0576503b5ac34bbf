#!/usr/bin/env bash
# Attention heatmaps, one panel per file written by attention_map
# (rows: output positions, columns: source tokens). Needs gnuplot.
#
#   scripts/plot_heatmaps.sh OUT.png TITLE FILE...
#
# Panels fill rows of 4 (HEATMAP_COLUMNS=N sets another width); each panel's
# title is its file name without .txt, underscores as spaces.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OUT.png TITLE FILE..." >&2; exit 2; }
out=$1; title=${2//\'/\'\'}; shift 2  # '' is a quote inside gnuplot's '...'
command -v gnuplot >/dev/null || { echo "$0: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
n=$#
width=${HEATMAP_COLUMNS:-4}
[[ $width =~ ^[1-9][0-9]*$ ]] || { echo "$0: HEATMAP_COLUMNS=$width: expected a whole number from 1" >&2; exit 2; }
cols=$(( n < width ? n : width )); rows=$(( (n + cols - 1) / cols ))
{
  echo "set terminal pngcairo size $((300 * cols)),$((300 * rows + 40)) font ',9'"
  echo "set output '$out'"
  echo "set multiplot layout $rows,$cols title '$title'"
  echo "set palette grey negative"
  echo "set cbrange [0:1]"
  echo "unset colorbox"
  echo "set yrange [] reverse"
  echo "set xtics rotate by 0 font ',8'"
  echo "set ytics font ',8'"
  echo "set xlabel 'source'"
  echo "set ylabel 'output'"
  for f in "$@"; do
    echo "set title '$(basename "${f%.txt}" | tr '_' ' ')'"
    echo "plot '$f' matrix rowheaders columnheaders using 1:2:3 with image notitle"
  done
  echo "unset multiplot"
} | gnuplot
echo "$out"
