#!/usr/bin/env bash
# A short real training run: LeNet-5 on 12,000 Fashion-MNIST images for one
# epoch; checks the metrics file (DESIGN.md §5) and that it learned.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
M="$SCRATCH/metrics.jsonl"
mpirun -np 1 "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" \
  --train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5" \
  --max-train-samples 12000 --max-test-samples 2000 --epochs 1 --log-interval 50 --metrics "$M"
for f in step epoch loss lr images_per_s t_compute_s t_comm_s t_io_wait_s; do
  json_field "$M" step "$f" >/dev/null || fail "step record lacks $f"
done
acc=$(json_field "$M" epoch test_accuracy)
loss=$(json_field "$M" epoch test_loss)
echo "test accuracy $acc, test loss $loss"
/usr/bin/python3 -c "import sys; sys.exit(0 if $acc >= 0.75 else 1)" || fail "accuracy $acc < 0.75 after one epoch on 12k images"
# 10 classes: top-5 is scored (engine/evaluator.hpp) and is at least top-1.
top5=$(json_field "$M" epoch test_top5_accuracy)
/usr/bin/python3 -c "import sys; sys.exit(0 if $acc <= $top5 <= 1 else 1)" || fail "top-5 accuracy $top5 below top-1 $acc"
