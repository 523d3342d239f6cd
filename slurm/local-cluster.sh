#!/usr/bin/env bash
# slurm/local-cluster.sh — a one-node Slurm on localhost (munged, slurmctld,
# slurmd from Debian's munge and slurm-wlm) in a temporary state directory, for
# the test suite and for trying the batch scripts on a laptop or a single box.
#
#   eval "$(slurm/local-cluster.sh start)"   # prints: export SLURM_CONF=… DTRAIN_SLURM_STATE=…
#   sinfo; sbatch …; squeue
#   slurm/local-cluster.sh status            # daemons alive?, sinfo, squeue
#   slurm/local-cluster.sh stop              # cancels its jobs, stops its daemons
#
# The state directory comes from the argument after the command, else from
# $DTRAIN_SLURM_STATE, else (start only) a new `mktemp -d`. Everything lives in
# it: munge key and socket, slurm.conf, spool and state folders, logs, and
# `pids` — the PIDs of exactly the daemons `start` started. `stop` signals only
# those PIDs (checking each one still runs the program it started), plus the
# slurmstepd processes that carry this cluster's SLURM_CONF in their
# environment, then removes the directory (keep it with DTRAIN_SLURM_KEEP=1).
#
# Facts verified on Debian 12 containers without systemd (see issue 6): munged
# is started by hand on its own socket and Slurm finds it through
# AuthInfo=socket=…; proctrack/linuxproc and task/none (no cgroup plugins —
# but slurmd 22.05 still stops at start-up unless /sys/fs/cgroup is mounted,
# even read-only, as scripts/fresh-machine-check.sh found in a chroot);
# select/cons_tres; MpiDefault=pmix (pmi2 does not work with Debian's OpenMPI);
# the node is NodeName=localhost NodeAddr=127.0.0.1 with the machine's CPUs,
# sockets and cores, and slurmd runs with -N localhost; MailProg=/bin/true.
# More tasks than cores needs `--overcommit` on sbatch/srun. A requeued job
# may start again cred_expire + 1 s after its requeue (Slurm's default
# cred_expire is 120 s; here 15 s, DTRAIN_SLURM_CRED_EXPIRE, at least 5).
# Environment: DTRAIN_SLURM_PARTITION (default "local"), DTRAIN_SLURM_KEEP,
# DTRAIN_SLURM_CRED_EXPIRE.
set -euo pipefail

cmd=${1:-}
shift || true
log() { echo "local-cluster: $*" >&2; }
die() { echo "local-cluster: error: $*" >&2; exit 1; }

state_dir() {
  local d=${1:-${DTRAIN_SLURM_STATE:-}}
  [ -n "$d" ] || die "no state directory: pass it or set DTRAIN_SLURM_STATE"
  echo "$d"
}

# free_port: a TCP port nobody listens on now (the kernel's choice).
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
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

start() {
  local d
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
  mkdir -p "$d/munge" "$d/ctld" "$d/spool" "$d/log"
  chmod 700 "$d" "$d/munge"
  : >"$d/pids"

  # munge: own key, socket, pid, log and seed files; never the system's.
  mungekey --create --keyfile="$d/munge/munge.key" --force 2>/dev/null ||
    { dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 400 "$d/munge/munge.key"
  local sock="$d/munge/munge.socket"
  setsid munged --foreground --force --socket="$sock" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
    --seed-file="$d/munge/munged.seed" </dev/null >>"$d/log/munged.out" 2>&1 &
  echo "munged $!" >>"$d/pids"
  wait_for 10 munged test -S "$sock" ||
    die "munged did not create $sock; log: $(tail -n 5 "$d/log/munged.log" "$d/log/munged.out" 2>&1)"
  munge --socket="$sock" -n </dev/null | unmunge --socket="$sock" >/dev/null ||
    die "munge round trip failed on $sock"

  # The machine's shape, as slurmd -C reports it (falls back to nproc).
  local cpus sockets cores threads mem
  cpus=$(nproc --all)
  sockets=$(lscpu -p=SOCKET 2>/dev/null | grep -v '^#' | sort -u | wc -l)
  [ "$sockets" -ge 1 ] || sockets=1
  threads=$(lscpu 2>/dev/null | awk -F: '/^Thread\(s\) per core/ {gsub(/ /,"",$2); print $2}')
  [ -n "$threads" ] || threads=1
  cores=$(( cpus / sockets / threads ))
  [ "$cores" -ge 1 ] || { cores=$cpus; sockets=1; threads=1; }
  mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
  local part=${DTRAIN_SLURM_PARTITION:-local}
  local user; user=$(id -un)

  cat >"$d/slurm.conf" <<EOF
# Generated by slurm/local-cluster.sh: a one-node cluster on localhost.
ClusterName=dtrain-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=${DTRAIN_SLURM_CRED_EXPIRE:-15}
StateSaveLocation=$d/ctld
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
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
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus Sockets=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$mem State=UNKNOWN
PartitionName=$part Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
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

status() {
  local d; d=$(state_dir "${1:-}")
  [ -s "$d/pids" ] || die "no cluster recorded in $d"
  local rc=0 name pid
  while read -r name pid; do
    if alive "$pid" "$name"; then echo "$name pid $pid: running"
    else echo "$name pid $pid: NOT running"; rc=1; fi
  done <"$d/pids"
  export SLURM_CONF="$d/slurm.conf"
  sinfo -N -l 2>&1 || rc=1
  squeue 2>&1 || rc=1
  return $rc
}

stop() {
  local d; d=$(state_dir "${1:-}")
  [ -d "$d" ] || die "no state directory $d"
  export PATH="$PATH:/usr/sbin" SLURM_CONF="$d/slurm.conf"
  if [ -s "$d/pids" ]; then
    # Jobs first, so their steps end cleanly while slurmd still runs.
    if scontrol ping >/dev/null 2>&1 && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
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
  if [ "${DTRAIN_SLURM_KEEP:-0}" = 1 ]; then log "kept $d"
  else rm -rf "$d"; log "removed $d"; fi
}

case "$cmd" in
  start) start "$@" ;;
  stop) stop "$@" ;;
  status) status "$@" ;;
  *) echo "usage: $0 start|stop|status [STATE_DIR]" >&2; exit 2 ;;
esac
