#!/usr/bin/env bash
# The benchmark, side by side with PyTorch, with one command (fresh Debian 12, as root):
#   bash bench/run.sh [compare.py flags, e.g. --configs tiny,small --threads 1]
#   bash bench/run.sh --all [all.py flags]   every workload in one table (bench/all.py)
# Installs python3-torch (Debian's PyTorch 1.13.1) if missing, builds in Release, runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/prepare.sh
if [ "${1:-}" = "--all" ]; then
  shift
  exec /usr/bin/python3 bench/all.py "$@"
fi
exec /usr/bin/python3 bench/compare.py "$@"
