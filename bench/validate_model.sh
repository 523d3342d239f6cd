#!/usr/bin/env bash
# bench/validate_model.sh — the performance model's validation runs on one machine
# (docs/performance-model.md, "Validation"): `dtrain tune` profiles the job (T_C in
# each of 8 ranks in turn — 8 processes, since a process's speed can differ from the
# next one's on a shared VM; links by ping-pong), then six layouts run REPEATS times,
# interleaved (1 worker; 2 workers allreduce; 2 workers ps with 1 server; 4 workers
# ps with 2 servers; 4 workers hybrid with 1 and 2 servers, 2 workers per virtual
# node), and `dtrain report` prints measured (median over the repeats) against
# predicted step time for each layout.
# usage: bench/validate_model.sh OUTDIR [MODEL=lenet5] [MINIBATCH=64] [STEPS=300] [REPEATS=3]
# Extra `dtrain train` options for every run can be given in TRAIN_OPTS (e.g.
# TRAIN_OPTS="--wait-policy spin"). Run it on an otherwise idle machine: the model
# accounts for background load it can measure, not for demand that changes mid-run.
set -eu
cd "$(dirname "$0")/.."
source bench/lib.sh
dt_root_env
export OMP_NUM_THREADS=1
B=${DTRAIN:-build/dtrain}
D=${DATA:-data}
O=${1:?usage: $0 OUTDIR [MODEL] [MINIBATCH] [STEPS] [REPEATS]}; M=${2:-lenet5}; X=${3:-64}; S=${4:-300}; R=${5:-3}
mkdir -p "$O"
rm -f "$O"/w*.jsonl
log=$(( S / 10 > 0 ? S / 10 : 1 ))
common=(--job jobs/fashion_lenet.ini --model "$M" --train-data "$D/fashion-mnist-train.h5" --test-data ""
        --threads 1 --max-steps "$S" --log-interval "$log" --minibatch "$X" --lr 0.01 --warmup-epochs 0
        ${TRAIN_OPTS:-})
mpi() { local np=$1 name=$2; shift 2
  dt_mpirun "$np" "$B" train "${common[@]}" --metrics "$O/$name.r$rep.jsonl" --save-params "" "$@" \
    > "$O/$name.r$rep.log" 2>&1
  echo "$name run $rep done, load $(cut -d' ' -f1 /proc/loadavg)"; }
dt_mpirun 8 "$B" tune "${common[@]}" --nodes 2 --workers-per-node 2 --candidates "$X" \
  --profile-steps "$(( S / 3 > 20 ? S / 3 : 20 ))" --out "$O/tuned.ini" > "$O/tune.log" 2>&1
grep -A1 X_mini "$O/tune.log"
for rep in $(seq 1 "$R"); do
  mpi 1 w1
  mpi 2 w2_ar --mode allreduce
  mpi 3 w2_ps1 --mode ps --ps 1
  mpi 6 w4_ps2 --mode ps --ps 2
  mpi 5 w4_hy1 --mode hybrid --ps 1 --ranks-per-node 2
  mpi 6 w4_hy2 --mode hybrid --ps 2 --ranks-per-node 2
done
"$B" report --profile "$O/tuned.ini.profile.json" --metrics "$O"/w*.jsonl | tee "$O/report.txt"
