#!/usr/bin/env bash
# slurm/local-cluster.sh — a Slurm on one machine (munged, slurmctld, slurmd
# from Debian's munge and slurm-wlm) in a temporary state directory, for the
# test suite and for trying the batch scripts on a laptop or a single box:
# one node on localhost, or N nodes of an emulated cluster
# (scripts/emulated-cluster.sh, network + UTS namespaces on a bridge).
#
#   eval "$(slurm/local-cluster.sh start)"   # prints: export SLURM_CONF=… DTRAIN_SLURM_STATE=…
#   eval "$(slurm/local-cluster.sh start --nodes N [--cluster NAME] [--preset P])"
#                                            # also prints PATH=STATE/bin:$PATH (see below)
#   sinfo; sbatch …; squeue
#   slurm/local-cluster.sh status            # daemons alive?, sinfo, squeue
#   slurm/local-cluster.sh stop              # cancels its jobs, stops its daemons
#
# The state directory comes from the argument after the command (and its
# options), else from $DTRAIN_SLURM_STATE, else (start only) a new
# `mktemp -d`. Everything lives in it: munge key and socket, slurm.conf, spool
# and state folders, logs, and `pids` — the PIDs of exactly the daemons
# `start` started. `stop` signals only those PIDs (checking each one still
# runs the program it started), plus the slurmstepd processes that carry this
# cluster's SLURM_CONF in their environment, then removes the directory (keep
# it with DTRAIN_SLURM_KEEP=1).
#
# Facts verified on Debian 12 containers without systemd (see issue 6): munged
# is started by hand on its own socket and Slurm finds it through
# AuthInfo=socket=…; proctrack/linuxproc and task/affinity (no cgroup plugins —
# but slurmd 22.05 still stops at start-up unless /sys/fs/cgroup is mounted,
# even read-only, as scripts/fresh-machine-check.sh found in a chroot);
# task/affinity binds each task with sched_setaffinity, no cgroup needed, so
# srun --cpu-bind is real here (DTRAIN_SLURM_TASK_PLUGIN=task/none: no binding);
# select/cons_tres; MpiDefault=pmix (pmi2 does not work with Debian's OpenMPI);
# the node is NodeName=localhost NodeAddr=127.0.0.1 with the machine's CPUs,
# sockets and cores, and slurmd runs with -N localhost; MailProg=/bin/true.
# No accounting database: each finished job is a line of the job completion
# log STATE/jobcomp.log (JobCompType=jobcomp/filetxt), which
# `sacct --completion` reads (slurm/report falls back to it).
# More tasks than cores needs `--overcommit` on sbatch/srun. A requeued job
# may start again cred_expire + 1 s after its requeue (Slurm's default
# cred_expire is 120 s; here 15 s, DTRAIN_SLURM_CRED_EXPIRE, at least 5).
#
# --nodes N (root; issue 16): the nodes are node1..nodeN of the emulated
# cluster NAME (--cluster; default a fresh name sl<digits>). A cluster of that
# name that is up is used as it is (it must have been made with --controller
# and have ≥ N nodes) and left up by `stop`; otherwise `start` brings one up
# (scripts/emulated-cluster.sh up --nodes N --controller [--preset P], default
# preset 1gbe) and `stop` takes it down. slurmctld runs in the controller's
# namespaces (NAME-ctl, host name ctl, 198.18.X.254); one slurmd per node in
# that node's network and UTS namespaces (`slurmd -N nodeK`, spool, pid file and
# log of its own: SlurmdSpoolDir=…/spool/%n and so on); one munged for all, on
# the host (its socket is a file, which every network namespace sees).
# slurm.conf: NodeName=nodeK NodeAddr=198.18.X.K (no DNS, /etc/hosts is not
# touched), SlurmctldHost=ctl(198.18.X.254), fixed ports 6817/6818 (the
# namespaces are the cluster's own), each node with the machine's CPUs (the
# nodes share the cores: ask for --overcommit beyond them) and 90 % of its
# memory divided by N (DTRAIN_SLURM_NODE_CPUS=C claims C CPUs per node instead,
# with SlurmdParameters=config_overrides: Slurm 22.05 refuses
# --ntasks-per-node above a node's CPUs even with --overcommit, "Requested
# node configuration is not available"); the plugins of the one-node mode. The host cannot reach
# 198.18.X.0/24 (its routes are never touched), so the clients run on node1,
# the "login node": STATE/bin holds sbatch, srun, squeue, … wrappers that
# nsenter into node1 (and run the real client directly when already inside one
# of the cluster's namespaces, as a batch script is); `start` prints a PATH
# with them first. A `start` that fails stops what it started (the state folder
# is kept for its logs).
# Environment: DTRAIN_SLURM_PARTITION (default "local"), DTRAIN_SLURM_KEEP,
# DTRAIN_SLURM_CRED_EXPIRE, DTRAIN_SLURM_TASK_PLUGIN (default task/affinity),
# DTRAIN_SLURM_NODE_CPUS (--nodes only).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
shift || true
log() { echo "local-cluster: $*" >&2; }
die() { echo "local-cluster: error: $*" >&2; exit 1; }
CLIENTS="sbatch srun salloc squeue sinfo scontrol scancel sacct sstat sattach sprio sshare"

