#!/usr/bin/env bash
# bench/validate_model.sh — the performance model's validation runs on one machine
# (docs/performance-model.md): `dtrain tune` profiles the job, then six layouts run
# side by side (1 worker; 2 workers allreduce; 2 workers ps 1 server; 4 workers ps 2
# servers; 4 workers hybrid with 1 and 2 servers, 2 per virtual node) and
# `dtrain report` prints measured vs predicted step time for each.
# usage: bench/validate_model.sh OUTDIR [MODEL=lenet5] [MINIBATCH=64] [STEPS=150]
# Run it on an otherwise idle machine: the model accounts for background load
# it can measure, but not for demand that appears mid-run.
set -eu
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
B=${DTRAIN:-build/dtrain}
D=${DATA:-data}
O=${1:?usage: $0 OUTDIR [MODEL] [MINIBATCH] [STEPS]}; M=${2:-lenet5}; X=${3:-64}; S=${4:-150}
mkdir -p "$O"
common=(--job jobs/fashion_lenet.ini --model "$M" --train-data "$D/fashion-mnist-train.h5" --test-data ""
        --threads 1 --max-steps "$S" --log-interval 10 --minibatch "$X" --lr 0.01 --warmup-epochs 0)
mpi() { local np=$1 name=$2; shift 2
  mpirun -np "$np" --oversubscribe --bind-to none "$B" train "${common[@]}" --metrics "$O/$name.jsonl" "$@" > "$O/$name.log" 2>&1
  echo "$name done, load $(cut -d' ' -f1 /proc/loadavg)"; }
mpirun -np 2 --oversubscribe --bind-to none "$B" tune "${common[@]}" --nodes 2 --gpus-per-node 2 --candidates "$X" \
  --profile-steps 100 --out "$O/tuned.ini" > "$O/tune.log" 2>&1
mpi 1 w1
mpi 2 w2_ar --mode allreduce
mpi 3 w2_ps1 --mode ps --ps 1
mpi 6 w4_ps2 --mode ps --ps 2
mpi 5 w4_hy1 --mode hybrid --ps 1 --ranks-per-node 2
mpi 6 w4_hy2 --mode hybrid --ps 2 --ranks-per-node 2
"$B" report --profile "$O/tuned.ini.profile.json" --metrics "$O"/w*.jsonl
