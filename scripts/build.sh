#!/usr/bin/env bash
# Configures and builds xgrad. Usage: scripts/build.sh [build-dir] [extra cmake args...]
# XG_SANITIZE=1 builds with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/.
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
cmake --build "$dir" -j"$(nproc)"
echo "build: $dir built in $(( $(date +%s) - start )) s"
