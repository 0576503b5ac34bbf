#!/usr/bin/env bash
# Installs xgrad from BUILD_DIR into a temporary prefix, then builds and runs
# tests/consumer/main.cpp twice, out of tree: with find_package(xgrad) and with
# `pkg-config --cflags --libs xgrad`.   Usage: run.sh BUILD_DIR cmake|pkg-config
set -euo pipefail
build=$(cd "$1" && pwd)
how=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$build/consumer-$how
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
case $how in
  cmake)
    cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$work/build" >/dev/null
    "$work/build/consumer" ;;
  pkg-config)
    pc=$(find "$work/prefix" -name xgrad.pc)
    flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs xgrad)
    echo "pkg-config --cflags --libs xgrad: $flags"
    # shellcheck disable=SC2086
    g++ -O2 "$here/main.cpp" -o "$work/consumer" $flags
    "$work/consumer" ;;
  *) echo "run.sh: expected cmake or pkg-config, got '$how'" >&2; exit 2 ;;
esac
