#!/usr/bin/env bash
# bench/checkpoint_cost.sh — what a checkpoint costs a long job
# (docs/reliability.md): its size, the blocking part (the gather from the
# parameter servers and rank 0's host copy), the background HDF5 write, and the
# share of step time at one checkpoint per INTERVAL seconds, for ResNet-50
# (25.6 M parameters) in 5-rank hybrid mode (2 nodes × 2 workers + 1 server)
# on synthetic ImageNet-shaped data. Prints the same run without checkpoints
# beside it: the ratio of mean step times with / without shows what the
# background write takes from training on this machine. Not part of ctest.
#
# usage: bench/checkpoint_cost.sh [--dtrain build/dtrain] [--dir /tmp] [--steps 8]
#                                 [--every 2] [--interval 600] [--model resnet50]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
dt_root_env
dtrain=build/dtrain
dir=${TMPDIR:-/tmp}
steps=8
every=2
interval=600
model=resnet50
while [[ $# -gt 0 ]]; do
  case $1 in
    --dtrain) dtrain=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) echo "usage: $0 [--dtrain B] [--dir D] [--steps N] [--every K] [--interval S] [--model M]" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d "$dir/dtrain-ckpt-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
data="$work/synth.h5"
"$dtrain" data synth --shape 224x224x3 --n 64 --classes 1000 --out "$data" > /dev/null
args=(--job jobs/resnet50_imagenet.ini --model "$model" --train-data "$data" --test-data "" --minibatch 2
      --max-steps "$steps" --log-interval 1 --threads 1 --loader-threads 1 --mode hybrid --ps 1 --ranks-per-node 2
      --runs-dir "$work/runs" --save-params "" --checkpoint-epoch-end false)
run() {  # NAME ARGS...: the metrics file
  local name=$1; shift
  dt_mpirun 5 "$dtrain" train "${args[@]}" --metrics "$work/$name.jsonl" "$@" > "$work/$name.log" 2>&1 \
    || { tail -20 "$work/$name.log" >&2; exit 1; }
  echo "$work/$name.jsonl"
}
plain=$(run plain)
ckpt=$(run ckpt --checkpoint-dir "$work/ck" --checkpoint-every-steps "$every")
"$(dt_python)" - "$plain" "$ckpt" "$interval" "$model" <<'PY'
import json, sys
plain, ckpt, interval, model = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
def recs(p, kind):
    return [r for r in map(json.loads, open(p)) if r.get("kind") == kind]
# Step times: the interval records after the first (warm-up) step; one record per step.
def step_times(p):
    s = recs(p, "step")[1:]
    return [r["t_compute_s"] + r["t_comm_s"] + r["t_io_wait_s"] + r.get("t_checkpoint_s", 0) for r in s]
tp, tc = step_times(plain), step_times(ckpt)
mp, mc = sum(tp) / len(tp), sum(tc) / len(tc)
cks = recs(ckpt, "checkpoint")
size = sum(c["bytes"] for c in cks) / len(cks)
snap = sum(c["t_snapshot_s"] for c in cks) / len(cks)
write = sum(c["t_write_s"] for c in cks) / len(cks)
print(f"{model}, 5-rank hybrid (2 nodes x 2 workers + 1 PS), minibatch 2 per worker, {len(cks)} checkpoints")
print(f"  checkpoint size            {size / 1e6:8.1f} MB")
print(f"  blocking (gather + copy)   {snap:8.3f} s")
print(f"  background write (HDF5)    {write:8.3f} s  ({size / 1e6 / write:.0f} MB/s)")
print(f"  mean step, no checkpoints  {mp:8.3f} s")
print(f"  mean step, with            {mc:8.3f} s  (ratio with/without {mc / mp:.3f})")
share = snap / interval
share_all = (snap + write) / interval
print(f"  at one checkpoint per {interval:.0f} s: blocking share {100 * share:.4f}% of step time; "
      f"even if the whole write blocked: {100 * share_all:.4f}%")
PY
