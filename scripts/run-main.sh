#!/usr/bin/env bash
# scripts/run-main.sh — README command 1: installs the dependencies, builds,
# converts Fashion-MNIST and trains LeNet-5 on it with mpirun: 5 ranks = two
# (virtual) nodes of 2 workers in hybrid mode + 1 parameter server. Each worker
# takes 16 images a step, so the global minibatch is the job file's 64.
# Extra arguments are passed to `dtrain train` (e.g. --epochs 2).
# Outputs: data/ (HDF5 datasets) and the run folder runs/fashion_lenet/<n>/
# (metrics.jsonl with the run record, params.h5); runs/fashion_lenet/latest → it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh --target dtrain  # command 1 needs only dtrain; command 2 builds the tests
[ -f data/fashion-mnist-train.h5 ] && [ -f data/fashion-mnist-test.h5 ] || build/dtrain data fashion-mnist --out data
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 5 --oversubscribe --bind-to none build/dtrain train --job jobs/fashion_lenet.ini \
  --mode hybrid --ps 1 --ranks-per-node 2 --minibatch 16 "$@"
