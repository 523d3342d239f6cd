#!/usr/bin/env bash
# scripts/build.sh — configure and build into build/ (Release). Extra arguments
# go to cmake's configure step (e.g. -DDTRAIN_CUDA=OFF). Shows the configure
# summary (the "dtrain:" lines: CUDA ON/OFF, NCCL, oneDNN, MPI, HDF5) and any
# CMake warning; the whole configure output is kept in build/configure.log and
# printed in full when configuring fails.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" > build/configure.log 2>&1; then
  cat build/configure.log >&2
  echo "build.sh: cmake configure failed (log: build/configure.log)" >&2
  exit 1
fi
grep -E '^-- dtrain:|CMake Warning' build/configure.log | sed 's/^-- //' || true
cmake --build build -j "${DTRAIN_BUILD_JOBS:-$(nproc)}"
