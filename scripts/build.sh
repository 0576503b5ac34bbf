#!/usr/bin/env bash
# Configures and builds xgrad. Usage: scripts/build.sh [build-dir] [extra cmake args...]
# XG_SANITIZE=1 builds with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/.
# XG_TARGETS="a b" builds only those targets (and what they need), not everything.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${XG_SANITIZE:-0}" = 1 ]; then
  dir=${1:-build-asan}
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DXG_SANITIZE=ON)
else
  dir=${1:-build}
  args=(-DCMAKE_BUILD_TYPE=Release)
fi
shift || true
cmake -S . -B "$dir" "${args[@]}" "$@" >/dev/null
start=$(date +%s)
targets=()
for t in ${XG_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
echo "build: $dir built in $(( $(date +%s) - start )) s"
