#!/usr/bin/env bash
# Server placement and binding of slurm/train.sbatch on a 4-node Slurm of the
# emulated cluster (slurm/local-cluster.sh start --nodes 4, TaskPlugin=task/affinity).
# Checks:
#  1. the fit check: `sbatch -N 2 --ntasks=4` with --ps 1 --ps-placement
#     dedicated puts 3 workers on node1, which has 2 CPUs for the job: exit 2
#     before any rank starts, naming node1 and the numbers;
#  2. `sbatch -N 2` (6 ranks) and `sbatch -N 4` (10 ranks), 2 workers per node
#     and 2 servers, hybrid LeNet-5 for a few steps, the default placement
#     (spread): the engine's placement table ("dtrain:   rank R ROLE HOST cpus
#     SET gpu G") shows workers 2r, 2r+1 on node r+1 and server s on node
#     s mod N + 1, the engine groups the workers into N nodes of 2, and every
#     rank is bound by srun --cpu-bind=cores to one core (its CPU set is that
#     core's CPUs, not the machine's), inside the CPUs Slurm gave the job on
#     its node (scontrol show job -d), the two workers of a node on different
#     cores where the machine has two.
# The jobs ask for --exclusive (each node's CPUs are the job's) and
# --overcommit (3 ranks on a node of the machine's cores). Skipped (exit 77,
# the reason printed) where namespaces cannot be made or Slurm and munge are
# not installed, as tests/integration/slurm_cluster.sh. About a minute here.
# Usage: DTRAIN=build/dtrain WORK=dir SRC=repo bash tests/integration/slurm_placement.sh
source "$(dirname "$0")/lib.sh"
: "${SRC:?repository root}"
export OMP_NUM_THREADS=1 PATH="$PATH:/usr/sbin"
skip() { echo "SKIP: $*"; exit 77; }
netns_or_skip
for prog in munged mungekey slurmctld slurmd sbatch srun sinfo scontrol scancel; do
  command -v "$prog" > /dev/null || skip "$prog not found (Debian's slurm-wlm, munge: scripts/setup-deps.sh)"
done
source "$IT_DIR/slurm_lib.sh"
slurm_test_start "slurm placement test" "${DTRAIN_SLURM_TEST_BUDGET:-240}"
C="$SRC/scripts/emulated-cluster.sh"
while :; do
  NAME=pl$((RANDOM % 100000))
  [ ! -e "/run/dtrain-cluster/$NAME" ] && ! ip netns list | grep -qE "^$NAME-" && break
done
cleanup() {
  slurm_cleanup
  "$C" down --name "$NAME" > /dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
slurm_state=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-slurm-test.XXXXXX")
env_line=$(bash "$SRC/slurm/local-cluster.sh" start --nodes 4 --cluster "$NAME" "$slurm_state") ||
  fail "the 4-node Slurm did not start (see the message above)"
eval "$env_line"
grep -qx "TaskPlugin=task/affinity" "$SLURM_CONF" || fail "the cluster does not bind tasks: $(grep TaskPlugin "$SLURM_CONF")"
echo "ok: 4-node Slurm up on emulated cluster $NAME ($SLURM_CONF, task/affinity)"

D="$WORK/data"
if [ ! -s "$D/fashion-mnist-train.h5" ]; then
  "$DTRAIN" data fashion-mnist --out data > /dev/null || fail "dtrain data fashion-mnist"
  D=$PWD/data
fi
common=("$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "" --max-steps 4
        --log-interval 2 --threads 1 --minibatch 16 --mode hybrid --save-params "")
export DTRAIN DTRAIN_CHECKPOINT_DIR=""  # no checkpoint folder under the submit folder

# 1. A placement that does not fit: refused before the launch, naming the node.
id=$(sbatch --parsable --job-name=pl-fit -N 2 --ntasks=4 --cpus-per-task=1 --time=00:02:00 \
       --output="$PWD/fit.out" "$SRC/slurm/train.sbatch" "${common[@]}" --ps 1 --ps-placement dedicated) ||
  fail "sbatch refused the fit-check job"

# 2. Spread on 2 and 4 nodes: submitted together, they run one after the other.
submit() {  # NODES: the job id
  sbatch --parsable --job-name="pl-n$1" -N "$1" --ntasks=$((2 * $1 + 2)) --exclusive --overcommit \
    --cpus-per-task=1 --time=00:05:00 --output="$PWD/n$1.out" "$SRC/slurm/train.sbatch" "${common[@]}" --ps 2 ||
    fail "sbatch refused the $1-node job"
}
id2=$(submit 2) id4=$(submit 4)

res=$(wait_job "$id")
cat fit.out
[ "${res%%:*}" = "FAILED 2" ] || fail "fit-check job $id ended $res, wanted FAILED 2:0"
grep -qF "node node1: 3 task(s) × 1 CPU(s) per task = 3 CPUs, the job has 2 there" fit.out ||
  fail "job $id: no fit message naming node1 and the numbers"
! grep -q "^dtrain: placement" fit.out || fail "job $id started ranks"
echo "ok: a placement that does not fit ends the job with exit 2 before the launch, naming node1"

# cpu_list "0-2,5" → "0 1 2 5"
cpu_list() {
  local part out=()
  IFS=, read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}")); else out+=("$part"); fi
  done
  echo "${out[@]}"
}
tpc=$(lscpu 2>/dev/null | awk -F: '/^Thread\(s\) per core/ {gsub(/ /,"",$2); print $2}')
tpc=${tpc:-1}
cores=$(( $(nproc --all) / tpc ))

