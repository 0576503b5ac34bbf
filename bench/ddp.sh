#!/usr/bin/env bash
# Data-parallel benchmark, xgrad (OpenMPI) against PyTorch DDP (gloo), one command:
#   bash bench/ddp.sh [ddp.py flags, e.g. --configs small --precision f32,bf16]
# Installs what is missing (python3-torch included), builds in Release, runs bench/ddp.py.
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
exec /usr/bin/python3 bench/ddp.py "$@"
