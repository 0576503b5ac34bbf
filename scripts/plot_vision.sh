#!/usr/bin/env bash
# The vision pictures from the text files `vision picture --out DIR` writes
# (apps/vision/pictures.h). Needs gnuplot.
#
#   scripts/plot_vision.sh DIR PREFIX TITLE
#
# Writes PREFIX_confusion.png (rows: true classes, columns: predicted, each
# row's fractions), PREFIX_grid.png (the first 32 test images, each titled
# with its prediction, red when wrong) and, when DIR holds attention.txt (a
# ViT), PREFIX_attention.png (the class token's attention over each image's
# patches, beside the images).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 DIR PREFIX TITLE" >&2; exit 2; }
dir=$1; prefix=$2; title=${3//\'/\'\'}
command -v gnuplot >/dev/null || { echo "$0: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
for f in confusion.txt grid.txt grid_labels.txt; do
  [ -f "$dir/$f" ] || { echo "$0: $dir/$f is missing (run vision picture --out $dir)" >&2; exit 1; }
done
{
  echo "set terminal pngcairo size 760,640 font ',9' noenhanced"
  echo "set output '${prefix}_confusion.png'"
  echo "set title '$title: confusion on the test images (row fractions)'"
  echo "set palette grey negative; set cbrange [0:1]; set yrange [] reverse"
  echo "set xtics rotate by 45 right font ',8'; set ytics font ',8'"
  echo "set xlabel 'predicted'; set ylabel 'true'"
  echo "plot '$dir/confusion.txt' matrix rowheaders columnheaders using 1:2:3 with image notitle, \\"
  echo "     '' matrix rowheaders columnheaders using 1:2:(sprintf('%.2f', \$3)) with labels font ',7' textcolor rgb '#c03030' notitle"
} | gnuplot
# One image panel per grid, 29 pixels a cell (28 and a gap), labels above each cell.
grid_plot() {
  local data=$1 out=$2 heading=$3 palette=$4
  echo "set terminal pngcairo size 1000,660 font ',8' noenhanced"
  echo "set output '$out'"
  echo "set title '$heading'"
  echo "unset xtics; unset ytics; unset colorbox; set border 0"
  echo "set palette $palette; set cbrange [0:1]; set yrange [] reverse; set size ratio -1"
  awk '{ printf "set label %d \"%s\" at %d,%d center front font \",7\" textcolor rgb \"%s\"\n", NR, $3, $2 * 29 + 14, $1 * 29 - 1, ($3 == $4 ? "black" : "red") }' "$dir/grid_labels.txt"
  echo "set offsets 0,0,3,0"
  echo "plot '$data' matrix using 1:2:3 with image notitle"
}
grid_plot "$dir/grid.txt" "${prefix}_grid.png" "$title: predictions on the first test images (red: wrong)" "grey" | gnuplot
if [ -f "$dir/attention.txt" ]; then
  grid_plot "$dir/attention.txt" "${prefix}_attention.png" "$title: attention of the class token over the patches (last block, mean of heads)" "defined (0 'white', 1 'dark-red')" | gnuplot
fi
ls "${prefix}"_*.png
