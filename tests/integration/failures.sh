#!/usr/bin/env bash
# Failures end the whole job: a rank that throws stops every rank within 30 s
# with a non-zero exit naming the rank and the cause, leaving no process
# behind; impossible layouts and a launcher mismatch are exit-code-2 errors.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
args=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data ""
      --metrics "" --threads 1 --log-interval 1000)
start=$(date +%s)
out=$(DTRAIN_FAIL_AT_STEP=5 DTRAIN_FAIL_RANK=2 bounded 120 mpirun -np 5 --oversubscribe --bind-to none \
      "$DTRAIN" train "${args[@]}" --minibatch 16 --mode hybrid --ps 1 --ranks-per-node 2 2>&1) && fail "job succeeded: $out"
took=$(( $(date +%s) - start ))
echo "$out" | tail -5
host=$(hostname)
grep -q "rank 2 on $host: .*injected failure at step 5" <<<"$out" || fail "message does not name rank 2, its host and the cause"
n=$(grep -c "dtrain: error:" <<<"$out" || true)
[ "$n" = 1 ] || fail "the failure was printed $n times, wanted once: $out"
# Printed first: before Open MPI's abort banner. Open MPI does not always get
# to print that banner (it may kill the job first), and then there is no
# order to check: said so, not passed silently.
msg_line=$(grep -n -m1 "dtrain: error:" <<<"$out" | cut -d: -f1)
banner_line=$(grep -n "MPI_ABORT was invoked" <<<"$out" | head -1 | cut -d: -f1 || true)
if [ -n "$banner_line" ]; then
  [ "$msg_line" -lt "$banner_line" ] || fail "the message came after the abort banner: $out"
  echo "ok: the message (line $msg_line) came before Open MPI's abort banner (line $banner_line)"
else
  echo "SKIPPED-PART: Open MPI printed no abort banner this time; the message-before-banner order was not checked"
fi
[ "$took" -le 30 ] || fail "the job took $took s to stop"
sleep 1
if pgrep -f "$DTRAIN train" >/dev/null; then fail "processes left behind: $(pgrep -af "$DTRAIN train")"; fi
echo "ok: stopped in $took s"
# A parameter server that throws inside its update ends the job too.
out=$(DTRAIN_FAIL_AT_STEP=3 DTRAIN_FAIL_RANK=4 bounded 120 mpirun -np 5 --oversubscribe --bind-to none \
      "$DTRAIN" train "${args[@]}" --minibatch 16 --mode hybrid --ps 1 --ranks-per-node 2 2>&1) && fail "job succeeded: $out"
grep -q "rank 4 on $host: .*injected failure at step 3 on parameter server 0" <<<"$out" || fail "server failure not reported: $out"
sleep 1
if pgrep -f "$DTRAIN train" >/dev/null; then fail "processes left behind after a server failure"; fi
echo "ok: a failing server ended the job"
expect_exit 2 "DTRAIN_FAIL_RANK=9" -- env DTRAIN_FAIL_AT_STEP=1 DTRAIN_FAIL_RANK=9 "$DTRAIN" train "${args[@]}"
# Impossible layouts: as many servers as ranks; virtual nodes that do not divide the workers.
expect_exit 2 "ps" -- mpirun -np 2 --oversubscribe "$DTRAIN" train "${args[@]}" --mode ps --ps 2
expect_exit 2 "ranks-per-node" -- mpirun -np 4 --oversubscribe "$DTRAIN" train "${args[@]}" --mode hybrid --ps 1 --ranks-per-node 2
# Outputs are checked before training: an existing non-file, an unwritable folder.
expect_exit 2 "not a regular file" -- "$DTRAIN" train "${args[@]}" --save-params /dev/null
# Also where nothing would be replaced: appending to /dev/null (it said "refusing to replace it").
expect_exit 2 "option 'metrics': '/dev/null' exists and is not a regular file (a device, a FIFO, a folder): outputs are written to regular files only" -- \
  "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "" \
  --metrics /dev/null --metrics-append true
