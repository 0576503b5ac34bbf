#!/usr/bin/env bash
# Installs what is missing, builds in Release, and trains the Transformer on
# the copy task with the default settings. Extra arguments go to the trainer,
# e.g. scripts/train.sh --task reverse
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec ./build/apps/seq2seq/train_tasks "$@"
