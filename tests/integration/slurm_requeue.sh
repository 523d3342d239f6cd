#!/usr/bin/env bash
# Preemption and time limits under a real one-node Slurm (slurm/local-cluster.sh).
# slurm/train.sbatch, submitted with --requeue and --signal=B:USR1@60, is
# signalled mid-run; it must checkpoint, requeue itself, resume from that
# checkpoint and complete, with final parameters bitwise equal to those of an
# uninterrupted run of the same job (mpirun, no Slurm). LeNet-5 on
# Fashion-MNIST, 1 thread per rank, a checkpoint every 50 steps, the default
# checkpoint folder (checkpoints/ in the job's run folder runs/<job name>-<job id>):
#  1. srun, 2 ranks allreduce; scancel --signal=USR1 --batch: what Slurm does
#     at --signal=B:USR1@T, T seconds before the time limit;
#  2. mpirun, 3 ranks hybrid (2 workers + 1 server); scancel --signal=TERM
#     --batch, then USR1 --batch: a configuration sending TERM, then USR1
#     (one checkpoint for both);
#  3. srun, 2 ranks allreduce; scancel --signal=TERM without --batch: Slurm
#     signals the job steps (the ranks), not the batch script, as preemption
#     with a GraceTime does.
# For each: the job ends COMPLETED 0:0 with Restarts=1; its log holds two
# starts (restart 0, restart 1), the signals the script received, one stop
# request and one checkpoint by the engine, the requeue, a resume from the
# checkpoint the first start wrote (the folder's `latest` while the job
# waited in the queue), one finished run, one metrics file in the run folder
# with the records of both starts; nothing of the job runs afterwards.
# The cluster is stopped by an EXIT trap, also when a check fails; no Slurm,
# munge or mpirun on the machine is a FAILURE with a message, never a skip.
# Usage: DTRAIN=build/dtrain COMPARE=build/dtrain_compare_params WORK=dir SRC=repo \
#        bash tests/integration/slurm_requeue.sh
# shellcheck disable=SC2015  # "A && B || fail …": fails when either check fails
source "$(dirname "$0")/lib.sh"
: "${SRC:?repository root}" "${COMPARE:?path of dtrain_compare_params}"
source "$IT_DIR/slurm_lib.sh"
slurm_test_start "slurm requeue test" "${DTRAIN_SLURM_TEST_BUDGET:-600}"
D="$WORK/data"
T=$(pwd -P)  # $SCRATCH: lib.sh made it empty and cd'd into it; jobs are submitted from here
[ -s "$D/fashion-mnist-train.h5" ] || fail "no $D/fashion-mnist-train.h5 (the it_data_convert fixture makes it)"
slurm_cluster_up mpirun timeout
DTRAIN=$(cd "$(dirname "$DTRAIN")" && pwd)/$(basename "$DTRAIN")
export DTRAIN
unset DTRAIN_CHECKPOINT_DIR DTRAIN_ARGS DTRAIN_JOB
export OMP_NUM_THREADS=1  # as in the jobs (--cpus-per-task=1): the same arithmetic

signal_at=30  # the signals go out once the log shows this step
job=$SRC/jobs/fashion_lenet.ini
common=(--train-data "$D/fashion-mnist-train.h5" --test-data "" --threads 1 --log-interval 10
        --checkpoint-every-steps 50 --checkpoint-keep 2)
# Two layouts, each a few seconds of training here. The hybrid one has long
# steps (256 images per worker), so that two signals sent together both reach
# the batch script before the ranks have checkpointed and left.
declare -A layout_args=([allreduce2]="--mode allreduce --minibatch 32"
                        [hybrid3]="--mode hybrid --ps 1 --ranks-per-node 2 --minibatch 256")
declare -A layout_ranks=([allreduce2]=2 [hybrid3]=3)
declare -A layout_steps=([allreduce2]=600 [hybrid3]=150)

# reference LAYOUT: the uninterrupted run (mpirun, outside Slurm) once per
# layout; prints its params.h5.
reference() {
  local l=$1 dir="$T/ref-$1" p="$T/ref-$1/runs/fashion_lenet/latest/params.h5"
  if [ ! -s "$p" ]; then
    # shellcheck disable=SC2086  # the layout's words
    bounded 300 mpirun -np "${layout_ranks[$l]}" --oversubscribe --bind-to none "$DTRAIN" train --job "$job" \
      "${common[@]}" ${layout_args[$l]} --max-steps "${layout_steps[$l]}" --runs-dir "$dir/runs" --checkpoint-dir "$dir/ckpt" --resume auto \
      >"$dir.out" 2>&1 || fail_log "$dir.out" "the uninterrupted $l run failed"
    grep -qF "dtrain: finished ${layout_steps[$l]} steps" "$dir.out" ||
      fail_log "$dir.out" "reference $l: no 'finished ${layout_steps[$l]} steps'"
    [ -s "$p" ] || fail "reference $l: no $p"
  fi
  echo "$p"
}

# log_part FILE N: the lines of the N-th start (1, 2) of a job's log.
log_part() {
  awk -v n="$2" '/^=== dtrain job [0-9]+ \(/ { k++ } k == n' "$1"
}

