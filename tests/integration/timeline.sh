#!/usr/bin/env bash
# --timeline (engine/timeline.hpp, docs/timeline.md): a hybrid LeNet-5 run on
# 2 virtual nodes of 2 workers and 1 server writes one Trace Event Format file
# with a named track per rank, the workers' compute and transfers, the
# server's updates and exactly --timeline-steps steps (check_timeline.py); an
# allreduce run with --timeline auto writes timeline.json into its run folder
# (bucket allreduces); a run without --timeline writes no timeline; a bad
# --timeline is an exit-2 error before any work.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
CHECK=(/usr/bin/python3 "$IT_DIR/check_timeline.py")
common=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5"
        --test-data "$D/fashion-mnist-test.h5" --max-test-samples 16 --eval-minibatch 16
        --max-steps 6 --log-interval 3 --threads 1 --loader-threads 1 --minibatch 16 --save-params "")
mp() { mpirun -np "$1" --oversubscribe --bind-to none "${@:2}"; }

# Bad input first: nothing may be written, exit 2 naming the option and the path.
touch plain
expect_exit 2 "option 'timeline': '$SCRATCH/plain/t.json'" -- \
  "$DTRAIN" train "${common[@]}" --metrics "" --timeline "$SCRATCH/plain/t.json"
expect_exit 2 "option 'timeline': '/proc/t.json'" -- "$DTRAIN" train "${common[@]}" --metrics "" --timeline /proc/t.json
expect_exit 2 "option 'timeline': '$SCRATCH/plain'" -- "$DTRAIN" train "${common[@]}" --metrics "" --timeline "$SCRATCH/plain"
expect_exit 2 "option 'timeline-steps'" -- "$DTRAIN" train "${common[@]}" --metrics "" --timeline t.json --timeline-steps 0
# The job-file key is the option's name.
{ cat "$SRC/jobs/fashion_lenet.ini"; echo "timeline = /proc/t.json"; } >tl.ini
expect_exit 2 "option 'timeline': '/proc/t.json'" -- "$DTRAIN" train --job tl.ini "${common[@]:2}" --metrics ""
[ ! -e t.json ] && [ ! -e runs ] || fail "a refused run wrote something"

# Hybrid, 5 ranks, a checkpoint every 2 steps (pauses after steps 1 and 3 fall in the window).
mp 5 "$DTRAIN" train "${common[@]}" --mode hybrid --ps 1 --ranks-per-node 2 --metrics hybrid.jsonl \
  --checkpoint-dir ckpt --checkpoint-every-steps 2 --checkpoint-epoch-end false \
  --timeline t.json --timeline-steps 4 >hybrid.log
grep -q "timeline t.json" hybrid.log || fail "rank 0 did not report the timeline"
"${CHECK[@]}" t.json --ranks 5 --servers 1 --steps 4 --mode hybrid --ranks-per-node 2 --checkpoints 1,3
ls -a | grep -q '\.tmp\.' && fail "a temporary timeline file was left behind"

# Allreduce, 3 workers, --timeline auto: the run folder's timeline.json; more
# steps asked than the run has: all 6 recorded.
mp 3 "$DTRAIN" train "${common[@]}" --mode allreduce --timeline auto --timeline-steps 50 >allreduce.log
"${CHECK[@]}" runs/fashion_lenet/1/timeline.json --ranks 3 --steps 6 --mode allreduce

# Without --timeline: no timeline anywhere.
mp 3 "$DTRAIN" train "${common[@]}" --mode allreduce >off.log
[ -e runs/fashion_lenet/2/metrics.jsonl ] || fail "the run without a timeline has no run folder"
[ -z "$(find runs/fashion_lenet/2 -name '*timeline*')" ] || fail "a run without --timeline wrote a timeline"
grep -q "timeline" off.log && fail "a run without --timeline mentions a timeline"
echo "ok: timeline"
