#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through CTest.
# XG_SANITIZE=1 runs it under ASan + UBSan instead (build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
dir=build
[ "${XG_SANITIZE:-0}" = 1 ] && dir=build-asan
cd "$dir"
ctest --output-on-failure -j"$(nproc)"
