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
#     SET gpu G") shows workers 2r, 2r+1 on the job's node r+1 and server s on
#     its node s mod N + 1, the engine groups the workers into N nodes of 2,
#     and every rank is bound to the CPUs srun's --cpu-bind=mask_cpu gave its
#     task on the node (all the node's CPUs: see 2. below for why not fewer),
#     inside the CPUs Slurm gave the job there (scontrol show job -d);
#  3. the default binding (--cpu-bind=cores) where the tasks fit the cores:
#     `sbatch -N 2 --ntasks=4` (2 allreduce workers per node, 2 steps) binds
#     each rank to one core of its own;
#  4. --ps-placement dedicated through mpirun (Open MPI's sequential mapper
#     reading the host file): `sbatch -N 3 --ntasks=5 --ps 1`, the workers
#     2 and 2 on the job's first two nodes, the server alone on the third.
# Every emulated node has the machine's cores, here 2; a node with 2 workers
# and a server has 3 tasks, more than its cores, and Slurm's cores binding
# then binds nothing ("only 2 bits in avail_map for 3 tasks!" in slurmd's
# log): hence mask_cpu in 2. (With map_cpu:0,1 the server shared the leader's
# CPU, and every emulated node's CPU 0 is the same core: the 2-node job hung at
# its first step.) The jobs ask for --exclusive (each node's CPUs are the
# job's) and --overcommit (3 ranks on 2 cores). Skipped (exit 77,
# the reason printed) where namespaces cannot be made or Slurm and munge are
# not installed, as tests/integration/slurm_cluster.sh. 58–77 s here (2 loaded cores).
# Usage: DTRAIN=build/dtrain WORK=dir SRC=repo bash tests/integration/slurm_placement.sh
source "$(dirname "$0")/lib.sh"
: "${SRC:?repository root}"
export OMP_NUM_THREADS=1 PATH="$PATH:/usr/sbin"
source "$IT_DIR/slurm_lib.sh"
slurm_test_start "slurm placement test" "${DTRAIN_SLURM_TEST_BUDGET:-240}"
slurm_nodes_up 4 pl
grep -qx "TaskPlugin=task/affinity" "$SLURM_CONF" || fail "the cluster does not bind tasks: $(grep TaskPlugin "$SLURM_CONF")"
echo "ok: 4-node Slurm up on emulated cluster $NAME ($SLURM_CONF, task/affinity)"

D="$WORK/data"
if [ ! -s "$D/fashion-mnist-train.h5" ]; then
  "$DTRAIN" data fashion-mnist --out data > /dev/null || fail "dtrain data fashion-mnist"
  D=$PWD/data
fi
common=("$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data ""
        --log-interval 2 --threads 1 --minibatch 16 --save-params "")
export DTRAIN DTRAIN_CHECKPOINT_DIR=""  # no checkpoint folder under the submit folder

# 1. A placement that does not fit: refused before the launch, naming the node.
id=$(sbatch --parsable --job-name=pl-fit -N 2 --ntasks=4 --cpus-per-task=1 --time=00:02:00 \
       --output="$PWD/fit.out" "$SRC/slurm/train.sbatch" "${common[@]}" --max-steps 4 --mode hybrid --ps 1 --ps-placement dedicated) ||
  fail "sbatch refused the fit-check job"

# 2. Spread on 2 and 4 nodes (and 3.): submitted together, they run one after the other.
ncpu=$(nproc --all)
# mask_cpu: every task of a node on all its CPUs. (One CPU per worker and all
# for the server was tried first: the 3 tasks of a node then share 2 CPUs, and
# with each rank's threads pinned to one CPU the 2-node job stalled at its
# first step in 2 of 5 runs on a loaded machine. The binding to one core of
# its own is checked in 3., where the tasks fit the cores.)
masks="" all=$(( (1 << ncpu) - 1 ))
for ((c = 0; c <= ncpu; c++)); do masks+=$(printf '0x%x,' "$all"); done
masks=${masks%,}
want_cpus() {  # LOCAL_TASK: the CPU list mask_cpu gives it
  if [ "$ncpu" = 1 ]; then echo 0; else echo "0-$((ncpu - 1))"; fi
}
submit() {  # NODES: the job id
  OMPI_MCA_mpi_yield_when_idle=1 DTRAIN_SRUN_CPU_BIND=mask_cpu:$masks sbatch --parsable --job-name="pl-n$1" -N "$1" --ntasks=$((2 * $1 + 2)) \
    --exclusive --overcommit --cpus-per-task=1 --time=00:05:00 --output="$PWD/n$1.out" "$SRC/slurm/train.sbatch" \
    "${common[@]}" --max-steps 2 --mode hybrid --ps 2 --heartbeat-timeout 120 || fail "sbatch refused the $1-node job"
}
id2=$(submit 2) id4=$(submit 4)
idc=$(sbatch --parsable --job-name=pl-cores -N 2 --ntasks=4 --exclusive --cpus-per-task=1 --time=00:05:00 \
        --output="$PWD/cores.out" "$SRC/slurm/train.sbatch" "${common[@]}" --mode allreduce --max-steps 2) ||
  fail "sbatch refused the cores-binding job"
