#!/usr/bin/env bash
# scripts/emulated-cluster.sh — a multi-node cluster on one machine, out of the
# kernel's own parts, for scaling studies and the `cluster` tests.
#
#   scripts/emulated-cluster.sh up [--nodes N] [--preset 1gbe|10gbe|ib-edr] [--rate R] [--delay D]
#                                  [--name NAME] [--slots S] [--controller]
#   scripts/emulated-cluster.sh down|status [--name NAME]
#   scripts/emulated-cluster.sh exec NODE [--name NAME] -- CMD...   (run CMD on node NODE, e.g. node1,
#                                                                    or on the controller: ctl)
#   scripts/emulated-cluster.sh mpirun [--name NAME] -- MPIRUN-ARGS...
#                       (Open MPI's mpirun, started on node1, with the cluster's
#                        host file and rsh agent: ranks land on node1..nodeN)
#
# Links: MTU 9000 (jumbo frames, as HPC Ethernet is set up) and no TCP slow
# start after idle (a per-namespace sysctl). Measured here, 1gbe: 0.86–0.99
# Gb/s of ping-pong bandwidth between nodes (16–256 MiB messages, by load).
#
# Each node is a network namespace *and* a UTS namespace of its own (its own
# host name nodeK, so Open MPI and Slurm see separate nodes and use TCP between
# them; with one host name they would fall back to shared memory). Node K has
# eth0 = 198.18.<i>.K/24 (i = the cluster's index, from its name), a veth whose
# other end is a port of a bridge in a namespace of its own. Every address is in
# the benchmarking range 198.18.0.0/15 (RFC 2544) and exists only inside those
# namespaces: the host's interfaces, routes and firewall are never touched.
#
# Shaping (tc, both directions of each node's link: node→bridge on the node's
# eth0, bridge→node on the bridge's port): a full-duplex link of rate R (a
# token bucket, tbf) with one-way delay D per hop (netem; a node-to-node path
# crosses two hops: 2·D). Kernels without sch_netem (this project's VMs) get
# the rate only: a preset's delay is then dropped with a message, an explicit
# --delay is refused; the veth path's own latency (6–11 µs one way, ping-pong of 8 B, on an idle machine; through
# TCP here) stands in for it.
#   1gbe    R = 1 Gbit/s,   D = 25 µs
#   10gbe   R = 10 Gbit/s,  D = 10 µs
#   ib-edr  R = 100 Gbit/s, D = 0.5 µs (InfiniBand EDR-like; veth + TCP on this
#           machine's cores reaches far less: `status` and the ping-pong test show
#           what a link really gives)
#   none    no shaping (veth speed)
# --rate (tc units: 1gbit, 500mbit) and --delay (25us, 1ms) override a preset.
#
# --controller: one more namespace, NAME-ctl, for a cluster's controller (the
# Slurm of slurm/local-cluster.sh --nodes runs slurmctld there): eth0 =
# 198.18.<i>.254/24 on the same bridge, unshaped, UTS host name `ctl`. It is no
# node: not in the host file, not a target of mpirun; `exec ctl` runs in it.
#
# State: /run/dtrain-cluster/NAME/ (nodes, addresses, the UTS namespaces'
# files, the host file, the rsh agent). `down` kills every process in the
# cluster's namespaces, deletes the namespaces (and with them the veths and the
# bridge) and the state; an EXIT trap does the same when `up` fails half-way.
# `up` of a cluster that exists is refused (run `down` first).
#
# mpirun: the rsh agent (state/rsh) is what Open MPI's plm_rsh_agent calls as
# `rsh HOST CMD...`; it runs CMD under /bin/sh in HOST's namespaces. HOST is a
# node's address (the host file lists addresses: no name resolution is needed,
# the host's /etc/hosts is not touched). `mpirun` below starts mpirun itself in
# node1 (the "login node"), so the daemons connect back over the bridge.
# It raises Open MPI's TCP eager limit to 1 MiB (+ header): the ring allreduce
# sends 512 KiB pieces, and under TCP's rendezvous each piece waited for a
# clear-to-send before its data left. Measured on 1gbe, ResNet-50's 102 MB
# arena: 2 nodes 1.13 → 0.83 s per exchange (P/B = 0.82 s), 4 nodes
# 1.5–2.1 → 1.25 s (1.5·P/B = 1.23 s). An Ethernet cluster's MPI
# wants the same (OMPI_MCA_btl_tcp_eager_limit; slurm/README.md).
# Needs root, iproute2 (ip, tc, bridge), util-linux (unshare, nsenter).
set -euo pipefail