# An output under a regular file fails for root too (permissions do not stop root).
touch afile
tree_before=$(find . | sort)
expect_exit 2 "'$SCRATCH/afile' is not a folder" -- "$DTRAIN" train "${args[@]}" --save-params afile/sub/p.h5
expect_exit 2 "is not a folder" -- "$DTRAIN" train "${args[@]}" --runs-dir afile/runs --save-params auto
expect_exit 2 "cannot create files" -- "$DTRAIN" train "${args[@]}" --save-params /proc/p.h5
# Nothing created by the refused starts: no run folder, no partial output.
tree_after=$(find . | sort)
[ "$tree_after" = "$tree_before" ] || fail "refused outputs created: $(comm -13 <(echo "$tree_before") <(echo "$tree_after"))"
# srun with a mismatched PMI starts N singletons: each sees world size 1.
expect_exit 2 "SLURM_NTASKS" -- env SLURM_NTASKS=4 "$DTRAIN" train "${args[@]}"
# A rank that stalls (SIGSTOP) instead of dying: the others give up after
# --comm-timeout and abort the job; nothing hangs, nothing is left behind.
# stall WHO RANK NP LAYOUT...: stop world rank RANK (named WHO) of an NP-rank job.
stall() {
  local who=$1 rank=$2 np=$3; shift 3
  local start job victim="" took rc_line log="$SCRATCH/stall.$rank.$np.log"
  start=$(date +%s)
  ( set +e; bounded 120 mpirun -np "$np" --oversubscribe --bind-to none "$DTRAIN" train "${args[@]}" --minibatch 16 "$@" \
      --comm-timeout 5 > "$log" 2>&1; echo "rc=$?" >> "$log" ) &
  job=$!
  for _ in $(seq 1 100); do  # find the rank once it runs
    for p in $(pgrep -f "$DTRAIN train"); do
      tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" && victim=$p
    done
    [ -n "$victim" ] && grep -q "steps/epoch" "$log" 2>/dev/null && break
    sleep 0.2
  done
  [ -n "$victim" ] || fail "$who (rank $rank) not found"
  sleep 1
  kill -STOP "$victim"
  wait "$job" || true
  took=$(( $(date +%s) - start ))
  grep -q "did not complete within 5 s" "$log" || fail "no timeout message: $(tail -5 "$log")"
  rc_line=$(grep "^rc=" "$log" || true)
  [ -n "$rc_line" ] || fail "the stalled job's exit code was not recorded: $(tail -5 "$log")"
  [ "$rc_line" != "rc=0" ] || fail "a stalled job exited 0"
  [ "$took" -le 60 ] || fail "the stalled job took $took s to end"
  sleep 1
  if pgrep -f "$DTRAIN train" >/dev/null; then pkill -KILL -f "$DTRAIN train"; fail "processes left behind after a stall"; fi
  echo "ok: a stalled $who ended the job in $took s"
}
stall server 4 5 --mode hybrid --ps 1 --ranks-per-node 2
# LeNet-5's arena is one allreduce bucket: its steps run inline in finish_step
# (comm/exchange.hpp), under the same --comm-timeout.
stall "worker (inline allreduce steps)" 1 2 --mode allreduce
# A whole job suspended (every rank stopped, as Ctrl-Z on mpirun, Slurm's
# `scontrol suspend` and gang scheduling do) for longer than --comm-timeout is
# not a stall: continued, it trains to its end. It aborted the moment it was
# continued ("did not complete within 3 s"): the timeout counted the time the
# job was stopped (comm::LiveTimer). The heartbeat is off: it has its own rule.
suspend() {
  local what=$1 np=$2; shift 2
  local job ranks="" p log="$SCRATCH/suspend.$np.log"
  ( set +e; bounded 180 mpirun -np "$np" --oversubscribe --bind-to none "$DTRAIN" train "${args[@]}" --minibatch 16 \
      --max-steps 3000 --comm-timeout 3 --heartbeat-timeout 0 "$@" > "$log" 2>&1; echo "rc=$?" >> "$log" ) &
  job=$!
  for _ in $(seq 1 150); do grep -q "steps/epoch" "$log" 2>/dev/null && break; sleep 0.2; done
  sleep 1
  for p in $(pgrep -f "$DTRAIN train"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -q "^OMPI_COMM_WORLD_RANK=" && ranks="$ranks $p"
  done
  [ "$(wc -w <<<"$ranks")" = "$np" ] || fail "found ranks '$ranks' of $np: $(cat "$log")"
  grep -q "^rc=" "$log" && fail "the job ended before it was suspended: $(tail -5 "$log")"
  # shellcheck disable=SC2086
  kill -STOP $ranks
  sleep 8
  # shellcheck disable=SC2086
  kill -CONT $ranks
  wait "$job" || true
  grep -q "did not complete within" "$log" && fail "a suspended $what job was aborted as stalled: $(tail -5 "$log")"
  grep -qx "rc=0" "$log" || fail "a suspended $what job did not end normally: $(tail -8 "$log")"
  grep -q "warning: .*--heartbeat-timeout 0: a rank that stops or freezes outside" "$log" \
    || fail "--heartbeat-timeout 0 was not warned about: $(head -5 "$log")"
  echo "ok: $what: a job suspended for 8 s (--comm-timeout 3) trained on to its end"
}
suspend "hybrid (communication thread)" 5 --mode hybrid --ps 1 --ranks-per-node 2
suspend "allreduce (inline steps)" 2 --mode allreduce
