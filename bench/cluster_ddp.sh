#!/usr/bin/env bash
# Weak scaling across two "hosts" of scripts/cluster.sh (network namespaces,
# TCP only), xgrad's DataParallel (OpenMPI) against PyTorch DDP (gloo), at
# each link rate given: one process of one thread per host, --batch per
# process. Prints each side's median step at 1 process and at 2 hosts per
# rate, as JSON lines, then the ratios. Root; the build in BUILD_DIR.
#   bash bench/cluster_ddp.sh BUILD_DIR [RATES (10gbit,1gbit)] [model flags (base's)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:?usage: cluster_ddp.sh BUILD_DIR [RATES] [flags]}" && pwd)
rates=${2:-10gbit,1gbit}
shift $(( $# >= 2 ? 2 : 1 ))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--vocab 1000 --len 64 --d-model 512 --heads 8 --layers 6 --d-ff 2048 --batch 16)
timing=(--steps 4 --warmup 1)
xg="$build/bench/xg_bench"
unset OPENBLAS_CORETYPE  # a user's machine does not set it
export XG_NUM_THREADS=1
export GLOO_SOCKET_IFNAME=eth0  # gloo's interface in each namespace (it would pick the host name's)
median() { /usr/bin/python3 -c 'import json,sys; v=sorted(json.loads(sys.stdin.read().strip().splitlines()[-1])["ms"]); print(v[len(v)//2])'; }
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(git rev-parse --short HEAD); ${flags[*]} ${timing[*]}"
x1=$("$xg" ddp "${flags[@]}" "${timing[@]}" --threads 1 | median)
t1=$(/usr/bin/python3 bench/torch_ddp.py "${flags[@]}" "${timing[@]}" --processes 1 2>/dev/null | median)
echo "{\"hosts\": 1, \"xgrad_ms\": $x1, \"pytorch_ms\": $t1}"
for rate in ${rates//,/ }; do
  bash scripts/cluster.sh up 2 --rate "$rate" >/dev/null
  x2=$(bash scripts/cluster.sh run "$xg" ddp "${flags[@]}" "${timing[@]}" --threads 1 2>/dev/null | median)
  ip netns exec xghost2 /usr/bin/python3 bench/torch_ddp.py "${flags[@]}" "${timing[@]}" --processes 2 --rank 1 \
    --master 10.77.0.2:29511 >/dev/null 2>&1 &
  t2=$(ip netns exec xghost1 /usr/bin/python3 bench/torch_ddp.py "${flags[@]}" "${timing[@]}" --processes 2 --rank 0 \
    --master 10.77.0.2:29511 2>/dev/null | median)
  wait
  bash scripts/cluster.sh down
  echo "{\"hosts\": 2, \"rate\": \"$rate\", \"xgrad_ms\": $x2, \"pytorch_ms\": $t2," \
       "\"xgrad_weak_scaling\": $(/usr/bin/python3 -c "print(round(2 * $x1 / $x2, 3))")," \
       "\"pytorch_weak_scaling\": $(/usr/bin/python3 -c "print(round(2 * $t1 / $t2, 3))")}"
done
