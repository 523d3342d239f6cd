#!/usr/bin/env bash
# Checkpoints and resume (docs/reliability.md): a run stopped by a signal in
# the middle of an epoch and resumed ends bitwise where an uninterrupted run
# ends — parameters, momentum, batch-norm statistics and the sequence of
# sample indices — in allreduce, ps and hybrid mode, and resumes after a
# change of layout; a stop request to a random rank at random moments of a
# 5-rank hybrid job gives one checkpoint of one step and the requeue code.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
: "${COMPARE_CKPT:?path of dtrain_compare_checkpoints}"
mp() { local np=$1; shift; bounded 300 mpirun -np "$np" --oversubscribe --bind-to none "$@"; }
# resnet20 has batch norm; 320 samples make short epochs, so 25 steps cross two epoch ends.
base=(--job "$SRC/jobs/fashion_resnet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data ""
      --max-train-samples 320 --epochs 3 --max-steps 25 --threads 1 --log-interval 5 --metrics ""
      --save-params "" --checkpoint-epoch-end false)

# --- 1. bit-exact resume in every mode, stopped by a signal inside an epoch
exact() {  # NAME NP SIGNAL_RANK ARGS...
  local name=$1 np=$2 srank=$3; shift 3
  local args=("${base[@]}" "$@")
  DTRAIN_TRACE_SAMPLES="$PWD/$name.straight" mp "$np" "$DTRAIN" train "${args[@]}" --checkpoint-dir "$name.s" \
    > "$name.straight.log" 2>&1 || fail "$name: the uninterrupted run failed: $(tail -5 "$name.straight.log")"
  local rc=0
  DTRAIN_SIGNAL_AT_STEP=12 DTRAIN_SIGNAL_RANK=$srank DTRAIN_TRACE_SAMPLES="$PWD/$name.split" \
    mp "$np" "$DTRAIN" train "${args[@]}" --checkpoint-dir "$name.c" > "$name.first.log" 2>&1 || rc=$?
  [ "$rc" = 75 ] || fail "$name: the signalled run exited $rc, wanted 75: $(tail -5 "$name.first.log")"
  local stopped; stopped=$(ls "$name.c" | grep -c '^ckpt-') || true
  [ "$stopped" = 1 ] || fail "$name: $stopped checkpoints after the stop, wanted 1: $(ls "$name.c")"
  local at; at=$(sed -n 's/.*checkpointing step \([0-9]*\).*/\1/p' "$name.first.log")
  [ -n "$at" ] && [ "$at" -gt 10 ] && [ "$at" -lt 20 ] || fail "$name: stopped at step '$at', wanted one inside epoch 2"
  DTRAIN_TRACE_SAMPLES="$PWD/$name.split" mp "$np" "$DTRAIN" train "${args[@]}" --checkpoint-dir "$name.c" \
    --resume auto > "$name.resume.log" 2>&1 || fail "$name: the resumed run failed: $(tail -5 "$name.resume.log")"
  grep -q "resuming from $name.c/ckpt-$(printf %010d "$at").h5" "$name.resume.log" || fail "$name: no resume line"
  "$COMPARE_CKPT" "$name.s/ckpt-0000000025.h5" "$name.c/ckpt-0000000025.h5" params momentum buffers \
    || fail "$name: the resumed run's state at step 25 differs from the uninterrupted run's"
  local r
  for r in $(seq 0 $((np - 1))); do
    [ -f "$name.straight.$r" ] || continue  # servers read no samples
    cmp -s "$name.straight.$r" "$name.split.$r" || fail "$name: rank $r read other samples after the resume"
  done
  echo "ok: $name: stopped at step $at (epoch 2), resumed, bitwise equal at step 25 (params, momentum, buffers, samples)"
}
exact allreduce 4 1 --minibatch 8
exact ps 5 4 --minibatch 8 --mode ps --ps 2        # 3 workers, 2 servers; the signal to a server
exact hybrid 5 3 --minibatch 8 --mode hybrid --ps 1 --ranks-per-node 2  # the signal to a node member