check_job() {  # NODES ID
  local n=$1 id=$2 out="n$1.out" ranks=$((2 * $1 + 2)) res line r role host cpus want k
  res=$(wait_job "$id")
  cat "$out"
  [ "$res" = "COMPLETED 0:0" ] || fail "$n-node job $id ended $res"
  grep -qF "placement: spread:" "$out" || fail "job $id: not the spread placement"
  grep -qF "$((2 * n)) workers in $n nodes of 2, 2 servers, mode hybrid" "$out" ||
    fail "job $id: the engine did not see $n nodes of 2 workers"
  mapfile -t table < <(sed -nE 's/^dtrain:   rank ([0-9]+) (worker|server) ([^ ]+) cpus ([^ ]+) gpu (.*)$/\1 \2 \3 \4 \5/p' "$out")
  [ "${#table[@]}" = "$ranks" ] || fail "job $id: ${#table[@]} placement lines, wanted $ranks"
  # The CPUs Slurm gave the job on each node: "Nodes=node1 CPU_IDs=0-1 Mem=…" (scontrol show job -d).
  declare -A job_cpus=() worker_cpus=()
  while read -r host cpus; do
    for h in $(scontrol show hostnames "$host"); do job_cpus[$h]=" $(cpu_list "$cpus") "; done
  done < <(scontrol show job -d "$id" | sed -nE 's/^ *Nodes=([^ ]+) CPU_IDs=([^ ]+).*/\1 \2/p')
  [ "${#job_cpus[@]}" = "$n" ] || fail "job $id: CPU_IDs for ${#job_cpus[@]} nodes in scontrol show job -d"
  for line in "${table[@]}"; do
    read -r r role host cpus _ <<<"$line"
    if [ "$r" -lt $((2 * n)) ]; then want="worker node$((r / 2 + 1))"
    else want="server node$(( (r - 2 * n) % n + 1 ))"; fi
    [ "$role $host" = "$want" ] || fail "job $id: rank $r is $role on $host, wanted $want (spread)"
    local cset; cset=($(cpu_list "$cpus"))
    [ "${#cset[@]}" = "$tpc" ] || fail "job $id: rank $r may run on CPUs $cpus: not one core's $tpc CPU(s) (not bound?)"
    for k in "${cset[@]}"; do
      [[ ${job_cpus[$host]} == *" $k "* ]] || fail "job $id: rank $r on CPU $k, outside the job's CPUs on $host (${job_cpus[$host]})"
    done
    if [ "$role" = worker ]; then
      if [ "$cores" -ge 2 ] && [ "${worker_cpus[$host]:-}" = "$cpus" ]; then
        fail "job $id: both workers of $host on CPUs $cpus"
      fi
      worker_cpus[$host]=$cpus
    fi
  done
  echo "ok: $n-node job $id: one server per node for the first 2 nodes, each rank bound to one core:"
  printf '    %s\n' "${table[@]}"
}
check_job 2 "$id2"
check_job 4 "$id4"
