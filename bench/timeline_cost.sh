#!/usr/bin/env bash
# bench/timeline_cost.sh — what --timeline costs (docs/timeline.md): mean step
# time of a LeNet-5 run on Fashion-MNIST without and with the timeline
# (recording every step), alternating off/on REPEATS times, and the median
# ratio on/off. Also the size of the file and its events. Not part of ctest.
#
# usage: bench/timeline_cost.sh [--dtrain build/dtrain] [--data build/it/data]
#          [--np 3] [--mode allreduce] [--ps 0] [--steps 200] [--repeats 3] [--minibatch 64]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
dt_root_env
dtrain=build/dtrain
data=build/it/data
np=3
mode=allreduce
ps=0
steps=200
repeats=3
minibatch=64
while [[ $# -gt 0 ]]; do
  case $1 in
    --dtrain) dtrain=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --ps) ps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --minibatch) minibatch=$2; shift 2 ;;
    *) echo "usage: $0 [--dtrain B] [--data D] [--np N] [--mode M] [--ps K] [--steps S] [--repeats R] [--minibatch B]" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-timeline-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
args=(--job jobs/fashion_lenet.ini --train-data "$data/fashion-mnist-train.h5" --test-data "" --minibatch "$minibatch"
      --max-steps "$steps" --log-interval "$steps" --threads 1 --loader-threads 1 --mode "$mode" --ps "$ps"
      --save-params "")
workers=$((np - ps))
ms_per_step() {  # METRICS: mean training ms per step from the run record
  "$(dt_python)" -c "import sys; print('%.3f' % (1000.0 * $workers * $minibatch / float(sys.argv[1])))" \
    "$(json_field "$1" run images_per_s)"
}
offs=() ons=()
for r in $(seq 1 "$repeats"); do
  dt_mpirun "$np" "$dtrain" train "${args[@]}" --metrics "$work/off$r.jsonl" > /dev/null
  offs+=("$(ms_per_step "$work/off$r.jsonl")")
  dt_mpirun "$np" "$dtrain" train "${args[@]}" --metrics "$work/on$r.jsonl" --timeline "$work/t$r.json" \
    --timeline-steps "$steps" > /dev/null
  ons+=("$(ms_per_step "$work/on$r.jsonl")")
  echo "repeat $r: off ${offs[-1]} ms/step, on ${ons[-1]} ms/step"
done
"$(dt_python)" - "$work/t1.json" "${offs[*]}" "${ons[*]}" <<'PY'
import json, os, statistics, sys
path, offs, ons = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
doc = json.load(open(path))
n = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
off, on = statistics.median(offs), statistics.median(ons)
print("median ms/step: off %.3f, on %.3f, ratio on/off %.3f" % (off, on, on / off))
print("timeline: %d events, %.1f KiB, clock alignment ±%.1f µs"
      % (n, os.path.getsize(path) / 1024, doc["otherData"]["clock_alignment_error_us"]))
PY