# --- 2. another layout: the hybrid checkpoint resumed by 2 workers × 16 in allreduce mode
#     (the same global minibatch), and a changed global minibatch refused
rm -rf lay.c && cp -r hybrid.c lay.c && rm -f lay.c/ckpt-0000000025.h5 && \
  ls lay.c/ckpt-* | tail -1 | xargs basename > lay.c/latest
mp 2 "$DTRAIN" train "${base[@]}" --minibatch 16 --checkpoint-dir lay.c --resume auto > lay.log 2>&1 \
  || fail "resuming with another layout failed: $(tail -5 lay.log)"
grep -q "the arena is re-sharded" lay.log || fail "the layout change was not logged"
grep -q "every worker starts from the mean batch-norm statistics" lay.log || fail "ResNet-20's statistics on 4 → 2 workers not logged"
echo "ok: a 4-worker hybrid checkpoint resumed by 2 allreduce workers (re-sharded, logged)"
expect_exit 2 "a different global minibatch would silently change the optimisation" -- \
  mp 2 "$DTRAIN" train "${base[@]}" --minibatch 8 --resume "hybrid.c/ckpt-0000000025.h5"

# --- 3. a stop request to a random rank at random moments (5-rank hybrid LeNet)
lenet=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "" --threads 1
       --minibatch 16 --max-steps 500 --log-interval 1000 --mode hybrid --ps 1 --ranks-per-node 2
       --checkpoint-epoch-end false)
mp 5 "$DTRAIN" train "${lenet[@]}" --save-params rnd.ref.h5 > rnd.ref.log 2>&1 || fail "reference run failed"
RANDOM=14
for i in $(seq 1 10); do
  rank=$((RANDOM % 5)); sig=USR1; [ $((i % 4)) = 0 ] && sig=TERM
  delay=$(printf '0.%02d' $((RANDOM % 100)))
  ( rc=0; mp 5 "$DTRAIN" train "${lenet[@]}" --run-name "rnd$i" --checkpoint-dir "rnd$i.c" --save-params "" \
      > "rnd$i.first.log" 2>&1 || rc=$?; echo "$rc" > "rnd$i.rc" ) &
  # Every rank has its handlers once rank 0 made the run folder (after the
  # start-up barrier; the metrics file goes there).
  for _ in $(seq 1 200); do [ -d "runs/rnd$i" ] && break; sleep 0.05; done
  sleep "$delay"
  pid=""
  for p in $(pgrep -f -- "--run-name rnd$i " || true); do
    grep -qz "^OMPI_COMM_WORLD_RANK=$rank\$" "/proc/$p/environ" 2>/dev/null && pid=$p
  done
  [ -n "$pid" ] || fail "round $i: no process of rank $rank"
  kill -s "$sig" "$pid" 2>/dev/null || true
  wait
  rc=$(cat "rnd$i.rc")
  [ "$rc" = 75 ] || fail "round $i ($sig to rank $rank after ${delay}s): exit $rc, wanted 75: $(tail -5 "rnd$i.first.log")"
  n=$(ls "rnd$i.c" | grep -c '^ckpt-') || true
  [ "$n" = 1 ] || fail "round $i: $n checkpoints, wanted exactly 1"
  step=$(sed -n 's/.*checkpointing step \([0-9]*\).*/\1/p' "rnd$i.first.log")
  mp 5 "$DTRAIN" train "${lenet[@]}" --run-name "rnd$i" --checkpoint-dir "rnd$i.c" --resume auto \
    --save-params "rnd$i.h5" > "rnd$i.resume.log" 2>&1 || fail "round $i: the resumed run failed"
  "$COMPARE" rnd.ref.h5 "rnd$i.h5" 0 > /dev/null || fail "round $i: final parameters differ from the uninterrupted run"
  echo "ok: round $i: SIG$sig to rank $rank after ${delay}s → one checkpoint of step $step, exit 75, resumed to the same parameters"
done
