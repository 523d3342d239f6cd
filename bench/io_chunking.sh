#!/usr/bin/env bash
# bench/io_chunking.sh — HDF5 chunk layout vs read speed (the loader's storage side).
#
# Writes two synthetic datasets that differ only in the /images chunk layout —
# one sample per chunk vs the writer's default (>= 64 samples, ~512 KiB per
# chunk; what `dtrain data` writes) — and reads random minibatches (cold: page
# cache dropped with posix_fadvise, then the best of 3 warm passes) and
# sequential minibatches from each through io::Hdf5Dataset, printing samples/s
# and the ratio default / one-per-chunk. Two shapes: Fashion-MNIST-like 28x28x1
# and 64x64x3. Not part of ctest.
#
# usage: bench/io_chunking.sh [--dtrain build/dtrain] [--dir /tmp] [--minibatch 256]
set -euo pipefail
cd "$(dirname "$0")/.."
dtrain=build/dtrain
dir=${TMPDIR:-/tmp}
minibatch=256
while [[ $# -gt 0 ]]; do
  case $1 in
    --dtrain) dtrain=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --minibatch) minibatch=$2; shift 2 ;;
    *) echo "usage: $0 [--dtrain build/dtrain] [--dir /tmp] [--minibatch 256]" >&2; exit 2 ;;
  esac
done
for spec in "60000 28x28x1" "20000 64x64x3"; do
  set -- $spec
  echo "== $2, $1 samples, minibatch $minibatch"
  "$dtrain" bench io --chunking --n "$1" --shape "$2" --minibatch "$minibatch" --dir "$dir"
done
