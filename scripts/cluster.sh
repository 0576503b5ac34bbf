#!/usr/bin/env bash
# A cluster on one machine, to rehearse training across hosts: N network
# namespaces ("hosts", each with its own address) joined by veth pairs and a
# bridge, the links shaped by tc (tbf, netem), and mpirun across them over TCP only
# (no shared memory between hosts). Needs root and iproute2 (ip, tc).
#
#   bash scripts/cluster.sh up N [--rate 10gbit] [--delay 0.2ms]
#   bash scripts/cluster.sh run PROGRAM [ARGS...]     # mpirun -np N, one process per host
#   bash scripts/cluster.sh status
#   bash scripts/cluster.sh cut I                     # host I loses its link (a cable pulled)
#   bash scripts/cluster.sh kill I                    # every process of host I killed (a host that dies)
#   bash scripts/cluster.sh down
#
# Host i is the namespace xghost<i> at 10.77.0.<i+1>/24 on the bridge xgbr0,
# whose own address (10.77.0.1) is where mpirun runs. `run` starts mpirun
# with a hostfile of those addresses, OpenMPI's TCP transport alone, and a
# launcher that runs each host's daemon inside its namespace (where a real
# cluster's mpirun uses ssh). --rate and --delay shape every host's sending
# side: the bandwidth of its link, and one-way latency.
#
# On real hosts, the same run is: a hostfile of their addresses, and
#   mpirun --hostfile HOSTS -np N --mca btl tcp,self \
#          --mca btl_tcp_if_include SUBNET --mca oob_tcp_if_include SUBNET PROGRAM ARGS...
# with the program and its data at the same path on every host.
#
# Exit codes: 0 done, 1 an error, 2 bad usage, 77 this machine cannot create
# network namespaces (not root, or no CAP_SYS_ADMIN in a container): a test
# reports itself skipped then, with the reason.
set -euo pipefail

state=${XG_CLUSTER_STATE:-/run/xgrad-cluster}
subnet=10.77.0
bridge=xgbr0

die() { echo "cluster: $*" >&2; exit 1; }
usage() { sed -n '7,12p' "$0" | sed 's/^#  */usage: /' >&2; exit 2; }

# Exit 77 with the reason when namespaces cannot be made here.
check_machine() {
  command -v ip >/dev/null && command -v tc >/dev/null || die "ip and tc are missing (apt-get install iproute2; scripts/setup.sh does)"
  [ "$(id -u)" = 0 ] || { echo "cluster: network namespaces need root" >&2; exit 77; }
  if ! ip netns add xgprobe 2>/dev/null; then
    echo "cluster: this machine cannot create network namespaces (no CAP_SYS_ADMIN?)" >&2
    exit 77
  fi
  ip netns del xgprobe
}

hosts() { [ -f "$state/hosts" ] && cat "$state/hosts" || echo 0; }