die() { echo "emulated-cluster: $*" >&2; exit 2; }
need_root() { [ "$(id -u)" = 0 ] || die "needs root (network and UTS namespaces)"; }

cmd=${1:-}; [ -n "$cmd" ] && shift || true
NAME=dtc NODES=2 PRESET=1gbe RATE="" DELAY="" SLOTS=0 DELAY_GIVEN=0 CONTROLLER=0
case $cmd in
  -h|--help|help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
while [ $# -gt 0 ]; do
  case $1 in
    --nodes|--preset|--rate|--delay|--name|--slots) [ $# -ge 2 ] || die "$1 needs a value (usage: $0 --help)" ;;
  esac
  case $1 in
    --nodes) NODES=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --delay) DELAY=$2; DELAY_GIVEN=1; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --slots) SLOTS=$2; shift 2 ;;
    --controller) CONTROLLER=1; shift ;;
    --) shift; break ;;
    node[0-9]*|ctl) NODE=$1; shift ;;
    *) die "unknown argument '$1' (usage: see the top of $0)" ;;
  esac
done
[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--name '$NAME': 1–8 lower-case letters and digits, starting with a letter"
[[ $NODES =~ ^[0-9]+$ ]] && [ "$NODES" -ge 1 ] && [ "$NODES" -le 64 ] || die "--nodes '$NODES': 1..64"
[[ $SLOTS =~ ^[0-9]+$ ]] && [ "$SLOTS" -le 4096 ] || die "--slots '$SLOTS': 0 (the machine's cores) to 4096"
STATE=/run/dtrain-cluster/$NAME
BR_NS=$NAME-br
CTL_NS=$NAME-ctl
# The cluster's third address octet: 198.18.<idx>.0/24, idx from the name (stable, 1..254).
idx=$(( $(printf '%s' "$NAME" | cksum | cut -d' ' -f1) % 254 + 1 ))
node_ns() { echo "$NAME-n$1"; }
node_ip() { echo "198.18.$idx.$1"; }

case $PRESET in
  1gbe) P_RATE=1gbit P_DELAY=25us ;;
  10gbe) P_RATE=10gbit P_DELAY=10us ;;
  ib-edr) P_RATE=100gbit P_DELAY=500ns ;;
  none) P_RATE="" P_DELAY="" ;;
  *) die "--preset '$PRESET': 1gbe | 10gbe | ib-edr | none" ;;
esac
RATE=${RATE:-$P_RATE} DELAY=${DELAY:-$P_DELAY}

# Every process whose network namespace is one of the cluster's.
cluster_pids() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-(br|ctl|n[0-9]+)$" || true); do
    ip netns pids "$ns" 2>/dev/null || true
  done
}