# 5. No servers, not exclusive, overcommitted (one CPU per node): Slurm's own
# step layout ran 3 + 1 here; spread's host file keeps the 2 + 2 blocks.
ide=$(sbatch --parsable --job-name=pl-even -N 2 --ntasks=4 --overcommit --cpus-per-task=1 --time=00:05:00 \
        --output="$PWD/even.out" "$SRC/slurm/train.sbatch" "${common[@]}" --mode allreduce --max-steps 2) ||
  fail "sbatch refused the no-server overcommitted job"
idd=$(DTRAIN_LAUNCHER=mpirun sbatch --parsable --job-name=pl-ded -N 3 --ntasks=5 --exclusive --cpus-per-task=1 \
        --time=00:05:00 --output="$PWD/ded.out" "$SRC/slurm/train.sbatch" "${common[@]}" --mode hybrid --ps 1 \
        --max-steps 2 --ps-placement dedicated) || fail "sbatch refused the dedicated mpirun job"

res=$(wait_job "$id")
cat fit.out
[ "${res%%:*}" = "FAILED 2" ] || fail "fit-check job $id ended $res, wanted FAILED 2:0"
grep -qF "node node1: 3 task(s) × 1 CPU(s) per task = 3 CPUs, the job has 2 there" fit.out ||
  fail "job $id: no fit message naming node1 and the numbers"
! grep -q "^dtrain: placement" fit.out || fail "job $id started ranks"
echo "ok: a placement that does not fit ends the job with exit 2 before the launch, naming node1"

tpc=$(lscpu 2>/dev/null | awk -F: '/^Thread\(s\) per core/ {gsub(/ /,"",$2); print $2}')
tpc=${tpc:-1}
# cpu_list "0-2,5" → "0 1 2 5"
cpu_list() {
  local part out=()
  IFS=, read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then mapfile -t -O "${#out[@]}" out < <(seq "${part%-*}" "${part#*-}"); else out+=("$part"); fi
  done
  echo "${out[@]}"
}
# job_cpus ID: job_cpus[host] = " CPU CPU … " Slurm gave job ID there (scontrol show job -d:
# "Nodes=node1 CPU_IDs=0-1 Mem=…"); job_nodes: its nodes in order.
declare -A job_cpus
job_layout() {
  local host cpus h
  job_cpus=()
  while read -r host cpus; do
    for h in $(scontrol show hostnames "$host"); do job_cpus[$h]=" $(cpu_list "$cpus") "; done
  done < <(scontrol show job -d "$1" | sed -nE 's/^ *Nodes=([^ ]+) CPU_IDs=([^ ]+).*/\1 \2/p')
  mapfile -t job_nodes < <(scontrol show hostnames "$(job_field "$1" NodeList)")
}
# table LOG: "R ROLE HOST CPUS" per line of the engine's placement table.
table() { sed -nE 's/^dtrain:   rank ([0-9]+) (worker|server) ([^ ]+) cpus ([^ ]+) gpu (.*)$/\1 \2 \3 \4/p' "$1"; }

# finished_job ID LOG N WHAT: job ID COMPLETED; rows = its N placement lines
# ("R ROLE HOST CPUS"); job_nodes and job_cpus its layout.
finished_job() {
  local id=$1 log=$2 n=$3 what=$4 res
  res=$(wait_job "$id")
  cat "$log"
  [ "$res" = "COMPLETED 0:0" ] || fail "$what job $id ended $res"
  mapfile -t rows < <(table "$log")
  [ "${#rows[@]}" = "$n" ] || fail "$what job $id: ${#rows[@]} placement lines, wanted $n"
  job_layout "$id"
}