state_dir() {
  local d=${1:-${DTRAIN_SLURM_STATE:-}}
  [ -n "$d" ] || die "no state directory: pass it or set DTRAIN_SLURM_STATE"
  echo "$d"
}

# free_ports N: N distinct TCP ports nobody listens on now (the kernel's choice; all
# N sockets are held open together, so two calls cannot hand out the same port, which
# once made slurmd fail with "Address already in use").
free_ports() {
  "${DTRAIN_PYTHON:-python3}" -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# alive PID NAME: PID exists and runs NAME (guards against PID reuse).
alive() {
  [ -r "/proc/$1/comm" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local limit=$1; shift 2  # $2: what is awaited (for the reader)
  local i
  for ((i = 0; i < limit * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# new_state_dir [DIR]: the state folder (made), with no cluster recorded in it; sets $d.
new_state_dir() {
  if [ -n "${1:-${DTRAIN_SLURM_STATE:-}}" ]; then
    d=$(state_dir "${1:-}"); mkdir -p "$d"
  else
    d=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-slurm.XXXXXX")
  fi
  d=$(cd "$d" && pwd)
  [ ! -s "$d/pids" ] || die "$d/pids exists: a cluster may already run there (stop it first)"
  for prog in munged mungekey slurmctld slurmd sinfo scontrol; do
    command -v "$prog" >/dev/null || [ -x "/usr/sbin/$prog" ] ||
      die "$prog not found: install Debian's slurm-wlm and munge (scripts/setup-deps.sh)"
  done
  export PATH="$PATH:/usr/sbin"
  mkdir -p "$d/munge" "$d/ctld" "$d/spool" "$d/log" "$d/tmp"
  chmod 700 "$d" "$d/munge"
  : >"$d/pids"
}

# start_munge D: munge with its own key, socket, pid, log and seed files in D
# (never the system's); sets $sock.
start_munge() {
  local d=$1
  mungekey --create --keyfile="$d/munge/munge.key" --force 2>/dev/null ||
    { dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 400 "$d/munge/munge.key"
  sock="$d/munge/munge.socket"
  setsid munged --foreground --force --socket="$sock" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
    --seed-file="$d/munge/munged.seed" </dev/null >>"$d/log/munged.out" 2>&1 &
  echo "munged $!" >>"$d/pids"
  wait_for 10 munged test -S "$sock" ||
    die "munged did not create $sock; log: $(tail -n 5 "$d/log/munged.log" "$d/log/munged.out" 2>&1)"
  munge --socket="$sock" -n </dev/null | unmunge --socket="$sock" >/dev/null ||
    die "munge round trip failed on $sock"
}

# machine_shape: sets cpus, sockets, cores, threads (as slurmd -C reports them;
# falls back to nproc) and mem (90 % of the memory, MiB).
machine_shape() {
  cpus=$(nproc --all)
  sockets=$(lscpu -p=SOCKET 2>/dev/null | grep -v '^#' | sort -u | wc -l)
  [ "$sockets" -ge 1 ] || sockets=1
  threads=$(lscpu 2>/dev/null | awk -F: '/^Thread\(s\) per core/ {gsub(/ /,"",$2); print $2}')
  [ -n "$threads" ] || threads=1
  cores=$(( cpus / sockets / threads ))
  [ "$cores" -ge 1 ] || { cores=$cpus; sockets=1; threads=1; }
  mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
}

# conf_common D: the slurm.conf lines of both modes (users, auth, controller
# state, plugins, timeouts); each mode adds hosts, ports, slurmd files, nodes.
conf_common() {
  local d=$1 user; user=$(id -un)
  cat <<EOF
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=${DTRAIN_SLURM_CRED_EXPIRE:-15}
StateSaveLocation=$d/ctld
SlurmctldPidFile=$d/slurmctld.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=${DTRAIN_SLURM_TASK_PLUGIN:-task/affinity}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$d/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
KillWait=5
EOF
}

start() {
  local d sock cpus sockets cores threads mem
  new_state_dir "${1:-}"
  start_munge "$d"
  machine_shape
  local part=${DTRAIN_SLURM_PARTITION:-local}

  local ports
  read -r -a ports <<<"$(free_ports 2)"
  {
    echo "# Generated by slurm/local-cluster.sh: a one-node cluster on localhost."
    echo "ClusterName=dtrain-local"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmctldPort=${ports[0]}"
    echo "SlurmdPort=${ports[1]}"
    echo "SlurmdSpoolDir=$d/spool"
    echo "SlurmdPidFile=$d/slurmd.pid"
    echo "SlurmdLogFile=$d/log/slurmd.log"
    # A /tmp of its own: PMIx makes each step's client folder
    # spmix_appdir_<uid>_<job>.<step> under TmpFS, and two clusters on one
    # machine (two test runs) number their jobs alike.
    echo "TmpFS=$d/tmp"
    conf_common "$d"
    echo "NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus Sockets=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$mem State=UNKNOWN"
    echo "PartitionName=$part Nodes=localhost Default=YES MaxTime=INFINITE State=UP"
  } >"$d/slurm.conf"
  export SLURM_CONF="$d/slurm.conf"

  # -D: stay in the foreground, so $! is the daemon's PID; setsid detaches it
  # from the caller's terminal and process group. -c: no state from before.
  setsid slurmctld -D -c -f "$SLURM_CONF" </dev/null >>"$d/log/slurmctld.out" 2>&1 &
  echo "slurmctld $!" >>"$d/pids"
  wait_for 20 slurmctld scontrol ping ||
    die "slurmctld does not answer; log: $(tail -n 20 "$d/log/slurmctld.log" "$d/log/slurmctld.out" 2>&1)"
  setsid slurmd -D -N localhost -f "$SLURM_CONF" </dev/null >>"$d/log/slurmd.out" 2>&1 &
  echo "slurmd $!" >>"$d/pids"
  node_idle() { sinfo -h -N -n localhost -o %t | grep -qE '^(idle|mix|alloc)'; }
  wait_for 30 slurmd node_idle ||
    die "node localhost not idle: $(sinfo -N 2>&1); log: $(tail -n 20 "$d/log/slurmd.log" "$d/log/slurmd.out" 2>&1)"
  log "up in $d (partition $part, $cpus CPUs = $sockets socket(s) × $cores core(s) × $threads thread(s))"
  echo "export SLURM_CONF=$d/slurm.conf DTRAIN_SLURM_STATE=$d"
}

# write_clients D NAME: STATE/bin/<client> for each Slurm client: inside one of
# cluster NAME's namespaces it is the client itself, elsewhere the client run
# in node1's network and UTS namespaces (nsenter keeps the folder and environment).
write_clients() {
  local d=$1 name=$2 c cs=/run/dtrain-cluster/$2 real
  mkdir -p "$d/bin"
  for c in $CLIENTS; do
    real=$(command -v "$c" 2>/dev/null) || continue
    cat >"$d/bin/$c" <<EOF
#!/bin/sh
# $c on the Slurm of the emulated cluster '$name' (slurm/local-cluster.sh --nodes).
me=\$(stat -L -c %i /proc/self/ns/net)
for ns in /run/netns/$name-n[0-9]* /run/netns/$name-ctl; do
  [ "\$(stat -L -c %i "\$ns" 2>/dev/null)" != "\$me" ] || exec $real "\$@"
done
exec nsenter --net=/run/netns/$name-n1 --uts=$cs/uts/node1 -- $real "\$@"
EOF
    chmod +x "$d/bin/$c"
  done
}

# start_nodes N NAME PRESET [DIR]: the multi-node mode (see the top).
start_nodes() {
  local n=$1 name=$2 preset=$3 d sock cpus sockets cores threads mem
  [ "$(id -u)" = 0 ] || die "--nodes needs root (network and UTS namespaces)"
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "--nodes '$n': a positive integer"
  command -v nsenter >/dev/null || die "nsenter not found (util-linux)"
  local ec=$here/../scripts/emulated-cluster.sh
  new_state_dir "${4:-}"
  if [ -z "$name" ]; then
    while :; do
      name=sl$((RANDOM % 100000))
      [ ! -e "/run/dtrain-cluster/$name" ] && ! ip netns list | grep -qE "^$name-" && break
    done
  fi
  local cs=/run/dtrain-cluster/$name owned=1
  [ -d "$cs" ] && owned=0
  printf 'name=%s\nowned=%s\nnodes=%s\n' "$name" "$owned" "$n" >"$d/cluster"
  # From here a failure stops what was started (the folder stays, for its logs).
  failed_start=$d
  trap 'rc=$?; if [ $rc != 0 ]; then log "start failed: stopping what it started"; DTRAIN_SLURM_KEEP=1 stop "$failed_start" || true; fi' EXIT
  if [ "$owned" = 1 ]; then
    bash "$ec" up --nodes "$n" --name "$name" --controller ${preset:+--preset "$preset"} >&2 ||
      die "scripts/emulated-cluster.sh up --nodes $n --name $name --controller failed"
  fi
  [ -s "$cs/controller" ] || die "emulated cluster '$name' has no controller namespace: bring it up with --controller"
  [ "$(wc -l <"$cs/nodes")" -ge "$n" ] || die "emulated cluster '$name' has fewer than $n nodes"
  local ctl_ip ctl_ns; read -r _ ctl_ip ctl_ns <"$cs/controller"
  start_munge "$d"
  machine_shape
  local part=${DTRAIN_SLURM_PARTITION:-local} node ip ns ncpus=${DTRAIN_SLURM_NODE_CPUS:-$cpus}
  [[ $ncpus =~ ^[1-9][0-9]*$ ]] || die "DTRAIN_SLURM_NODE_CPUS '$ncpus': a positive integer"
  {
    echo "# Generated by slurm/local-cluster.sh --nodes $n: the emulated cluster '$name'."
    echo "ClusterName=dtrain-$name"
    echo "SlurmctldHost=ctl($ctl_ip)"
    echo "SlurmctldPort=6817"
    echo "SlurmdPort=6818"
    echo "SlurmdSpoolDir=$d/spool/%n"
    echo "SlurmdPidFile=$d/spool/slurmd-%n.pid"
    echo "SlurmdLogFile=$d/log/slurmd-%n.log"
    # The nodes share the machine's /tmp: each gets its own (PMIx's client
    # folder, spmix_appdir_<uid>_<job>.<step>, is made under TmpFS).
    echo "TmpFS=$d/tmp/%n"
    conf_common "$d"
    local shape="CPUs=$cpus Sockets=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads"
    if [ "$ncpus" != "$cpus" ]; then
      # slurmd reports the configured CPUs instead of the machine's.
      echo "SlurmdParameters=config_overrides"
      shape="CPUs=$ncpus Sockets=1 CoresPerSocket=$ncpus ThreadsPerCore=1"
    fi
    head -n "$n" "$cs/nodes" | while read -r node ip ns; do
      echo "NodeName=$node NodeAddr=$ip $shape RealMemory=$((mem / n)) State=UNKNOWN"
    done
    echo "PartitionName=$part Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$d/slurm.conf"
  export SLURM_CONF="$d/slurm.conf"
  write_clients "$d" "$name"
  export PATH="$d/bin:$PATH"

  setsid nsenter --net="/run/netns/$ctl_ns" --uts="$cs/uts/ctl" -- slurmctld -D -c -f "$SLURM_CONF" \
    </dev/null >>"$d/log/slurmctld.out" 2>&1 &
  echo "slurmctld $!" >>"$d/pids"
  wait_for 20 slurmctld scontrol ping ||
    die "slurmctld does not answer; log: $(tail -n 20 "$d/log/slurmctld.log" "$d/log/slurmctld.out" 2>&1)"
  while read -r node ip ns; do
    mkdir -p "$d/spool/$node" "$d/tmp/$node"
    setsid nsenter --net="/run/netns/$ns" --uts="$cs/uts/$node" -- slurmd -D -N "$node" -f "$SLURM_CONF" \
      </dev/null >>"$d/log/slurmd-$node.out" 2>&1 &
    echo "slurmd $!" >>"$d/pids"
  done < <(head -n "$n" "$cs/nodes")
  all_idle() { [ "$(sinfo -h -N -o '%N %t' | grep -cE ' (idle|mix|alloc)')" = "$n" ]; }
  wait_for 60 slurmds all_idle ||
    die "not all $n nodes idle: $(sinfo -N 2>&1); log: $(tail -n 10 "$d"/log/slurmd-*.log "$d"/log/slurmd-*.out 2>&1)"
  trap - EXIT
  log "up in $d: nodes node[1-$n] of emulated cluster '$name' ($([ "$owned" = 1 ] && echo "brought up here, taken down by stop" || echo "already up, left up by stop")), controller ctl ($ctl_ip), partition $part, $ncpus CPUs per node (the machine's $cpus, shared)"
  echo "export SLURM_CONF=$d/slurm.conf DTRAIN_SLURM_STATE=$d PATH=$d/bin:\$PATH"
}

# cluster_field D KEY: a value of D/cluster (multi-node mode), empty without one.
cluster_field() { [ -r "$1/cluster" ] && sed -n "s/^$2=//p" "$1/cluster" || true; }

status() {
  local d; d=$(state_dir "${1:-}")
  [ -s "$d/pids" ] || die "no cluster recorded in $d"
  local rc=0 name pid cname
  while read -r name pid; do
    if alive "$pid" "$name"; then echo "$name pid $pid: running"
    else echo "$name pid $pid: NOT running"; rc=1; fi
  done <"$d/pids"
  export SLURM_CONF="$d/slurm.conf"
  cname=$(cluster_field "$d" name)
  if [ -n "$cname" ]; then
    export PATH="$d/bin:$PATH"
    bash "$here/../scripts/emulated-cluster.sh" status --name "$cname" || rc=1
  fi
  sinfo -N -l 2>&1 || rc=1
  squeue 2>&1 || rc=1
  return $rc
}

stop() {
  local d; d=$(state_dir "${1:-}")
  [ -d "$d" ] || die "no state directory $d"
  export PATH="$PATH:/usr/sbin" SLURM_CONF="$d/slurm.conf"
  local cname; cname=$(cluster_field "$d" name)
  [ -z "$cname" ] || export PATH="$d/bin:$PATH"
  if [ -s "$d/pids" ]; then
    # Jobs first, so their steps end cleanly while slurmd still runs.
    if timeout 10 scontrol ping >/dev/null 2>&1 && [ -n "$(timeout 10 squeue -h -o %i 2>/dev/null)" ]; then
      squeue -h -o %i | xargs -r scancel --full 2>/dev/null || true
      wait_for 15 "jobs to end" bash -c '[ -z "$(squeue -h -o %i)" ]' || true
    fi
    # Leftover step daemons of this cluster (they inherit slurmd's SLURM_CONF).
    local p
    for p in $(pgrep -x slurmstepd || true); do
      { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$d/slurm.conf" &&
        kill -KILL "$p" 2>/dev/null || true
    done
    # Daemons in reverse start order, by PID, TERM then KILL after 10 s.
    local name pid i
    tac "$d/pids" | while read -r name pid; do
      alive "$pid" "$name" || continue
      kill -TERM "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do alive "$pid" "$name" || break; sleep 0.2; done
      if alive "$pid" "$name"; then kill -KILL "$pid" 2>/dev/null || true; fi
      log "stopped $name (pid $pid)"
    done
    : >"$d/pids"
  fi
  if [ -n "$cname" ] && [ "$(cluster_field "$d" owned)" = 1 ]; then
    bash "$here/../scripts/emulated-cluster.sh" down --name "$cname" >&2 || true
  fi
  if [ "${DTRAIN_SLURM_KEEP:-0}" = 1 ]; then log "kept $d"
  else rm -rf "$d"; log "removed $d"; fi
}

case "$cmd" in
  start)
    nodes="" cluster="" preset="" dir=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --nodes) nodes=$2; shift 2 ;;
        --cluster) cluster=$2; shift 2 ;;
        --preset) preset=$2; shift 2 ;;
        -*) die "start: unknown option $1" ;;
        *) dir=$1; shift ;;
      esac
    done
    if [ -n "$nodes" ]; then start_nodes "$nodes" "$cluster" "$preset" "$dir"
    else
      [ -z "$cluster$preset" ] || die "--cluster and --preset need --nodes"
      start "$dir"
    fi ;;
  stop) stop "$@" ;;
  status) status "$@" ;;
  *) echo "usage: $0 start [--nodes N [--cluster NAME] [--preset P]] [STATE_DIR] | stop|status [STATE_DIR]" >&2; exit 2 ;;
esac
