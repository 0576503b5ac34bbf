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
# A test that cannot run here is reported as skipped, with its reason.
# XG_NO_SKIPS=1 (.ci/run) fails the run when any skip is not the hardware's.
ctest --output-on-failure -j"$(nproc)" --output-junit "$PWD/ctest-junit.xml"
if [ "${XG_NO_SKIPS:-0}" = 1 ]; then
  python3 ../scripts/check_skips.py ctest-junit.xml
fi