# requeue_case NAME LAUNCHER LAYOUT SIGNAL...: one job, signalled with each
# SIGNAL (USR1:batch = scancel --signal=USR1 --batch; TERM:steps = scancel
# --signal=TERM, to the job steps) once its log shows step $signal_at.
requeue_case() {
  local name=$1 launcher=$2 l=$3; shift 3
  local steps=${layout_steps[$l]} out="$T/$name.out" id ref st restarts s sig to n at ckdir latest="" line
  ref=$(reference "$l")
  # shellcheck disable=SC2086
  id=$(DTRAIN_LAUNCHER=$launcher timeout 30 sbatch --parsable --requeue --signal=B:USR1@60 \
         --job-name="rq-$name" --ntasks="${layout_ranks[$l]}" --overcommit --cpus-per-task=1 --time=00:10:00 \
         --output="$out" "$SRC/slurm/train.sbatch" "$job" "${common[@]}" ${layout_args[$l]} \
         --max-steps "$steps") || fail "$name: sbatch refused the job"
  local run="$T/runs/rq-$name-$id"  # train.sbatch's run folder (runs/%x-%j), kept across the requeue
  ckdir="$run/checkpoints"
  echo "$name: job $id submitted ($launcher, $l, signals: $*)"

  # Wait for step $signal_at, then signal.
  at=""
  while [ "$SECONDS" -lt "$deadline" ]; do
    st=$(job_field "$id" JobState)
    case "$st" in PENDING|CONFIGURING|RUNNING) ;; *) fail_log "$out" "$name: job $id ended ($st) before it was signalled";; esac
    at=$(grep -oE '\(run step [0-9]+/' "$out" 2>/dev/null | tail -1 | grep -oE '[0-9]+' || true)
    grep -qF "dtrain: finished" "$out" 2>/dev/null &&
      fail_log "$out" "$name: the run finished before it was signalled (the machine is faster than this test assumed: more steps)"
    [ -n "$at" ] && [ "$at" -ge "$signal_at" ] && break
    sleep 0.2
  done
  [ -n "$at" ] && [ "$at" -ge "$signal_at" ] || fail "$name: job $id did not reach step $signal_at by the deadline"
  # Several signals go out together (20 ms apart, in order): sent one after
  # the other, a later one could meet a job already requeued, and scancel
  # retries a job in transition until its next start.
  local pids=()
  for s in "$@"; do
    sig=${s%%:*} to=${s#*:}
    if [ "$to" = batch ]; then timeout 30 scancel --signal="$sig" --batch "$id" &
    else timeout 30 scancel --signal="$sig" "$id" & fi
    pids+=($!)
    sleep 0.02
  done
  for s in "${pids[@]}"; do wait "$s" || fail "$name: a scancel of job $id failed"; done
  echo "$name: signalled ($*) at step $at"

  # The requeued job waits in the queue (cred_expire + 1 s): what `latest` names
  # then is the checkpoint the next start must resume from.
  while [ "$SECONDS" -lt "$deadline" ]; do
    read -r st restarts < <(job_field "$id" JobState Restarts)
    if [ "${restarts:-0}" -ge 1 ]; then
      # COMPLETING: the first start's batch step still ends (the ranks have left).
      case "$st" in PENDING|COMPLETING|REQUEUED) ;;
        *) fail_log "$out" "$name: job $id requeued but $st at the first look, not waiting in the queue";; esac
      latest=$(cat "$ckdir/latest" 2>/dev/null) || { ls -la "$ckdir" >&2 || true; fail "$name: no $ckdir/latest after the requeue"; }
      break
    fi
    case "$st" in PENDING|CONFIGURING|RUNNING|COMPLETING|REQUEUED) sleep 0.3 ;;
      *) fail_log "$out" "$name: job $id ended ($st $(job_field "$id" ExitCode)) without being requeued";; esac
  done
  [ -n "$latest" ] || fail "$name: job $id not requeued by the deadline"
  echo "$name: requeued (state $st), $ckdir/latest = $latest"

  st=$(wait_job "$id")
  restarts=$(job_field "$id" Restarts)
  [ -n "$restarts" ] || fail "$name: job $id vanished from the controller"
  [ "$st" = "COMPLETED 0:0" ] || fail_log "$out" "$name: job $id ended $st, wanted COMPLETED 0:0"
  [ "$restarts" = 1 ] || fail_log "$out" "$name: job $id restarted $restarts times, wanted 1"

  # The log: two starts, the signals, one checkpoint, the requeue, the resume.
  local first second
  first=$(log_part "$out" 1) second=$(log_part "$out" 2)
  n=$(grep -cE "^=== dtrain job $id \(" "$out" || true)
  [ "$n" = 2 ] || fail_log "$out" "$name: $n starts in the log, wanted 2"
  grep -qE "^=== dtrain job $id .*, restart 0$" <<<"$first" && grep -qE "^=== dtrain job $id .*, restart 1$" <<<"$second" ||
    fail_log "$out" "$name: the starts are not restart 0 and restart 1"
  grep -qF "checkpoints: $ckdir;" <<<"$first" && grep -qF "checkpoints: $ckdir;" <<<"$second" ||
    fail_log "$out" "$name: the starts do not both use $ckdir"
  n=$(grep -c '^train.sbatch: received SIG' <<<"$first" || true)
  local want=0
  for s in "$@"; do [ "${s#*:}" = batch ] && want=$((want + 1)); done
  # Signals sent ms apart may reach the script after the launcher already left
  # (the finish path ignores them): at least one, at most all; still one
  # stop request and one checkpoint below.
  if [ "$want" = 0 ]; then ok=$([ "$n" = 0 ] && echo y); else ok=$([ "$n" -ge 1 ] && [ "$n" -le "$want" ] && echo y); fi
  [ "$ok" = y ] || fail_log "$out" "$name: the script received $n signals, wanted ${want/#0/0}$([ "$want" -gt 1 ] && echo " (at least 1)")"
  n=$(grep -c 'dtrain: stop requested (' <<<"$first" || true)
  [ "$n" = 1 ] || fail_log "$out" "$name: $n stop requests in the first start, wanted 1"
  line=$(grep -E 'dtrain: checkpointed after [0-9]+ steps on a stop request' <<<"$first") ||
    fail_log "$out" "$name: the first start did not checkpoint on the signal"
  local ck_step; ck_step=$(grep -oE 'after [0-9]+ steps' <<<"$line" | grep -oE '[0-9]+')
  [ "$ck_step" -gt "$at" ] && [ "$ck_step" -lt "$steps" ] ||
    fail "$name: checkpointed at step $ck_step, not after the signal (step $at) and before the end ($steps)"
  [ "$latest" = "ckpt-$(printf %010d "$ck_step").h5" ] ||
    fail "$name: the folder's latest is '$latest', not the checkpoint of step $ck_step"
  grep -qF "exit 75" <<<"$first" && grep -qF "requeueing it (restart 1)" <<<"$first" ||
    fail_log "$out" "$name: the first start did not requeue on exit 75"
  ! grep -qF "dtrain: finished" <<<"$first" || fail_log "$out" "$name: the first start finished the run"
  grep -qF "dtrain: resuming from $ckdir/$latest: $ck_step steps done" <<<"$second" ||
    fail_log "$out" "$name: the second start does not say it resumes from $ckdir/$latest ($ck_step steps)"
  grep -qF "dtrain: finished $steps steps" <<<"$second" && grep -qF "the run completed (exit 0)" <<<"$second" ||
    fail_log "$out" "$name: the second start did not finish the run"
  ! grep -qE 'received SIG|requeueing' <<<"$second" || fail_log "$out" "$name: the second start was signalled or requeued"

  # One metrics file for both starts (--metrics-append): the first start's
  # run record says "checkpointed", the second's "done", steps from both.
  local m="$run/metrics.jsonl" ends
  ends=$(grep -F '"kind":"run"' "$m" | grep -oE '"end":"[a-z]+"' | tr '\n' ' ')
  [ "$ends" = '"end":"checkpointed" "end":"done" ' ] || fail "$name: run records of $m end $ends, wanted checkpointed then done"
  local s_first s_last
  s_first=$(grep -m1 -F '"kind":"step"' "$m" | grep -oE '"step":[0-9]+' | tr -dc 0-9)
  s_last=$(grep -F '"kind":"step"' "$m" | tail -1 | grep -oE '"step":[0-9]+' | tr -dc 0-9)
  [ "${s_first:-0}" -gt 0 ] && [ "$s_first" -le "$at" ] && [ "${s_last:-0}" = "$steps" ] ||
    fail "$name: $m's step records run from ${s_first:-none} to ${s_last:-none}, not from the first start's (≤ $at) to the last step ($steps)"
  [ "$(grep -c '^# restart' "$run/command.txt")" = 2 ] || fail "$name: $run/command.txt does not hold both starts"

  # The final parameters: those of the uninterrupted run, bit for bit.
  local p="$run/params.h5"
  [ -s "$p" ] || { ls -laR "$run" >&2 || true; fail "$name: no $p"; }
  "$COMPARE" "$ref" "$p" 0 || fail "$name: final parameters differ from the uninterrupted run's ($ref vs $p)"
  echo "ok: $name (job $id): signalled at step $at, checkpointed step $ck_step, requeued, resumed from $latest, COMPLETED 0:0 after 1 restart; params.h5 bitwise equal to the uninterrupted $l run"
}

requeue_case usr1-srun srun allreduce2 USR1:batch
requeue_case term-usr1-mpirun mpirun hybrid3 TERM:batch USR1:batch
requeue_case term-steps-srun srun allreduce2 TERM:steps

# Nothing of the jobs is left: no job in the queue, no process with the
# scratch folder on its command line.
[ -z "$(timeout 30 squeue -h -o %i)" ] || { squeue >&2; fail "jobs left in the queue"; }
left=$(pgrep -af -- "$T/" | grep -v "pgrep" || true)
[ -z "$left" ] || fail "processes left behind: $left"
echo "ok: no job and no process of the jobs left ($(( SECONDS - t_start )) s so far)"
