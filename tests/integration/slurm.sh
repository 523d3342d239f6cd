#!/usr/bin/env bash
# The Slurm scripts against a real one-node Slurm (slurm/local-cluster.sh):
#  1. srun with a mismatched MPI plugin starts N singletons → the engine stops
#     with its SLURM_NTASKS message (exit 2) instead of N duplicate runs;
#  2. slurm/train.sbatch, Fashion-MNIST LeNet-5, 5 tasks in hybrid mode
#     (2 virtual nodes × 2 workers + 1 server), once through srun (no --mpi: the
#     cluster's MpiDefault=pmix, as a site default would hold)
#     and once through mpirun: both finish, reach the accuracy, write metrics;
#  3. slurm/sweep over 1, 2 and 4 workers with its report job: report.csv has
#     a row per point and both PNGs are real images of a sensible size.
# The cluster is stopped by an EXIT trap, also when a check fails. No Slurm or
# munge on the machine is a FAILURE with a message, never a skip.
# Usage: DTRAIN=build/dtrain WORK=dir SRC=repo bash tests/integration/slurm.sh
source "$(dirname "$0")/lib.sh"
: "${SRC:?repository root}"
D="$WORK/data"
T="$WORK/slurm"
rm -rf "$T"
mkdir -p "$T"
source "$IT_DIR/slurm_lib.sh"
slurm_test_start "slurm test" "${DTRAIN_SLURM_TEST_BUDGET:-600}"
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  fail "/usr/bin/python3 cannot import matplotlib: install python3-matplotlib (scripts/setup-deps.sh)"
[ -s "$D/fashion-mnist-train.h5" ] || fail "no $D/fashion-mnist-train.h5 (the it_data_convert fixture makes it)"
slurm_cluster_up mpirun