teardown() {
  local pids tries=0
  pids=$(cluster_pids)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null || true
    while [ -n "$(cluster_pids)" ] && [ $tries -lt 30 ]; do sleep 0.1; tries=$((tries + 1)); done
    pids=$(cluster_pids); [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  fi
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-(br|ctl|n[0-9]+)$" || true); do
    ip netns delete "$ns" 2>/dev/null || true
  done
  if [ -d "$STATE/uts" ]; then
    local f
    for f in "$STATE"/uts/*; do [ -e "$f" ] || continue; umount "$f" 2>/dev/null || true; rm -f "$f"; done
  fi
  rm -rf "$STATE"
}

# exec_on K CMD...: CMD in node K's network and UTS namespaces (K = ctl: the controller's).
exec_on() {
  local k=$1; shift
  [ "$k" != ctl ] || exec nsenter --net="/run/netns/$CTL_NS" --uts="$STATE/uts/ctl" -- "$@"
  exec nsenter --net="/run/netns/$(node_ns "$k")" --uts="$STATE/uts/node$k" -- "$@"
}

# rate_bits "1gbit" → 1000000000 (tc's units: bit kbit mbit gbit, decimal).
# Decimals and any case, as tc takes them (1.5gbit, 1Gbit); bits/s, an integer.
rate_bits() {
  local v=${1,,}
  [[ $v =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit)$ ]] ||
    die "--rate '$1': a number with bit, kbit, mbit or gbit (e.g. 1gbit, 1.5gbit)"
  local f
  case ${BASH_REMATCH[3]} in bit) f=1 ;; kbit) f=1000 ;; mbit) f=1000000 ;; gbit) f=1000000000 ;; esac
  local b
  b=$(awk -v n="${BASH_REMATCH[1]}" -v f="$f" 'BEGIN { printf "%.0f", n * f }')
  [ "$b" -ge 1000 ] || die "--rate '$1': at least 1kbit"
  echo "$b"
}

have_netem() {  # the kernel's sch_netem (not every kernel has it: this VM's has not)
  local t=$NAME-qt ok=1
  ip netns add "$t" && ip -n "$t" link add q0 type veth peer name q1 &&
    nsenter --net="/run/netns/$t" tc qdisc add dev q0 root netem delay 1us 2>/dev/null && ok=0
  ip netns delete "$t" 2>/dev/null || true
  return $ok
}

# shape NS DEV: the egress of DEV in NS at RATE, with DELAY (netem) when asked for.
# Rate: a token bucket (tbf) with a bucket of 1 ms at the rate (at least 128 KiB,
# more than one GSO packet) and 20 ms of queue; delay: netem, with the rate too.
shape() {
  local ns=$1 dev=$2
  [ -n "$RATE$DELAY" ] || return 0
  if [ -n "$DELAY" ] && [ "$NETEM" = 1 ]; then
    nsenter --net="/run/netns/$ns" tc qdisc add dev "$dev" root netem limit 100000 delay "$DELAY" ${RATE:+rate "$RATE"}
  elif [ -n "$RATE" ]; then
    local bits burst
    bits=$(rate_bits "$RATE")
    burst=$((bits / 8 / 1000)); [ $burst -ge 131072 ] || burst=131072
    nsenter --net="/run/netns/$ns" tc qdisc add dev "$dev" root tbf rate "$RATE" burst "$burst" latency 20ms
  fi
}

up() {
  need_root
  for t in ip tc nsenter unshare; do command -v $t > /dev/null || die "'$t' not found (iproute2, util-linux)"; done
  [ ! -e "$STATE" ] || die "a cluster '$NAME' exists ($STATE): scripts/emulated-cluster.sh down --name $NAME first"
  if ip netns list | awk '{print $1}' | grep -qE "^$NAME-(br|ctl|n[0-9]+)$"; then
    die "namespaces named $NAME-* exist without $STATE: scripts/emulated-cluster.sh down --name $NAME"
  fi
  [ -z "$RATE" ] || { rate_bits "$RATE" > /dev/null; RATE=${RATE,,}; }  # checked before anything is made
  trap 'rc=$?; if [ $rc != 0 ]; then echo "emulated-cluster: up failed, removing what it made" >&2; teardown; fi' EXIT
  NETEM=0
  if [ -n "$DELAY" ]; then
    if have_netem; then NETEM=1
    elif [ "$DELAY_GIVEN" = 1 ]; then die "--delay $DELAY: this kernel has no netem qdisc (sch_netem), so no delay can be added"
    else
      echo "emulated-cluster: this kernel has no netem qdisc (sch_netem): the preset's delay ($DELAY) is not added;" \
        "links have the veth's own latency (the ping-pong test measures it)" >&2
      DELAY=""
    fi
  fi
  mkdir -p "$STATE/uts"
  ip netns add "$BR_NS"
  ip -n "$BR_NS" link set lo up
  ip -n "$BR_NS" link add br0 type bridge
  ip -n "$BR_NS" link set br0 up
  local k ns
  for k in $(seq 1 "$NODES"); do
    ns=$(node_ns "$k")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # The veth is made inside the node's namespace, so no interface ever appears in the host's.
    ip -n "$ns" link add eth0 type veth peer name "p$k" netns "$BR_NS"
    ip -n "$ns" addr add "$(node_ip "$k")/24" dev eth0
    ip -n "$ns" link set eth0 mtu 9000 up
    ip -n "$BR_NS" link set "p$k" mtu 9000 master br0 up
    # TCP as a cluster's is tuned: no slow start after an idle gap (each direction of a
    # ping-pong, or of a parameter server's push/pull, idles while the other runs).
    nsenter --net="/run/netns/$ns" sysctl -q -w net.ipv4.tcp_slow_start_after_idle=0
    shape "$ns" eth0
    shape "$BR_NS" "p$k"
    # The UTS namespace, kept by a bind mount on a file (util-linux's persistent namespaces).
    touch "$STATE/uts/node$k"
    unshare --uts="$STATE/uts/node$k" hostname "node$k"
    echo "node$k $(node_ip "$k") $ns" >> "$STATE/nodes"
  done
  if [ "$CONTROLLER" = 1 ]; then
    ip netns add "$CTL_NS"
    ip -n "$CTL_NS" link set lo up
    ip -n "$CTL_NS" link add eth0 type veth peer name pctl netns "$BR_NS"
    ip -n "$CTL_NS" addr add "$(node_ip 254)/24" dev eth0
    ip -n "$CTL_NS" link set eth0 mtu 9000 up
    ip -n "$BR_NS" link set pctl mtu 9000 master br0 up
    touch "$STATE/uts/ctl"
    unshare --uts="$STATE/uts/ctl" hostname ctl
    echo "ctl $(node_ip 254) $CTL_NS" > "$STATE/controller"
  fi
  local slots=$SLOTS
  [ "$slots" -gt 0 ] || slots=$(nproc)
  awk -v s="$slots" '{print $2, "slots=" s}' "$STATE/nodes" > "$STATE/hostfile"
  printf '%s\n' "nodes=$NODES" "preset=$PRESET" "rate=${RATE:-none}" "delay=${DELAY:-none}" "subnet=198.18.$idx.0/24" \
    "controller=$([ "$CONTROLLER" = 1 ] && echo "ctl($(node_ip 254))" || echo none)" > "$STATE/config"
  cat > "$STATE/rsh" <<EOF
#!/bin/sh
# Open MPI's rsh agent for the emulated cluster '$NAME': rsh HOST CMD... runs
# CMD in HOST's network and UTS namespaces (HOST: a node's address or name).
host=\$1; shift
line=\$(awk -v h="\$host" '\$1 == h || \$2 == h' "$STATE/nodes")
[ -n "\$line" ] || { echo "emulated-cluster rsh: no node '\$host' in $STATE/nodes" >&2; exit 255; }
set -- \$line "\$*"
exec nsenter --net=/run/netns/\$3 --uts=$STATE/uts/\$1 -- /bin/sh -c "\$4"
EOF
  chmod +x "$STATE/rsh"
  trap - EXIT
  status
}

status() {
  [ -d "$STATE" ] || { echo "emulated cluster '$NAME': not up"; return 3; }
  echo "emulated cluster '$NAME': $(tr '\n' ' ' < "$STATE/config")"
  echo "  state $STATE; host file $STATE/hostfile; rsh agent $STATE/rsh"
  local name ip ns
  while read -r name ip ns; do
    local hn qd
    hn=$(nsenter --net="/run/netns/$ns" --uts="$STATE/uts/$name" hostname 2>/dev/null || echo "?")
    qd=$(nsenter --net="/run/netns/$ns" tc qdisc show dev eth0 2>/dev/null | head -1 | sed 's/^qdisc //')
    echo "  $name  host name $hn  eth0 $ip  ns $ns  processes $(ip netns pids "$ns" 2>/dev/null | wc -l)  egress: ${qd:-?}"
  done < "$STATE/nodes"
  if [ -s "$STATE/controller" ]; then
    read -r name ip ns < "$STATE/controller"
    echo "  $name  host name $(nsenter --net="/run/netns/$ns" --uts="$STATE/uts/ctl" hostname 2>/dev/null || echo "?")" \
      " eth0 $ip  ns $ns  processes $(ip netns pids "$ns" 2>/dev/null | wc -l)  (controller, unshaped)"
  fi
}

case $cmd in
  up) up ;;
  down) need_root; teardown; echo "emulated cluster '$NAME': down" ;;
  status) status ;;
  exec)
    [ -d "$STATE" ] || die "cluster '$NAME' is not up"
    [ -n "${NODE:-}" ] || die "exec: which node? (exec node1 -- CMD)"
    k=${NODE#node}
    if [ "$NODE" = ctl ]; then [ -s "$STATE/controller" ] || die "cluster '$NAME' has no controller (up --controller)"
    else grep -q "^node$k " "$STATE/nodes" || die "no node '$NODE' in cluster '$NAME'"; fi
    [ $# -gt 0 ] || die "exec $NODE: no command (exec $NODE -- CMD...)"
    exec_on "$k" "$@" ;;
  mpirun)
    [ -d "$STATE" ] || die "cluster '$NAME' is not up"
    # TCP between nodes on eth0 only; shared memory within a node; the daemons
    # are started by the rsh agent; rank placement by node (fill node1, then node2);
    # 1 MiB pieces go eagerly (see the top of the script).
    exec_on 1 mpirun --hostfile "$STATE/hostfile" --mca plm_rsh_agent "$STATE/rsh" \
      --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      --mca plm_rsh_no_tree_spawn 1 --mca btl_tcp_eager_limit 1048640 --mca btl_tcp_rndv_eager_limit 1048640 "$@" ;;
  *) die "usage: $0 up|down|status|exec|mpirun [options] (see the top of the script)" ;;
esac
