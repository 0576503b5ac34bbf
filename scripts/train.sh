#!/usr/bin/env bash
# Installs what is missing, builds the trainer in Release, and trains the Transformer on
# the copy task with the default settings. Extra arguments go to the trainer,
# e.g. scripts/train.sh --task reverse
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Only the library and the trainer: the tests and the other programs are
# built by scripts/test.sh.
XG_TARGETS=train_tasks bash scripts/build.sh
exec ./build/apps/seq2seq/train_tasks "$@"
