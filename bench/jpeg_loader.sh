#!/usr/bin/env bash
# bench/jpeg_loader.sh — the jpeg layout's loader (issue 15, "it keeps up"):
# decode + random-resized crop throughput per loader thread, and the exposed
# I/O wait with 2 loader threads under a compute stand-in of 100 ms per
# minibatch of 32 (target: < 2% of the step). Not part of ctest.
#
# The files (tests/make_jpeg_store.cpp, the tests' fixture writer): N
# Fashion-MNIST pictures resized to a shorter side S and a longer side in
# [S, 1.5 S] (portrait and landscape), tinted into RGB, with Gaussian noise of
# 16 grey levels (photographs' texture: ~38 KB per JPEG at S = 256, quality 90,
# ImageNet's size at that side), stored as JPEGs; S = 256 (the recipes' store)
# and S = 512 (a store much larger than the input: DCT scaling on and off).
#
# usage: bench/jpeg_loader.sh [--build build] [--dir /tmp] [--n 2000] [--steps 100]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
dir=${TMPDIR:-/tmp}
n=2000
steps=100
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: $0 [--build build] [--dir /tmp] [--n 2000] [--steps 100]" >&2; exit 2 ;;
  esac
done
dt="$build/dtrain"
s256="$dir/dtrain-bench-jpeg256-$$.h5"
s512="$dir/dtrain-bench-jpeg512-$$.h5"
trap 'rm -f "$s256" "$s512"' EXIT
"$build/tests/dtrain_make_jpeg_store" "$s256" "$n" size=256 long=384 noise=16
"$build/tests/dtrain_make_jpeg_store" "$s512" "$((n / 4))" size=512 long=768 noise=16
ls -l "$s256" "$s512"
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
run() { echo "-- $*"; "$dt" bench io --minibatch 32 "$@" | grep -E "^(dtrain: )?(loader alone|with)" || true; }
echo "== per thread (1 loader thread, nothing else), 224x224x3 input"
run --data "$s256" --threads 1 --steps "$steps" --augment rrc --flip
run --data "$s256" --threads 1 --steps "$steps" --augment crop --flip
run --data "$s256" --threads 1 --steps "$steps" --augment none   # the evaluation crop
echo "== S = 512: DCT scaling on / off"
for d in true false; do
  run --data "$s512" --threads 1 --steps "$((steps / 2))" --augment rrc --flip --dct-scaling "$d"
  run --data "$s512" --threads 1 --steps "$((steps / 2))" --augment none --dct-scaling "$d"
done
echo "== 2 loader threads under 100 ms of (sleeping) compute per minibatch of 32, three runs"
for r in 1 2 3; do
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  run --data "$s256" --threads 2 --depth 2 --steps "$steps" --augment rrc --flip --compute-ms 100
done
