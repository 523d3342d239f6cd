#!/usr/bin/env bash
# Bad jobs and bad datasets end with exit code 2 and a message naming the key
# or the file, before training starts; a diverging run stops with a message.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
J="$WORK/bad_job.ini"
printf 'model = lenet5\ntrain-data = %s\nminibtch = 3\n' "$D/fashion-mnist-train.h5" > "$J"
expect_exit 2 minibtch -- "$DTRAIN" train --job "$J"
expect_exit 2 "'minibatch'" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --minibatch -4
expect_exit 2 "/nonexistent.h5" -- "$DTRAIN" train --train-data /nonexistent.h5
expect_exit 2 "resnet51" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --model resnet51
echo "not hdf5" > "$WORK/garbage.h5"
expect_exit 2 "garbage.h5" -- "$DTRAIN" train --train-data "$WORK/garbage.h5"
expect_exit 2 "expects 224" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --model resnet18
expect_exit 2 "unknown command" -- "$DTRAIN" trian
# Divergence is caught at the step it happens, not carried on as NaN.
expect_exit 1 "diverged" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --lr 1e6 --momentum 0 \
  --max-steps 200 --log-interval 1000