export DTRAIN
cd "$SRC" || fail "no $SRC"
data=(--train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5")
nosave=(--save-params "")  # no run folders in the source tree (jobs run from it)
# Nor checkpoint folders: train.sbatch's default is checkpoints/ under the
# submit folder (tests/integration/slurm_requeue.sh tests it).
export DTRAIN_CHECKPOINT_DIR=""

# check_run NAME ID: the job completed, printed its layout and result, and
# its metrics hold step records and an accurate enough final epoch.
check_run() {
  local name=$1 id=$2 res out="$T/$1.out" m="$T/$1/metrics.jsonl"
  res=$(wait_job "$id")
  [ "$res" = "COMPLETED 0:0" ] || { cat "$out" >&2; fail "$name job $id ended $res"; }
  grep -qF "ranks:    5 = 4 worker(s) + 1 parameter server(s)" "$out" || { cat "$out" >&2; fail "$name: no layout line"; }
  grep -qF "final test accuracy" "$out" || { cat "$out" >&2; fail "$name: no final accuracy line"; }
  [ "$(grep -c 'dtrain: finished' "$out")" = 1 ] || { cat "$out" >&2; fail "$name: not exactly one run finished"; }
  for f in step epoch loss lr images_per_s t_compute_s t_comm_s t_io_wait_s; do
    json_field "$m" step "$f" >/dev/null || fail "$name: step record lacks $f"
  done
  local acc; acc=$(json_field "$m" epoch test_accuracy)
  /usr/bin/python3 -c "import sys; sys.exit(0 if $acc >= 0.75 else 1)" ||
    fail "$name: test accuracy $acc < 0.75 after one epoch on 12k images"
  echo "ok: $name (job $id): $res, test accuracy $acc, $(grep -c '"kind":"step"' "$m") step records"
}

# 1. Mismatched MPI plugin. With Debian's OpenMPI, `srun --mpi=none` alone
# makes MPI_Init fail (OpenMPI refuses a direct launch without PMI); an MPI
# that falls back to singletons (or a task environment without SLURM_STEP_ID,
# which is how OpenMPI is made to do it here) gives N one-rank worlds while
# SLURM_NTASKS says N: the engine must stop with exit 2 naming SLURM_NTASKS.
out=$(timeout 120 srun --mpi=none -n 2 --overcommit env -u SLURM_STEP_ID \
        "$DTRAIN" train --job jobs/fashion_lenet.ini "${data[@]}" "${nosave[@]}" --max-steps 5 \
        --max-test-samples 100 --metrics "$T/singletons.jsonl" 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] || fail "srun --mpi=none with 2 singletons: exit $rc, wanted 2 → $out"
grep -qF SLURM_NTASKS <<<"$out" || fail "singletons: no message naming SLURM_NTASKS → $out"
! grep -qF "dtrain: finished" <<<"$out" || fail "singletons: a duplicate run trained → $out"
echo "ok: 2 singletons under srun --mpi=none stopped with: $(grep -m1 SLURM_NTASKS <<<"$out")"
out=$(timeout 120 srun --mpi=none -n 2 --overcommit "$DTRAIN" train --job jobs/fashion_lenet.ini \
        "${data[@]}" "${nosave[@]}" --max-steps 5 --max-test-samples 100 --metrics "$T/plain.jsonl" 2>&1) && rc=0 || rc=$?
[ "$rc" != 0 ] || fail "srun --mpi=none -n 2 succeeded: $out"
! grep -qF "dtrain: finished" <<<"$out" || fail "srun --mpi=none: a duplicate run trained → $out"
echo "ok: plain srun --mpi=none -n 2 fails without training (exit $rc)"

# 2. train.sbatch, 5 tasks hybrid, via srun (MpiDefault=pmix) and via mpirun. The
# per-worker minibatch 16 keeps the global batch at the job file's 64.
short=(--mode hybrid --ps 1 --ranks-per-node 2 --minibatch 16 --max-train-samples 12000
       --max-test-samples 2000 --epochs 1 --log-interval 50)
ids=()
for launcher in srun mpirun; do
  mkdir -p "$T/$launcher"
  id=$(DTRAIN_LAUNCHER=$launcher sbatch --parsable --job-name="it-$launcher" --ntasks=5 \
         --overcommit --cpus-per-task=1 --time=00:10:00 --output="$T/$launcher.out" \
         slurm/train.sbatch jobs/fashion_lenet.ini "${data[@]}" "${nosave[@]}" "${short[@]}" \
         --metrics "$T/$launcher/metrics.jsonl") || fail "sbatch ($launcher) refused the job"
  ids+=("$id")
done
check_run srun "${ids[0]}"
check_run mpirun "${ids[1]}"

# 3. A small sweep (1, 2, 4 workers, allreduce, one machine) and its report.
slurm/sweep --out "$T/sweep" --virtual --nodes "1 2 4" --modes allreduce --time 00:10:00 \
  --sbatch-arg=--cpus-per-task=1 jobs/fashion_lenet.ini -- "${data[@]}" \
  --minibatch 32 --max-train-samples 6000 --max-test-samples 500 --epochs 1 --log-interval 5 ||
  fail "slurm/sweep failed"
rid=$(cat "$T/sweep/report.jobid")
res=$(wait_job "$rid")
[ "$res" = "COMPLETED 0:0" ] || { cat "$T"/sweep/report-*.out "$T"/sweep/*/slurm-*.out >&2; fail "report job $rid ended $res"; }
cat "$T"/sweep/report-*.out
/usr/bin/python3 - "$T/sweep" <<'PY' || fail "sweep report check failed"
import csv, struct, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/report.csv")))
assert len(rows) == 3, f"{len(rows)} rows in report.csv, wanted 3"
assert sorted(int(r["workers"]) for r in rows) == [1, 2, 4], rows
for r in rows:
    assert r["status"] == "ok", r
    for k in ("images_per_s", "step_time_s", "t_compute_s", "r_o", "speedup", "alpha", "predicted_speedup"):
        assert r[k] != "" and float(r[k]) >= 0, (k, r)
    assert float(r["images_per_s"]) > 0, r
    assert r["predicted_from"].startswith("dtrain report ("), r  # not fitted: engine/predict.cpp
for png in ("speedup.png", "breakdown.png"):
    data = open(f"{d}/{png}", "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    w, h = struct.unpack(">II", data[16:24])
    assert len(data) > 20000 and w >= 600 and h >= 400, f"{png}: {len(data)} bytes, {w}x{h}"
    print(f"ok: {png}: {w}x{h}, {len(data)} bytes")
PY
echo "ok: sweep of 3 points and its report ($(( SECONDS - t_start )) s so far)"
