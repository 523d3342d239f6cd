#!/usr/bin/env bash
# scripts/build.sh — configure and build into build/ (Release). Extra arguments
# go to cmake's configure step (e.g. -DDTRAIN_CUDA=OFF,
# -DCMAKE_PREFIX_PATH=/path/to/prefix). Shows the configure summary (the
# "dtrain:" lines: CUDA ON/OFF, NCCL, oneDNN, MPI, HDF5) and any CMake warning;
# the whole configure output is kept in build/configure.log and printed in full
# when configuring fails.
# Parallel build jobs: --jobs N (or -j N) first, else DTRAIN_BUILD_JOBS, else
# CMAKE_BUILD_PARALLEL_LEVEL, else every core this process may use (nproc); on
# a shared login node pass a small --jobs. --target T (repeatable) builds only
# T and what it needs (scripts/run-main.sh builds only dtrain, not the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${DTRAIN_BUILD_JOBS:-${CMAKE_BUILD_PARALLEL_LEVEL:-}}
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --help | -h) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; echo "usage: scripts/build.sh [--jobs N] [--target T ...] [cmake configure arguments...]"; exit 0 ;;
    --jobs | -j) [ $# -ge 2 ] || { echo "build.sh: $1 needs a number" >&2; exit 2; }; jobs=$2; shift 2 ;;
    --jobs=*) jobs=${1#--jobs=}; shift ;;
    --target) [ $# -ge 2 ] && [ -n "$2" ] || { echo "build.sh: --target needs a target name (e.g. dtrain)" >&2; exit 2; }; targets+=("$2"); shift 2 ;;
    --target=*) [ -n "${1#--target=}" ] || { echo "build.sh: --target needs a target name (e.g. dtrain)" >&2; exit 2; }; targets+=("${1#--target=}"); shift ;;
    *) break ;;
  esac
done
jobs=${jobs:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "build.sh: the number of jobs must be a positive integer, not '$jobs'" >&2; exit 2; }
mkdir -p build
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" > build/configure.log 2>&1; then
  cat build/configure.log >&2
  echo "build.sh: cmake configure failed (log: build/configure.log)" >&2
  exit 1
fi
grep -E '^-- dtrain:|CMake Warning' build/configure.log | sed 's/^-- //' || true
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build build -j "$jobs" --target "${targets[@]}"
else
  cmake --build build -j "$jobs"
fi
