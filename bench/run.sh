#!/usr/bin/env bash
# The benchmark, side by side with PyTorch, with one command (fresh Debian 12, as root):
#   bash bench/run.sh [compare.py flags, e.g. --configs tiny,small --threads 1]
# Installs python3-torch (Debian's PyTorch 1.13.1) if missing, builds in Release, runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi
bash scripts/build.sh >/dev/null
exec /usr/bin/python3 bench/compare.py "$@"