check_job() {  # NODES ID
  local n=$1 id=$2 log="n$1.out" ranks=$((2 * $1 + 2)) res line r role host cpus want local_i
  res=$(wait_job "$id")
  cat "$log"
  [ "$res" = "COMPLETED 0:0" ] || fail "$n-node job $id ended $res"
  grep -qF "placement: spread:" "$log" || fail "job $id: not the spread placement"
  grep -qF "$((2 * n)) workers in $n nodes of 2, 2 servers, mode hybrid" "$log" ||
    fail "job $id: the engine did not see $n nodes of 2 workers"
  mapfile -t rows < <(table "$log")
  [ "${#rows[@]}" = "$ranks" ] || fail "job $id: ${#rows[@]} placement lines, wanted $ranks"
  job_layout "$id"
  [ "${#job_nodes[@]}" = "$n" ] && [ "${#job_cpus[@]}" = "$n" ] || fail "job $id: not $n nodes with CPU_IDs in scontrol show job -d"
  declare -A seen=()
  for line in "${rows[@]}"; do
    read -r r role host cpus <<<"$line"
    if [ "$r" -lt $((2 * n)) ]; then want="worker ${job_nodes[r / 2]}"
    else want="server ${job_nodes[(r - 2 * n) % n]}"; fi
    [ "$role $host" = "$want" ] || fail "job $id: rank $r is $role on $host, wanted $want (spread)"
    # The task's index on its node (ranks in order: the workers, then the servers), and its mask_cpu CPUs.
    local_i=${seen[$host]:-0}; seen[$host]=$((local_i + 1))
    [ "$cpus" = "$(want_cpus "$local_i")" ] ||
      fail "job $id: rank $r (task $local_i on $host) may run on CPUs $cpus, wanted $(want_cpus "$local_i") (mask_cpu:$masks)"
    for k in $(cpu_list "$cpus"); do
      [[ ${job_cpus[$host]} == *" $k "* ]] || fail "job $id: rank $r on CPU $k, outside the job's CPUs on $host (${job_cpus[$host]})"
    done
  done
  echo "ok: $n-node job $id: the servers one per node, each rank bound to its CPU:"
  printf '    %s\n' "${rows[@]}"
}
check_job 2 "$id2"
check_job 4 "$id4"

# 3. --cpu-bind=cores: each rank one core of its own (the job's 2 tasks per node fit the cores).
finished_job "$idc" cores.out 4 cores-binding
grep -qF "binding:  srun --cpu-bind=cores, OMP_PLACES=cores OMP_PROC_BIND=close" cores.out ||
  fail "job $idc: not srun --cpu-bind=cores with the OpenMP binding"
declare -A used=()
for line in "${rows[@]}"; do
  read -r r role host cpus <<<"$line"
  [ "$host" = "${job_nodes[r / 2]}" ] || fail "job $idc: rank $r on $host, wanted ${job_nodes[r / 2]}"
  read -ra c <<<"$(cpu_list "$cpus")"
  [ "${#c[@]}" = "$tpc" ] || fail "job $idc: rank $r may run on CPUs $cpus: not one core's $tpc CPU(s) (not bound)"
  [[ ${job_cpus[$host]} == *" ${c[0]} "* ]] || fail "job $idc: rank $r on CPUs $cpus, outside the job's CPUs on $host"
  [ -z "${used[$host $cpus]:-}" ] || fail "job $idc: ranks ${used[$host $cpus]} and $r both on CPUs $cpus of $host"
  used[$host $cpus]=$r
done
echo "ok: --cpu-bind=cores job $idc: each rank on one core of its own:"
printf '    %s\n' "${rows[@]}"

# 4. dedicated, through mpirun.
finished_job "$idd" ded.out 5 "dedicated mpirun"
grep -qF "placement: dedicated: 2 worker(s) per node on 2 node(s), the 1 server(s) on the last 1 node(s)" ded.out ||
  fail "job $idd: not the dedicated placement"
grep -qF "launcher: mpirun," ded.out || fail "job $idd: not launched by mpirun"
for line in "${rows[@]}"; do
  read -r r role host cpus <<<"$line"
  if [ "$r" -lt 4 ]; then want="worker ${job_nodes[r / 2]}"; else want="server ${job_nodes[2]}"; fi
  [ "$role $host" = "$want" ] || fail "job $idd: rank $r is $role on $host, wanted $want (dedicated)"
done
grep -qF "4 workers in 2 nodes of 2, 1 server, mode hybrid" ded.out || fail "job $idd: the engine did not see 2 nodes of 2 workers"
echo "ok: dedicated mpirun job $idd: the server alone on ${job_nodes[2]}:"
printf '    %s\n' "${rows[@]}"

# 5. The no-server job: 2 + 2 as the header says.
finished_job "$ide" even.out 4 no-server
grep -qF "placement: spread: 2 worker(s) per node on 2 node(s), no servers" even.out ||
  fail "job $ide: not the spread placement without servers"
for line in "${rows[@]}"; do
  read -r r role host cpus <<<"$line"
  [ "$host" = "${job_nodes[r / 2]}" ] || fail "job $ide: rank $r on $host, wanted ${job_nodes[r / 2]} (blocks of 2)"
done
grep -qF "4 workers in 2 nodes of 2, 0 servers, mode allreduce" even.out || fail "job $ide: the engine did not see 2 nodes of 2 workers"
echo "ok: no-server overcommitted job $ide: 2 + 2 workers, as the header says:"
printf '    %s\n' "${rows[@]}"
