#!/usr/bin/env bash
# Installs xgrad from BUILD_DIR into a temporary prefix, then builds and runs
# tests/consumer/main.cpp twice, out of tree (with find_package, also
# export.cpp through xgrad::onnx and the installed xg_export): with find_package(xgrad) and with
# `pkg-config --cflags --libs xgrad`; with "deb", packs the .deb (cpack), unpacks
# it into a temporary root (dpkg-deb -x, no root needed) and builds against that;
# with "headers", compiles one file including every installed header with
# -Wall -Wextra -Werror and checks that none pulls in CLI11, <mpi.h> or a
# detail/ header (the installed headers are the public API).
#   Usage: run.sh BUILD_DIR cmake|pkg-config|deb|headers
set -euo pipefail
build=$(cd "$1" && pwd)
how=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$build/consumer-$how
rm -rf "$work"
mkdir -p "$work"
if [ "$how" = deb ]; then
  (cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" >/dev/null)
  deb=$(ls "$work"/libxgrad-dev_*.deb)
  echo "package: $(basename "$deb"), depends: $(dpkg-deb -f "$deb" Depends)"
  dpkg-deb -x "$deb" "$work/root"
  mkdir -p "$work/prefix"
  ln -s "$work/root/usr"/* "$work/prefix/"
  how=cmake
else
  cmake --install "$build" --prefix "$work/prefix" >/dev/null
fi
case $how in
  cmake)
    cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$work/build" >/dev/null
    "$work/build/consumer_export" "$work/model.onnx"
    "$work/prefix/bin/xg_export" --help | head -n 1
    "$work/build/consumer" ;;
  headers)
    inc=$work/prefix/include/xgrad
    find "$inc" -name '*.h' | sort | sed "s|^$inc/|#include \"|; s|\$|\"|" >"$work/all.cpp"
    echo 'int main() { return 0; }' >>"$work/all.cpp"
    count=$(grep -c '^#include' "$work/all.cpp")
    # Only the install's include folder and the system's: no CLI11 or MPI include path is added.
    g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$work/all.cpp"
    deps=$(g++ -std=c++17 -M -I"$inc" "$work/all.cpp" | tr ' \\' '\n\n' | grep -E '/CLI/|mpi\.h|/detail/' || true)
    if [ -n "$deps" ]; then
      echo "headers: the installed headers include what the API must not expose:"
      echo "$deps"
      exit 1
    fi
    echo "headers: $count installed, all compile together with -Wall -Wextra -Werror; none includes CLI11, <mpi.h> or a detail/ header" ;;
  pkg-config)
    pc=$(find "$work/prefix" -name xgrad.pc)
    flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs xgrad)
    echo "pkg-config --cflags --libs xgrad: $flags"
    # shellcheck disable=SC2086
    g++ -O2 "$here/main.cpp" -o "$work/consumer" $flags
    "$work/consumer" ;;
  *) echo "run.sh: expected cmake, pkg-config or deb, got '$how'" >&2; exit 2 ;;
esac
