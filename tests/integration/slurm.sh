#!/usr/bin/env bash
# The Slurm scripts against a real one-node Slurm (slurm/local-cluster.sh):
#  0. (after 1) a train.sbatch job that reaches its time limit (--time=1, a compute
#     stand-in that sleeps, so it costs no CPU while it waits) ends TIMEOUT,
#     not requeued, with every log interval the log shows in its metrics;
#  1. srun with a mismatched MPI plugin starts N singletons → the engine stops
#     with its SLURM_NTASKS message (exit 2) instead of N duplicate runs;
#  2. slurm/train.sbatch, Fashion-MNIST LeNet-5, 5 tasks in hybrid mode
#     (2 virtual nodes × 2 workers + 1 server), once through srun (no --mpi: the
#     cluster's MpiDefault=pmix, as a site default would hold) with
#     `sbatch -D` and a job file relative to it, once through mpirun: both
#     finish, reach the accuracy, write metrics; the -D job's log
#     (%x-%j.out) and run folder (runs/%x-%j/: job.ini, batch-script,
#     command.txt, nodes.txt, env.txt, metrics.jsonl, params.h5) are under -D,
#     nothing in the submit folder;
#  3. slurm/sweep with an impossible point (64 nodes on this one) submits
#     nothing and names the point; a 2-point sweep (1 and 2 workers) with 2
#     repeats of 5 warm-up + 20 timed steps and its report job: report.csv has
#     both points with both jobs COMPLETED (sacct), their node lists, the
#     prediction; each job's run folder holds its files; both PNGs are real
#     images of a sensible size.
# The cluster is stopped by an EXIT trap, also when a check fails. No Slurm or
# munge on the machine is a FAILURE with a message, never a skip.
# Usage: DTRAIN=build/dtrain WORK=dir SRC=repo bash tests/integration/slurm.sh
# shellcheck disable=SC2015  # "A && B || fail …": fails when either check fails
source "$(dirname "$0")/lib.sh"
: "${SRC:?repository root}"
D="$WORK/data"
T="$WORK/slurm"
rm -rf "$T"
mkdir -p "$T"
source "$IT_DIR/slurm_lib.sh"
slurm_test_start "slurm test" "${DTRAIN_SLURM_TEST_BUDGET:-600}"
# The report's Python: DTRAIN_PYTHON, else the first python3 that has matplotlib
# (slurm/ itself names none: slurm/sweep --python, default python3 on PATH).
PY=${DTRAIN_PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3 /usr/bin/python3; do
    if "$c" -c 'import matplotlib' 2>/dev/null; then PY=$(command -v "$c"); break; fi
  done
fi
[ -n "$PY" ] && "$PY" -c 'import matplotlib' 2>/dev/null ||
  fail "no python3 with matplotlib (${DTRAIN_PYTHON:-python3, /usr/bin/python3}): install python3-matplotlib (scripts/setup-deps.sh) or set DTRAIN_PYTHON"
[ -s "$D/fashion-mnist-train.h5" ] || fail "no $D/fashion-mnist-train.h5 (the it_data_convert fixture makes it)"
slurm_cluster_up mpirun

DTRAIN=$(cd "$(dirname "$DTRAIN")" && pwd)/$(basename "$DTRAIN")
export DTRAIN
unset DTRAIN_RUN_DIR DTRAIN_ARGS DTRAIN_JOB
cd "$SRC" || fail "no $SRC"
# Jobs are submitted from the source tree; nothing may land there.
# The tree's state: git's status where git and a checkout are there, else every
# file's path, size and time outside the build folders (a copied tree, no git).
src_state() {
  if command -v git > /dev/null 2>&1 && git -C "$SRC" rev-parse --git-dir > /dev/null 2>&1; then
    git -C "$SRC" status --porcelain --untracked-files=all 2>/dev/null | sort
  else
    find "$SRC" -path "$SRC/build*" -prune -o -type f -printf '%P %s %T@\n' | sort
  fi
}
src_before=$(src_state | md5sum)
data=(--train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5")
# No checkpoint folders (tests/integration/slurm_requeue.sh tests them).
export DTRAIN_CHECKPOINT_DIR=""

# check_run NAME ID LOG METRICS: the job completed, printed its layout and
# result, and its metrics hold step records and an accurate enough final epoch.
check_run() {
  local name=$1 id=$2 out=$3 m=$4 res
  res=$(wait_job "$id")
  [ "$res" = "COMPLETED 0:0" ] || fail_log "$out" "$name job $id ended $res"
  grep -qF "ranks:    5 = 4 worker(s) + 1 parameter server(s)" "$out" || fail_log "$out" "$name: no layout line"
  grep -qF "final test accuracy" "$out" || fail_log "$out" "$name: no final accuracy line"
  [ "$(grep -c 'dtrain: finished' "$out")" = 1 ] || fail_log "$out" "$name: not exactly one run finished"
  for f in step epoch loss lr images_per_s t_compute_s t_comm_s t_io_wait_s; do
    json_field "$m" step "$f" >/dev/null || fail "$name: step record lacks $f"
  done
  local acc; acc=$(json_field "$m" epoch test_accuracy)
  "$PY" -c "import sys; sys.exit(0 if $acc >= 0.75 else 1)" ||
    fail "$name: test accuracy $acc < 0.75 after one epoch on 12k images"
  echo "ok: $name (job $id): $res, test accuracy $acc, $(grep -c '"kind":"step"' "$m") step records"
}

# 1. Mismatched MPI plugin. With Debian's OpenMPI, `srun --mpi=none` alone
# makes MPI_Init fail (OpenMPI refuses a direct launch without PMI); an MPI
# that falls back to singletons (or a task environment without SLURM_STEP_ID,
# which is how OpenMPI is made to do it here) gives N one-rank worlds while
# SLURM_NTASKS says N: the engine must stop with exit 2 naming SLURM_NTASKS.
nosave=(--save-params "")
out=$(cd "$T" && timeout 120 srun --mpi=none -n 2 --overcommit env -u SLURM_STEP_ID \
        "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" "${data[@]}" "${nosave[@]}" --max-steps 5 \
        --max-test-samples 100 --metrics "$T/singletons.jsonl" 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] || fail "srun --mpi=none with 2 singletons: exit $rc, wanted 2 → $out"
grep -qF SLURM_NTASKS <<<"$out" || fail "singletons: no message naming SLURM_NTASKS → $out"
! grep -qF "dtrain: finished" <<<"$out" || fail "singletons: a duplicate run trained → $out"
echo "ok: 2 singletons under srun --mpi=none stopped with: $(grep -m1 SLURM_NTASKS <<<"$out")"
out=$(cd "$T" && timeout 120 srun --mpi=none -n 2 --overcommit "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" \
        "${data[@]}" "${nosave[@]}" --max-steps 5 --max-test-samples 100 --metrics "$T/plain.jsonl" 2>&1) && rc=0 || rc=$?
[ "$rc" != 0 ] || fail "srun --mpi=none -n 2 succeeded: $out"
! grep -qF "dtrain: finished" <<<"$out" || fail "srun --mpi=none: a duplicate run trained → $out"
echo "ok: plain srun --mpi=none -n 2 fails without training (exit $rc)"

# 0. A job that reaches its time limit, without a checkpoint folder (the
# compute stand-in takes none): submitted after the direct sruns of 1 (not
# beside them), checked last (it
# waits out its minute while the rest runs). 150 ms of sleep per step: 400-600
# steps in its 60-90 s, inside the first epoch (937 steps of 64 images).
mkdir -p "$T/limit"
tid=$(sbatch --parsable -D "$T/limit" --job-name=it-limit --ntasks=1 --cpus-per-task=1 --time=1 \
        "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" \
        --test-data "" --compute-stand-in-ms 150 --threads 1 --max-steps 100000 --log-interval 5) ||
  fail "sbatch refused the time-limit job"

# 2. train.sbatch, 5 tasks hybrid, via srun (MpiDefault=pmix) with -D and a
# relative job file, and via mpirun. The per-worker minibatch 16 keeps the
# global batch at the job file's 64.
short=(--mode hybrid --ps 1 --ranks-per-node 2 --minibatch 16 --max-train-samples 12000
       --max-test-samples 2000 --epochs 1 --log-interval 50)
W="$T/wd"
mkdir -p "$W/jobs"
cp "$SRC/jobs/fashion_lenet.ini" "$W/jobs/lenet.ini"
sid=$(DTRAIN_LAUNCHER=srun sbatch --parsable -D "$W" --job-name=it-srun --ntasks=5 --overcommit \
        --cpus-per-task=1 --time=00:10:00 "$SRC/slurm/train.sbatch" jobs/lenet.ini "${data[@]}" "${short[@]}") ||
  fail "sbatch (srun, -D) refused the job"
mkdir -p "$T/mpirun"
mid=$(DTRAIN_LAUNCHER=mpirun sbatch --parsable -D "$T/mpirun" --job-name=it-mpirun --ntasks=5 --overcommit \
        --cpus-per-task=1 --time=00:10:00 "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" "${data[@]}" \
        "${nosave[@]}" "${short[@]}" --metrics "$T/mpirun/metrics.jsonl") || fail "sbatch (mpirun) refused the job"
run="$W/runs/it-srun-$sid"
check_run srun "$sid" "$W/it-srun-$sid.out" "$run/metrics.jsonl"
check_run mpirun "$mid" "$T/mpirun/it-mpirun-$mid.out" "$T/mpirun/metrics.jsonl"
for f in job.ini batch-script command.txt nodes.txt env.txt started metrics.jsonl params.h5; do
  [ -s "$run/$f" ] || fail "-D job $sid: no $run/$f (run folder: $(ls "$run" 2>&1))"
done
cmp -s "$run/job.ini" "$W/jobs/lenet.ini" || fail "-D job $sid: job.ini is not a copy of the job file"
grep -qx localhost "$run/nodes.txt" || fail "-D job $sid: nodes.txt lacks localhost: $(cat "$run/nodes.txt")"
grep -qF -- "train --job jobs/lenet.ini" "$run/command.txt" &&
  grep -qF -- "--metrics $run/metrics.jsonl --metrics-append true" "$run/command.txt" ||
  fail "-D job $sid: command.txt lacks the dtrain command line: $(cat "$run/command.txt")"
grep -qx "SLURM_JOB_ID=$sid" "$run/env.txt" || fail "-D job $sid: env.txt lacks SLURM_JOB_ID"
echo "ok: -D job $sid: log $W/it-srun-$sid.out, run folder $run ($(ls "$run" | tr '\n' ' '))"

# A launcher that does not exist: refused before anything is written or started.
mkdir -p "$T/badlauncher"
msg=$(cd "$T/badlauncher" && DTRAIN_LAUNCHER=bogus bash "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -qF "DTRAIN_LAUNCHER must be srun or mpirun, not 'bogus'" <<<"$msg" ||
  fail "DTRAIN_LAUNCHER=bogus: exit $rc → $msg"
[ -z "$(ls -A "$T/badlauncher")" ] || fail "DTRAIN_LAUNCHER=bogus wrote $(ls -A "$T/badlauncher")"
echo "ok: DTRAIN_LAUNCHER=bogus refused at once (exit 2), nothing written"
# A missing job file and a server count that leaves no worker: refused by the
# script before a run folder exists or anything is launched.
for bad in "/nonexistent/job.ini|does not exist or cannot be read" \
           "$SRC/jobs/fashion_lenet.ini --ps 2|leaves no worker among the job's 2 task(s)"; do
  read -ra bad_args <<<"${bad%%|*}"
  msg=$(cd "$T/badlauncher" && SLURM_NTASKS=2 bash "$SRC/slurm/train.sbatch" "${bad_args[@]}" 2>&1) && rc=0 || rc=$?
  [ "$rc" = 2 ] && grep -qF "${bad#*|}" <<<"$msg" || fail "train.sbatch ${bad%%|*}: exit $rc → $msg"
  [ -z "$(ls -A "$T/badlauncher")" ] || fail "train.sbatch ${bad%%|*} wrote $(ls -A "$T/badlauncher")"
done
echo "ok: a missing job file and --ps ≥ the tasks are refused before anything is written"
# mpirun that is not Open MPI's (a stand-in printing Hydra's --version): refused
# before anything is written, pointing at srun; accepted with its own options
# in DTRAIN_MPIRUN_ARGS and --ps-placement last (the stand-in then "runs" it).
mkdir -p "$T/hydra/bin" "$T/hydra/run"
printf '#!/bin/sh\ncase "$1" in --version) echo "HYDRA build details:"; echo "    Version: 4.0.2";; *) exit 0;; esac\n' \
  > "$T/hydra/bin/mpirun"
chmod +x "$T/hydra/bin/mpirun"
msg=$(cd "$T/hydra/run" && PATH="$T/hydra/bin:$PATH" DTRAIN_LAUNCHER=mpirun \
        bash "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -qF "is not Open MPI's. Launch with srun" <<<"$msg" || fail "Hydra's mpirun: exit $rc → $msg"
[ -z "$(ls -A "$T/hydra/run")" ] || fail "Hydra's mpirun: the refused job wrote $(ls -A "$T/hydra/run")"
msg=$(cd "$T/hydra/run" && PATH="$T/hydra/bin:$PATH" DTRAIN_LAUNCHER=mpirun DTRAIN_MPIRUN_ARGS="-bind-to none" \
        bash "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" --ps-placement last 2>&1) ||
  fail "Hydra's mpirun with DTRAIN_MPIRUN_ARGS and --ps-placement last refused → $msg"
echo "ok: a non-Open MPI mpirun is refused unless given its own options (DTRAIN_MPIRUN_ARGS, --ps-placement last)"

# 2c. Start-up crashes (slurm/README.md "Start-up crashes"): a step that dies
# of a signal before every rank is through MPI_Init is launched again, one that
# dies after it is not. A stand-in binary in a tree of its own (train.sbatch
# finds bench/lib.sh next to the binary's folder) crashes rank 1 of the first
# step (SLURM_STEP_ID 0) before dtrain starts (mode first), rank 1 of every
# step (always), ends rank 1 with exit 127 (exit: no crash, not relaunched
# though srun's status is the other rank's TERM or KILL), or kills rank 0's
# dtrain with SIGSEGV 2 s after the start mark exists (after); otherwise it runs
# the real binary.
F="$T/fake"
mkdir -p "$F/build"
ln -sfn "$SRC/bench" "$F/bench"
cat > "$F/build/dtrain" <<EOF_FAKE
#!/usr/bin/env bash
case "\$FAKE_MODE:\${SLURM_STEP_ID:-0}:\${SLURM_PROCID:-0}" in
  first:0:1|always:*:1) sleep 2; kill -SEGV \$\$ ;;  # rank 0 waits in MPI_Init meanwhile
  exit:*:1) sleep 2; exit 127 ;;                       # a plain failure (a missing library)
  after:*:0)
    "$DTRAIN" "\$@" & pid=\$!
    for _ in \$(seq 600); do [ -e "\$DTRAIN_STARTED_FILE" ] && break; sleep 0.1; done
    sleep 2; kill -SEGV "\$pid"; wait "\$pid"; exit ;;  # 2 s into training
esac
exec "$DTRAIN" "\$@"
EOF_FAKE
chmod +x "$F/build/dtrain"
mkdir -p "$T/startup"
tiny=("${data[@]}" "${nosave[@]}" --max-steps 3 --max-test-samples 100 --log-interval 1 --threads 1)
submit_fake() {  # MODE NAME RETRIES dtrain-options...: prints the job id
  local mode=$1 name=$2 retries=$3
  shift 3
  FAKE_MODE=$mode DTRAIN="$F/build/dtrain" DTRAIN_START_RETRIES=$retries DTRAIN_LAUNCHER=srun \
    sbatch --parsable -D "$T/startup" --job-name="$name" --ntasks=2 --overcommit --cpus-per-task=1 \
    --time=00:05:00 "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" "$@"
}
fid=$(submit_fake first it-start-first 2 "${tiny[@]}") || fail "sbatch refused the start-up crash job"
aid=$(submit_fake always it-start-always 1 "${tiny[@]}") || fail "sbatch refused the repeated start-up crash job"
eid=$(submit_fake exit it-start-exit 2 "${tiny[@]}") || fail "sbatch refused the plain-failure job"
# 100 steps of 100 ms (the compute stand-in, which takes no test set): still
# training when rank 0 is killed; the check wants training lines, so a job
# whose options dtrain refuses (right after the start mark) cannot pass.
lid=$(submit_fake after it-start-after 2 --train-data "$D/fashion-mnist-train.h5" --test-data "" "${nosave[@]}" \
        --max-steps 100 --compute-stand-in-ms 100 --log-interval 1 --threads 1) ||
  fail "sbatch refused the crash-after-start job"
fout="$T/startup/it-start-first-$fid.out" aout="$T/startup/it-start-always-$aid.out" lout="$T/startup/it-start-after-$lid.out"
res=$(wait_job "$fid")
[ "$res" = "COMPLETED 0:0" ] || fail_log "$fout" "start-up crash job $fid ended $res (wanted a relaunch that completes)"
[ "$(grep -c 'launching it again (1 of 2' "$fout")" = 1 ] && [ "$(grep -c 'launching it again' "$fout")" = 1 ] &&
  grep -qF "relaunch 1 of 2" "$fout" && grep -qF "(a rank crashed: signal 11)" "$fout" &&
  [ "$(grep -c 'dtrain: finished' "$fout")" = 1 ] ||
  fail_log "$fout" "start-up crash job $fid: not exactly one relaunch and one finished run"
grep -qF "2 rank(s) through MPI_Init" "$T/startup/runs/it-start-first-$fid/started" ||
  fail "start-up crash job $fid: no start mark in its run folder"
echo "ok: a rank killed by SIGSEGV before MPI start-up was relaunched once and the job completed (job $fid)"
res=$(wait_job "$aid")
[ "$res" != "COMPLETED 0:0" ] && [ "$(grep -c 'srun started' "$aout")" = 2 ] &&
  [ "$(grep -c 'launching it again (1 of 1' "$aout")" = 1 ] && grep -qE "the run failed \(exit (129|1[3-9][0-9]|2[0-5][0-9])\)" "$aout" ||
  fail_log "$aout" "repeated start-up crash job $aid ($res): wanted 2 launches (DTRAIN_START_RETRIES=1), then failed with a signal's exit status"
[ ! -e "$T/startup/runs/it-start-always-$aid/started" ] || fail "repeated start-up crash job $aid has a start mark"
echo "ok: a start-up crash in every launch: $((1 + 1)) launches (DTRAIN_START_RETRIES=1), then the job failed ($res)"
res=$(wait_job "$eid")
eout="$T/startup/it-start-exit-$eid.out"
[ "$res" != "COMPLETED 0:0" ] && [ "$(grep -c 'srun started' "$eout")" = 1 ] && ! grep -qF "launching it again" "$eout" ||
  fail_log "$eout" "plain-failure job $eid ($res): wanted one launch and no relaunch"
echo "ok: a rank's plain exit 127 before MPI start-up is not relaunched (job $eid: $res)"
res=$(wait_job "$lid")
# srun's status is the crash's (139), the other rank's KILL (137) or, where that
# rank saw the loss first and called MPI_Abort, its code (mpi/pmix hands srun
# the abort code): any failure, but the log must show the crash during training.
[ "$res" != "COMPLETED 0:0" ] && [ "$(grep -c 'srun started' "$lout")" = 1 ] && ! grep -qF "launching it again" "$lout" &&
  grep -qE "the run failed \(exit [1-9][0-9]*\)" "$lout" && [ -s "$T/startup/runs/it-start-after-$lid/started" ] &&
  grep -qE "run step [0-9]+/100" "$lout" && grep -qF "Segmentation fault" "$lout" && ! grep -qF "dtrain: error: command line" "$lout" ||
  fail_log "$lout" "crash-after-start job $lid ($res): wanted one launch that trained, crashed and failed, no relaunch"
echo "ok: a crash after every rank was through MPI_Init is not relaunched (job $lid: $res)"
msg=$(cd "$T/badlauncher" && DTRAIN_START_RETRIES=x bash "$SRC/slurm/train.sbatch" "$SRC/jobs/fashion_lenet.ini" 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -qF "DTRAIN_START_RETRIES='x'" <<<"$msg" && [ -z "$(ls -A "$T/badlauncher")" ] ||
  fail "DTRAIN_START_RETRIES=x: exit $rc, wanted 2 with nothing written → $msg"
msg=$(cd "$T/badlauncher" && DTRAIN_START_RETRIES=99999999999999999999 bash "$SRC/slurm/train.sbatch" \
        "$SRC/jobs/fashion_lenet.ini" 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -qF "0 to 999" <<<"$msg" || fail "DTRAIN_START_RETRIES=99999999999999999999: exit $rc → $msg"
echo "ok: DTRAIN_START_RETRIES=x and a 20-digit count refused at once (exit 2), nothing written"

# 3. The sweep. An impossible point (64 nodes here) is named and nothing is submitted.
sweep_args=(--time 00:10:00 --shared --python "$PY" --sbatch-arg=--cpus-per-task=1
            --report-sbatch-arg=--time=00:10:00 jobs/fashion_lenet.ini -- "${data[@]}" --minibatch 32)
# --dry-run: every command printed as a shell reads it back (an argument with a
# space stays one), placeholder ids, nothing written or submitted.
dry=$(slurm/sweep --out "$T/dry" --nodes "1 2" --modes allreduce --dry-run --sbatch-arg="--comment=a b" \
        "${sweep_args[@]}" 2>&1) || fail "sweep --dry-run failed → $dry"
[ ! -e "$T/dry" ] || fail "sweep --dry-run wrote $T/dry"
n_dry=$(grep -c '^DTRAIN_LAUNCHER=srun DTRAIN_RUN_DIR=.* sbatch .*--comment=a\\ b ' <<<"$dry" || true)
[ "$n_dry" = 2 ] || fail "sweep --dry-run: $n_dry quoted point commands, wanted 2 → $dry"
eval "dry_words=($(grep -m1 '^DTRAIN_LAUNCHER' <<<"$dry" | sed 's/^[^ ]* [^ ]* sbatch //'))"
printf '%s\n' "${dry_words[@]}" | grep -qx -- "--comment=a b" || fail "sweep --dry-run: '--comment=a b' is not one word → $dry"
grep -q -- "--dependency=afterany:DRYRUN1:DRYRUN2 " <<<"$dry" || fail "sweep --dry-run: the report's dependency → $dry"
echo "ok: sweep --dry-run prints quoted commands and writes nothing"
out=$(slurm/sweep --out "$T/rejected" --nodes "1 64" --modes allreduce "${sweep_args[@]}" 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] || fail "sweep with a 64-node point: exit $rc, wanted 2 → $out"
grep -qF "point allreduce-n64x1-ps0 (64 ranks) rejected" <<<"$out" || fail "sweep: the rejected point is not named → $out"
grep -qF "nothing submitted" <<<"$out" || fail "sweep: no 'nothing submitted' → $out"
! grep -qF "allreduce-n01x1-ps0 (1 ranks) rejected" <<<"$out" || fail "sweep: the possible point was rejected → $out"
[ ! -e "$T/rejected/points.tsv" ] && [ -z "$(ls "$T"/rejected/*/point.json 2>/dev/null)" ] ||
  fail "sweep: a rejected sweep wrote points"
! scontrol show job -o 2>/dev/null | grep -qF "$T/rejected/" || fail "sweep: a rejected sweep submitted a job"
echo "ok: rejected sweep: $(grep -m1 'rejected by' <<<"$out")"

# A 2-point sweep, 2 repeats each, 5 warm-up + 20 timed steps, and its report.
slurm/sweep --out "$T/sweep" --virtual --nodes "1 2" --modes allreduce --repeats 2 --steps 20 \
  --warmup-steps 5 --log-interval 5 "${sweep_args[@]}" || fail "slurm/sweep failed"
rid=$(cat "$T/sweep/report.jobid")
res=$(wait_job "$rid")
[ "$res" = "COMPLETED 0:0" ] || { cat "$T"/sweep/report-*.out "$T"/sweep/*/*.out >&2; fail "report job $rid ended $res"; }
cat "$T"/sweep/report-*.out
"$PY" - "$T/sweep" <<'PY' || fail "sweep report check failed"
import csv, json, os, struct, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/report.csv")))
assert len(rows) == 2, f"{len(rows)} rows in report.csv, wanted 2"
assert sorted(int(r["workers"]) for r in rows) == [1, 2], rows
for r in rows:
    assert r["status"] == "ok", r
    ids = r["job_ids"].split(";")
    assert len(ids) == 2 and r["repeats"] == "2" and r["repeats_kept"] == "2", r
    assert r["job_states"] == ";".join(f"{i}=COMPLETED" for i in ids), r
    assert r["dropped"] == "", r
    assert r["nodelists"] == "; ".join(f"{i}=localhost" for i in ids), r
    assert r["warmup_steps"] == "5" and r["timed_steps"] == "20", r
    for k in ("images_per_s", "images_per_s_min", "images_per_s_max", "step_time_s", "t_compute_s", "r_o",
              "speedup", "speedup_min", "speedup_max", "alpha", "predicted_speedup"):
        assert r[k] != "" and float(r[k]) >= 0, (k, r)
    assert float(r["images_per_s_min"]) <= float(r["images_per_s"]) <= float(r["images_per_s_max"]), r
    assert r["predicted_from"].startswith("dtrain report ("), r  # not fitted: engine/predict.cpp
    for i in ids:  # each job's run folder
        run = os.path.join(d, r["config"], i)
        for f in ("job.ini", "command.txt", "nodes.txt", "env.txt", "metrics.jsonl", "params.h5"):
            assert os.path.getsize(os.path.join(run, f)) > 0, (run, f)
        assert "--max-steps 25" in open(os.path.join(run, "command.txt")).read(), run
        steps = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
        steps = [s["step"] for s in steps if s.get("kind") == "step"]
        assert steps == [5, 10, 15, 20, 25], (run, steps)
for png in ("speedup.png", "breakdown.png"):
    data = open(f"{d}/{png}", "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    w, h = struct.unpack(">II", data[16:24])
    assert len(data) > 20000 and w >= 600 and h >= 400, f"{png}: {len(data)} bytes, {w}x{h}"
    print(f"ok: {png}: {w}x{h}, {len(data)} bytes")
PY
echo "ok: sweep of 2 points × 2 repeats and its report ($(( SECONDS - t_start )) s so far)"

# 0, checked: TIMEOUT, not requeued, the log's last interval in the metrics.
res=$(wait_job "$tid")
lout="$T/limit/it-limit-$tid.out" lm="$T/limit/runs/it-limit-$tid/metrics.jsonl"
[ "${res%% *}" = TIMEOUT ] || fail_log "$lout" "time-limit job $tid ended $res, wanted TIMEOUT"
[ "$(job_field "$tid" Restarts)" = 0 ] || fail "time-limit job $tid was requeued"
grep -qF "the job ends TIMEOUT" "$lout" || fail_log "$lout" "time-limit job $tid: no 'the job ends TIMEOUT' line"
# --signal=B:USR1@120 comes at once with a 1-minute limit: without a
# checkpoint folder it must not reach the ranks (they have no stop handler).
grep -qF "not forwarded (no checkpoint folder" "$lout" || fail_log "$lout" "time-limit job $tid: the USR1 was not logged as not forwarded"
log_last=$(grep -oE '\(run step [0-9]+/' "$lout" | tail -1 | tr -dc 0-9)
m_last=$(grep -F '"kind":"step"' "$lm" | tail -1 | grep -oE '"step":[0-9]+' | tr -dc 0-9)
[ -n "$log_last" ] && [ -n "$m_last" ] && [ "$m_last" -ge "$log_last" ] ||
  { tail -n 5 "$lout" >&2; fail "time-limit job $tid: last step logged ${log_last:-none}, last in its metrics ${m_last:-none}"; }
echo "ok: time-limit job $tid: $res, not requeued, metrics up to step $m_last (the log's last: $log_last)"

src_after=$(src_state | md5sum)
[ "$src_before" = "$src_after" ] || fail "the jobs wrote into the source tree: $(src_state | head -20)"