# The sending side of host $1: netem for a delay (and its rate), else a
# token bucket for the rate alone. Kernels without sch_netem (some VMs'
# have none) cannot add latency: exit 77, said so.
shape() {
  local ns=$1 rate=$2 delay=$3
  if [ -n "$delay" ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "$delay" ${rate:+rate "$rate"} 2>/dev/null || {
      echo "cluster: this kernel has no netem qdisc (sch_netem), so --delay cannot be added here" >&2
      down
      exit 77
    }
  elif [ -n "$rate" ]; then
    # A burst of 4 ms of traffic at the rate (at least 64 KiB): tbf's bucket.
    local bits
    bits=$(tc_bits "$rate")
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst $(( bits / 8 / 250 > 65536 ? bits / 8 / 250 : 65536 )) latency 50ms
  fi
}

# A tc rate ("10gbit", "500mbit", "100kbit": 1 kbit/s to 400 gbit/s) in bits per second.
tc_bits() {
  local r=$1 n unit bits
  [[ $r =~ ^([0-9]{1,6})(gbit|mbit|kbit)$ ]] || die "--rate $r: expected a whole number of gbit, mbit or kbit (10gbit)"
  n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case $unit in gbit) bits=$(( 10#$n * 1000000000 )) ;; mbit) bits=$(( 10#$n * 1000000 )) ;; kbit) bits=$(( 10#$n * 1000 )) ;; esac
  (( bits >= 1000 && bits <= 400000000000 )) || die "--rate $r: expected from 1kbit to 400gbit"
  echo "$bits"
}

down() {
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^xghost[0-9]+$/ {print $1}'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true  # a deleted namespace's processes would live on
    ip netns del "$ns"
  done
  for v in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^xgv[0-9]+@/ {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$v" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$state"
}

up() {
  local n=${1:-}; shift || true
  local rate="" delay=""
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) [ $# -ge 2 ] || die "--rate needs a value such as 10gbit"; rate=$2; shift 2 ;;
      --delay) [ $# -ge 2 ] || die "--delay needs a value such as 0.2ms"; delay=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up N: N '$n' must be a whole number from 1 to 200"
  # Bad values are refused before anything is made (a bad delay would look like a kernel without netem).
  [ -z "$rate" ] || tc_bits "$rate" >/dev/null
  [[ -z $delay || $delay =~ ^[0-9]{1,6}(\.[0-9]{1,3})?(us|ms|s)$ ]] ||
    die "--delay $delay: expected a time such as 0.2ms, 50us or 1s"
  check_machine
  down  # whatever an earlier run left
  mkdir -p "$state"
  ip link add "$bridge" type bridge
  ip addr add "$subnet.1/24" dev "$bridge"
  ip link set "$bridge" up
  : >"$state/hostfile"
  : >"$state/map"
  for i in $(seq 1 "$n"); do
    local ns=xghost$i addr=$subnet.$((i + 1))
    ip netns add "$ns"
    ip link add "xgv$i" type veth peer name eth0 netns "$ns"
    ip link set "xgv$i" master "$bridge" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    shape "$ns" "$rate" "$delay"
    echo "$addr slots=1" >>"$state/hostfile"
    echo "$addr $ns" >>"$state/map"
  done
  # OpenMPI's launcher: `rsh HOST COMMAND...` runs COMMAND in HOST's
# namespace, under the host's own name.
  cat >"$state/rsh" <<EOF
#!/bin/sh
host=\$1; shift
ns=\$(awk -v h="\$host" '\$1 == h {print \$2}' "$state/map")
[ -n "\$ns" ] || { echo "cluster: no host \$host" >&2; exit 1; }
# its own host name too (a UTS namespace): OpenMPI tells hosts apart by name
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns && exec \$*"
EOF
  chmod +x "$state/rsh"
  echo "$n" >"$state/hosts"
  echo "${rate:-unshaped} ${delay:-no added delay}" >"$state/links"
  echo "cluster: $n hosts (xghost1..xghost$n, $subnet.2..$subnet.$((n + 1))), links: $(cat "$state/links")"
}

run() {
  local n
  n=$(hosts)
  [ "$n" -ge 1 ] || die "no cluster is up (bash scripts/cluster.sh up N)"
  [ $# -ge 1 ] || usage
  # Every host reads the program and writes its files through the one
  # filesystem the namespaces share; only the network is theirs.
  # TCP keepalive on the launcher's connections (after 5 s idle, a probe
  # every 2 s, lost after 4): a host that vanishes without closing them (a
  # cut link, a power loss) ends the job in about 15 s, where OpenMPI's
  # defaults (300 s, 20 s, 9) wait 8 minutes.
  exec mpirun --allow-run-as-root --bind-to none -np "$n" --hostfile "$state/hostfile" \
    --mca plm_rsh_agent "$state/rsh" --mca plm_rsh_no_tree_spawn 1 --mca routed direct --mca btl tcp,self \
    --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" \
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 4 "$@"
}

# Host $1 of the cluster: its number checked.
host_number() {
  local n i=${1:-}
  n=$(hosts)
  [ "$n" -ge 1 ] || die "no cluster is up (bash scripts/cluster.sh up N)"
  [[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$n" ] || die "host '$i': expected a number from 1 to $n"
  echo "$i"
}

cut_link() {
  local i
  i=$(host_number "${1:-}")
  ip link set "xgv$i" down
  echo "cluster: host $i (xghost$i) cut off"
}

kill_host() {
  local i pids
  i=$(host_number "${1:-}")
  pids=$(ip netns pids "xghost$i" | tr '\n' ' ')
  [ -n "$pids" ] && kill -9 $pids
  echo "cluster: host $i (xghost$i): killed ${pids:-no process}"
}

status() {
  local n
  n=$(hosts)
  if [ "$n" = 0 ]; then echo "cluster: down"; return; fi
  echo "cluster: $n hosts, links: $(cat "$state/links")"
  cat "$state/map"
}

cmd=${1:-}
shift || true
case $cmd in
  up) up "$@" ;;
  down) down ;;
  run) run "$@" ;;
  status) status ;;
  cut) cut_link "$@" ;;
  kill) kill_host "$@" ;;
  *) usage ;;
esac
