#!/usr/bin/env bash
# bench/same_params.sh — behaviour unchanged, bitwise: runs the main job
# (jobs/fashion_lenet.ini, fixed seed, 1 thread per rank) for STEPS steps in
# 1 process and in each of the three modes of the README (allreduce 4 workers;
# ps 4 workers + 2 servers; hybrid 2 virtual nodes × 2 + 1 server) with two
# dtrain binaries, and requires `h5diff` to find the saved parameters and
# buffers identical, and the metrics identical apart from timing fields.
# Used to check a refactoring against the commit before it:
#   git worktree add /tmp/before <commit> && cmake -S /tmp/before -B /tmp/before/build \
#     -DDTRAIN_TESTS=OFF && cmake --build /tmp/before/build --target dtrain
#   bench/same_params.sh /tmp/before/build/dtrain build/dtrain [STEPS=300] [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
dt_root_env
A=${1:?usage: $0 DTRAIN_BEFORE DTRAIN_AFTER [STEPS] [OUTDIR]}; B=${2:?}; S=${3:-300}
O=${4:-$(mktemp -d)}
D=${DATA:-data}
[ -f "$D/fashion-mnist-train.h5" ] || "$B" data fashion-mnist --out "$D"
rm -rf "$O" && mkdir -p "$O"
common=(--job jobs/fashion_lenet.ini --train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5"
        --max-test-samples 1000 --max-steps "$S" --log-interval 50 --threads 1 --seed 3)
fail=0
for layout in "1 single" "4 allreduce --minibatch 16" "6 ps --mode ps --ps 2 --minibatch 16" \
              "5 hybrid --mode hybrid --ps 1 --ranks-per-node 2 --minibatch 16"; do
  set -- $layout; np=$1 name=$2; shift 2
  for side in before after; do
    bin=$A; [ "$side" = after ] && bin=$B
    OMP_NUM_THREADS=1 dt_mpirun "$np" "$bin" train "${common[@]}" "$@" --metrics "$O/$name.$side.jsonl" \
      --save-params "$O/$name.$side.h5" > "$O/$name.$side.log" 2>&1 || { tail -5 "$O/$name.$side.log"; exit 1; }
  done
  if h5diff "$O/$name.before.h5" "$O/$name.after.h5" > "$O/$name.h5diff" 2>&1; then p=identical; else p="DIFFER ($(head -3 "$O/$name.h5diff" | tr '\n' ' '))"; fail=1; fi
  m=$("$(dt_python)" - "$O/$name.before.jsonl" "$O/$name.after.jsonl" <<'PY'
import json, sys
timing = {"images_per_s", "t_compute_s", "t_comm_s", "t_io_wait_s", "t_comm_total_s", "comm_hidden_fraction",
          "io_wait_fraction", "epoch_time_s", "wall_s", "job_cpu_s", "machine_busy_s", "background_cores",
          "load_1m_start"}
def read(p):
    out = []
    for line in open(p):
        r = json.loads(line)
        out.append({k: v for k, v in r.items() if k not in timing})
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
print("identical" if a == b else "DIFFER")
PY
)
  [ "$m" = identical ] || fail=1
  echo "$name ($np rank(s), $S steps): parameters $p; metrics (timing fields aside) $m"
done
echo "outputs in $O"
exit $fail
