#!/usr/bin/env bash
# What both benchmarks need on a fresh Debian 12 (as root): the project's
# packages (scripts/setup.sh), python3-torch (Debian's PyTorch 1.13.1) if
# missing, and a Release build in build/.
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
