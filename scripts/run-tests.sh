#!/usr/bin/env bash
# scripts/run-tests.sh — README command 2: installs the dependencies, builds,
# and runs the whole test suite with ctest (non-zero exit when a test fails).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 "$@"
