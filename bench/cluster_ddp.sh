#!/usr/bin/env bash
# Weak scaling across two "hosts" of scripts/cluster.sh (network namespaces,
# TCP only), xgrad's DataParallel (OpenMPI) against PyTorch DDP (gloo), at
# each link rate given: one process of one thread per host, --batch per
# process. Root; the build in BUILD_DIR.
#   bash bench/cluster_ddp.sh BUILD_DIR [RATES (10gbit,1gbit)] [ROUNDS (1)] [model flags (base's)]
#   e.g. ... 10gbit 3 --model resnet --batch 128 --steps 20 --warmup 3   (ResNet-20)
# Each round runs, per side: 1 process alone; then at each rate, 2 hosts
# exchanging the gradients and the same 2 hosts without any exchange
# (--comm 0). The exchange's exposed cost is the difference of those two
# steps; the share it hides is 1 - exposed / (one allreduce of all the
# gradients alone, timed by each side after training). Prints one JSON line
# per run with each side's median step, then per rate and side the medians
# over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:?usage: cluster_ddp.sh BUILD_DIR [RATES] [ROUNDS] [flags]}" && pwd)
rates=${2:-10gbit,1gbit}
rounds=${3:-1}
[[ "$rounds" =~ ^[1-9][0-9]{0,2}$ ]] || { echo "cluster_ddp.sh: ROUNDS '$rounds': expected a whole number from 1 to 999" >&2; exit 2; }
shift $(( $# >= 3 ? 3 : $# ))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--vocab 1000 --len 64 --d-model 512 --heads 8 --layers 6 --d-ff 2048 --batch 16)
timing=(--steps 4 --warmup 1)
[[ " ${flags[*]} " == *" --steps "* ]] && timing=()  # the flags' own --steps and --warmup
xg="$build/bench/xg_bench"
unset OPENBLAS_CORETYPE  # a user's machine does not set it
# One thread per process on both sides, as bench/ddp.py sets it: without
# OPENBLAS_NUM_THREADS, Debian's OpenBLAS runs PyTorch's float32 products on
# every core of the machine under torch.set_num_threads(1), so one process
# would use 2 cores and two would oversubscribe them.
export XG_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export GLOO_SOCKET_IFNAME=eth0  # gloo's interface in each namespace (it would pick the host name's)
# The last JSON line of stdin as one line: {"median_ms": ..., "allreduce_ms": ...}.
summary() {
  /usr/bin/python3 -c 'import json,sys
j = json.loads(sys.stdin.read().strip().splitlines()[-1]); v = sorted(j["ms"])
print(json.dumps({"median_ms": v[len(v) // 2], "allreduce_ms": j.get("allreduce_ms")}))'
}
torch2() {  # torch2 --comm C: PyTorch DDP across the two namespace hosts; rank 0's summary
  ip netns exec xghost2 /usr/bin/python3 bench/torch_ddp.py "${flags[@]}" "${timing[@]}" --processes 2 --rank 1 \
    --master 10.77.0.2:29511 "$@" >/dev/null 2>&1 &
  ip netns exec xghost1 /usr/bin/python3 bench/torch_ddp.py "${flags[@]}" "${timing[@]}" --processes 2 --rank 0 \
    --master 10.77.0.2:29511 "$@" 2>/dev/null | summary
  wait
}
echo "# $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p')), $(nproc --all) cores;" \
     "$(git rev-parse --short HEAD); ${flags[*]} ${timing[*]}; $rounds round(s)"
log=$(mktemp)
for round in $(seq 1 "$rounds"); do
  echo "{\"round\": $round, \"hosts\": 1, \"xgrad\": $("$xg" ddp "${flags[@]}" "${timing[@]}" --threads 1 | summary)," \
       "\"pytorch\": $(/usr/bin/python3 bench/torch_ddp.py "${flags[@]}" "${timing[@]}" --processes 1 2>/dev/null | summary)}" \
    | tee -a "$log"
  for rate in ${rates//,/ }; do
    bash scripts/cluster.sh up 2 --rate "$rate" >/dev/null
    for comm in 1 0; do
      x=$(bash scripts/cluster.sh run "$xg" ddp "${flags[@]}" "${timing[@]}" --threads 1 --comm "$comm" 2>/dev/null | summary)
      t=$(torch2 --comm "$comm")
      echo "{\"round\": $round, \"hosts\": 2, \"rate\": \"$rate\", \"comm\": $comm, \"xgrad\": $x, \"pytorch\": $t}" | tee -a "$log"
    done
    bash scripts/cluster.sh down
  done
done
/usr/bin/python3 - "$log" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
def med(side, **match):
    v = [r[side]["median_ms"] for r in runs if all(r.get(k) == w for k, w in match.items())]
    return statistics.median(v) if v else float("nan")
def alone(side, rate):
    v = [r[side]["allreduce_ms"] for r in runs if r.get("rate") == rate and r.get("comm") == 1 and r[side]["allreduce_ms"]]
    return statistics.median(v) if v else float("nan")
print("\n| link | side | 1 host ms | 2 hosts ms | weak scaling | 2 hosts, no exchange ms | exposed exchange ms "
      "| allreduce alone ms | hidden share |")
print("|---|---|---|---|---|---|---|---|---|")
for rate in dict.fromkeys(r["rate"] for r in runs if "rate" in r):
    for side in ("xgrad", "pytorch"):
        one, two, off = med(side, hosts=1), med(side, rate=rate, comm=1), med(side, rate=rate, comm=0)
        exposed, a = two - off, alone(side, rate)
        print(f"| {rate} | {side} | {one:.0f} | {two:.0f} | {2 * one / two:.2f} | {off:.0f} | {exposed:.0f} | {a:.0f} "
              f"| {1 - exposed / a:.2f} |")
EOF
rm -f "$log"
