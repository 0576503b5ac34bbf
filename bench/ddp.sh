#!/usr/bin/env bash
# Data-parallel benchmark, xgrad (OpenMPI) against PyTorch DDP (gloo), one command:
#   bash bench/ddp.sh [ddp.py flags, e.g. --configs small --precision f32,bf16]
# Installs what is missing (python3-torch included), builds in Release, runs bench/ddp.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/prepare.sh
exec /usr/bin/python3 bench/ddp.py "$@"
