#!/usr/bin/env bash
# scripts/build.sh — configure and build into build/ (Release). Extra arguments
# go to cmake's configure step (e.g. -DDTRAIN_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)"
