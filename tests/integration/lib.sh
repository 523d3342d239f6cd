# tests/integration/lib.sh — helpers for the integration tests (sourced).
# Usage: DTRAIN=build/dtrain WORK=dir bash tests/integration/<test>.sh
set -euo pipefail
IT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # before the cd below
: "${DTRAIN:?path of the dtrain binary}"
: "${WORK:?scratch folder}"
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each test's own scratch folder, emptied at its start and its working folder,
# so run folders (runs/<job>/<n>/) and explicit outputs of an earlier ctest run
# never meet this one (dtrain refuses to overwrite an existing output).
SCRATCH="$WORK/scratch-$(basename "$0" .sh)"
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"
cd "$SCRATCH"

fail() { echo "FAIL: $*" >&2; exit 1; }
# fail_log LOG MESSAGE: the reason first (a CI excerpt shows a test's first
# lines), then the job's log, then the reason again.
fail_log() {
  echo "FAIL: $2 (its log, $1, follows)" >&2
  cat "$1" >&2 || true
  fail "$2"
}

# No test reads its standard input: mpirun forwards its stdin to rank 0, and a
# job started under `timeout` (its own process group) that reads a terminal
# would be stopped by SIGTTIN instead of running.
exec </dev/null

# bounded SECONDS COMMAND...: COMMAND under `timeout`, KILLed 10 s after the
# TERM if it ignores it (mpirun waiting on a stopped rank must not hang a test).
# On a time-out it prints, on stderr, the command and every mpirun/dtrain
# process left with its state (ps STAT, wait channel), and returns 124 or 137.
bounded() {
  local limit=$1 rc=0; shift
  timeout -k 10 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "TIMED OUT after $limit s (exit $rc): $*" >&2
    ps -eo pid,ppid,pgid,stat,wchan:24,etime,args 2>/dev/null | awk 'NR == 1 || /mpirun|dtrain/' | grep -v awk >&2 || true
  fi
  return "$rc"
}

# expect_exit CODE PATTERN -- command...: runs it, checks the exit code and that
# stderr+stdout contain PATTERN (a fixed string).
expect_exit() {
  local want=$1 pattern=$2; shift 3
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc, wanted $want: $* → $out"
  grep -qF -- "$pattern" <<<"$out" || fail "output lacks '$pattern': $* → $out"
  echo "ok: exit $rc with '$pattern': $*"
}

# json_field FILE KIND FIELD (and job_value): the shared helpers of bench/lib.sh.
source "$IT_DIR/../../bench/lib.sh"

# netns_or_skip: exit 77 (ctest: Skipped), saying why, where the emulated cluster
# (scripts/emulated-cluster.sh) cannot be made: not root, no iproute2/util-linux,
# or a kernel/container that refuses network or persistent UTS namespaces (e.g.
# a chroot whose / is no mount point: `ip netns add` cannot make / a slave
# mount and says so, even where it exits 0). Any message of the probe counts.
netns_or_skip() {
  local why="" t p=dtp$$ out u
  [ "$(id -u)" = 0 ] || why="needs root (network and UTS namespaces)"
  for t in ip tc nsenter unshare; do
    [ -n "$why" ] || command -v $t > /dev/null || why="no $t (iproute2, util-linux: scripts/setup-deps.sh)"
  done
  if [ -z "$why" ]; then
    u=$(mktemp)
    out=$({ ip netns add $p && ip -n $p link set lo up && ip -n $p link add q0 type veth peer name q1 &&
            nsenter --net=/run/netns/$p true && unshare --uts="$u" true && umount "$u"; } 2>&1) || why="probe failed"
    [ -z "$out" ] || why="cannot make the cluster's namespaces here: $(tr '\n' ' ' <<<"$out")"
    ip netns delete $p 2>/dev/null || true
    umount "$u" 2>/dev/null || true
    rm -f "$u"
  fi
  if [ -n "$why" ]; then echo "SKIP: $why"; exit 77; fi
}
