#!/usr/bin/env bash
# scripts/run-main.sh — README command 1: installs the dependencies, builds,
# converts Fashion-MNIST and trains LeNet-5 on it with mpirun.
# Outputs: data/ (HDF5 datasets), runs/fashion_lenet/metrics.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh
[ -f data/fashion-mnist-test.h5 ] || build/dtrain data fashion-mnist --out data
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 1 --bind-to none build/dtrain train --job jobs/fashion_lenet.ini "$@"
