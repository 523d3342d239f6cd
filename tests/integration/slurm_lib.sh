# shellcheck shell=bash
# tests/integration/slurm_lib.sh — the local Slurm of the Slurm tests (sourced
# after lib.sh; needs SRC, the repository root).
#
#   slurm_test_start NAME BUDGET  starts the test's clock and deadline (BUDGET s,
#                                 below ctest's TIMEOUT, so that a hang ends through
#                                 the EXIT trap and not by ctest's kill)
#   slurm_cluster_up [PROG...]    checks that munge, the Slurm daemons and clients
#                                 and PROGs exist (a FAILURE naming the missing one,
#                                 never a skip), starts slurm/local-cluster.sh in a
#                                 fresh state folder and exports its SLURM_CONF; an
#                                 EXIT trap stops it (cancelling its jobs), also when
#                                 a check fails, printing the daemons' last log lines
#   slurm_nodes_up N PREFIX [PROG...]
#                                 the multi-node form (tests that need namespaces:
#                                 skips, exit 77, where they cannot be made or a
#                                 PROG, munge or Slurm is missing): an emulated
#                                 cluster of N nodes under a fresh name PREFIXnnnnn
#                                 (in NAME; other runs' clusters stay untouched),
#                                 slurm/local-cluster.sh start --nodes N on it and
#                                 its SLURM_CONF exported; an EXIT trap stops both
#   job_field ID FIELD [FIELD…]   fields of one `scontrol show job -o ID` (JobState,
#                                 Restarts, ExitCode, …), space-separated, read
#                                 together (one look at the job)
#   wait_job ID                   waits until job ID has ended, through requeues (at
#                                 most until the deadline); prints "STATE EXITCODE"
: "${SRC:?repository root}"
export PATH="$PATH:/usr/sbin"

slurm_test_start() {
  slurm_test_name=$1
  t_start=$SECONDS
  deadline=$((SECONDS + $2))
}

slurm_state=""
slurm_cleanup() {
  local rc=$?
  if [ -n "$slurm_state" ]; then
    if [ "$rc" != 0 ] && [ -d "$slurm_state/log" ]; then
      echo "--- slurmctld/slurmd logs (last lines) ---" >&2
      tail -n 15 "$slurm_state/log/slurmctld.log" "$slurm_state"/log/slurmd*.log >&2 2>/dev/null || true
    fi
    bash "$SRC/slurm/local-cluster.sh" stop "$slurm_state" || true
  fi
  echo "$slurm_test_name: $(( SECONDS - t_start )) s, exit $rc"
}

slurm_cluster_up() {
  local prog env_line
  for prog in munged slurmctld slurmd sbatch srun scontrol scancel "$@"; do
    command -v "$prog" >/dev/null ||
      fail "$prog not found: install Debian's slurm-wlm, munge and openmpi-bin (scripts/setup-deps.sh)"
  done
  trap slurm_cleanup EXIT
  trap 'exit 130' INT TERM
  slurm_state=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-slurm-test.XXXXXX")
  env_line=$(bash "$SRC/slurm/local-cluster.sh" start "$slurm_state") ||
    fail "the local Slurm cluster did not start (see the message above)"
  eval "$env_line"
  echo "ok: local cluster up ($SLURM_CONF)"
}

slurm_nodes_up() {
  local n=$1 prefix=$2 prog env_line
  shift 2
  netns_or_skip
  for prog in munged mungekey slurmctld slurmd sbatch srun sinfo scontrol scancel "$@"; do
    command -v "$prog" > /dev/null ||
      { echo "SKIP: $prog not found (Debian's slurm-wlm, munge, openmpi-bin: scripts/setup-deps.sh)"; exit 77; }
  done
  EMULATED_CLUSTER="$SRC/scripts/emulated-cluster.sh"
  while :; do
    NAME=$prefix$((RANDOM % 100000))
    [ ! -e "/run/dtrain-cluster/$NAME" ] && ! ip netns list | grep -qE "^$NAME-" && break
  done
  trap 'slurm_cleanup; "$EMULATED_CLUSTER" down --name "$NAME" > /dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT TERM
  slurm_state=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-slurm-test.XXXXXX")
  env_line=$(bash "$SRC/slurm/local-cluster.sh" start --nodes "$n" --cluster "$NAME" "$slurm_state") ||
    fail "the $n-node Slurm did not start (see the message above)"
  eval "$env_line"
}

job_field() {
  local line f vals=()
  line=$(timeout 30 scontrol show job -o "$1" 2>/dev/null) || return 0
  shift
  for f in "$@"; do vals+=("$(grep -oE "(^| )$f=[^ ]*" <<<"$line" | head -1 | sed -E "s/^ ?$f=//")"); done
  echo "${vals[*]}"
}

wait_job() {
  local id=$1 line st ec
  while [ "$SECONDS" -lt "$deadline" ]; do
    line=$(timeout 30 scontrol show job -o "$id" 2>/dev/null) || fail "job $id vanished from the controller"
    st=$(sed -nE 's/.*JobState=([A-Z_]+).*/\1/p' <<<"$line")
    ec=$(sed -nE 's/.* ExitCode=([0-9]+:[0-9]+).*/\1/p' <<<"$line")
    case "$st" in
      PENDING|CONFIGURING|RUNNING|COMPLETING|REQUEUED|RESIZING|SUSPENDED) sleep 1 ;;
      *) echo "$st $ec"; return 0 ;;
    esac
  done
  timeout 30 scancel "$id" 2>/dev/null || true
  fail "job $id still not finished at the test's deadline ($(( SECONDS - t_start )) s)"
}
