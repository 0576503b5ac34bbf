#!/usr/bin/env bash
# A resume where rank 1 cannot see the checkpoint (its own mount namespace
# hides the folder, as a host without the shared file system would): every
# process must stop with the error that names the path, never split into a
# resumed and a fresh run, never hang.
#
#   resume_unseen.sh TRAIN_TASKS WORKDIR "MPIRUN..."
#
# Exit 77 where this machine cannot make mount namespaces (reported as skipped).
set -uo pipefail
program=$1 work=$2/resume_unseen mpirun=$3
if ! unshare -m true 2>/dev/null; then echo "xg-skip (machine): no mount namespaces here (not root?)"; exit 77; fi
rm -rf "$work" && mkdir -p "$work"
args=(--eval-every 10 --eval-size 20 --no-samples --target 0 --checkpoint "$work/ck.safetensors")
"$program" --steps 10 "${args[@]}" >/dev/null 2>&1 || { echo "resume_unseen: the first run failed"; exit 1; }
# shellcheck disable=SC2016
timeout 60 $mpirun -np 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec unshare -m sh -c "mount -t tmpfs none \"$1\" && shift && exec \"\$@\"" sh "$@"; else shift; exec "$@"; fi' \
  sh "$work" "$program" --steps 20 "${args[@]}" --resume 2>&1 | grep -E "^train_tasks: rank [01]: --resume" | sort
echo "exit=${PIPESTATUS[0]}"
