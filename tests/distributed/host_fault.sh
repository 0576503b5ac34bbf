#!/usr/bin/env bash
# A host lost in the middle of a run across 4 "hosts" (scripts/cluster.sh):
# its link cut (cut) or its processes killed (kill) once the run has written
# a checkpoint. The job must end on every other host within 30 s, naming the
# lost host, and the run must resume from the checkpoint on 2 hosts.
#
#   host_fault.sh cut|kill TRAIN_TASKS WORKDIR
#
# Exit 77 where this machine cannot make network namespaces (reported as skipped).
set -uo pipefail
mode=$1 program=$2 work=$3
cluster="bash $(dirname "$0")/../../scripts/cluster.sh"
ck=$work/host_fault_$mode.safetensors
log=$work/host_fault_$mode.log
args=(--steps 100000 --eval-every 100000 --no-samples --target 0 --checkpoint-every 10 --log-every 10 --checkpoint "$ck")
out=$($cluster up 4 --rate 1gbit 2>&1); rc=$?
if [ $rc = 77 ]; then echo "xg-skip (machine): $out"; exit 77; fi
[ $rc = 0 ] || { echo "$out"; exit 1; }
trap '$cluster down >/dev/null 2>&1' EXIT
rm -f "$ck"
$cluster run "$program" "${args[@]}" >"$log" 2>&1 &
job=$!
for _ in $(seq 600); do [ -f "$ck" ] && break; sleep 0.1; done
[ -f "$ck" ] || { echo "host_fault: no checkpoint after 60 s"; cat "$log"; exit 1; }
sleep 1
t0=$(date +%s.%N)
$cluster "$mode" 4
wait $job
status=$?
t1=$(date +%s.%N)
echo "host_fault: the job ended $(echo "$t1 - $t0" | bc | sed 's/^\./0./') s after the $mode, mpirun exit $status"
grep -E "lost communication with a remote daemon|Remote daemon|Peer host|exited on signal" "$log" | sort -u | head -3
$cluster down >/dev/null
$cluster up 2 --rate 1gbit >/dev/null || exit 1
$cluster run "$program" "${args[@]}" --resume --time-limit 3 2>&1 | grep -E "resumed from|^final task"
