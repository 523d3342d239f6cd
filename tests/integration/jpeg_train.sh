#!/usr/bin/env bash
# Training from jpeg-layout files (docs/data-formats.md): LeNet-5 on 6,000
# Fashion-MNIST pictures stored as JPEGs (written by dtrain_make_jpeg_store,
# the tests' fixture writer), decoded and augmented (random-resized crop +
# flip) in the loader threads, scored on a jpeg test file; checks that the loss
# falls and that it learned. Then: a padded crop on a jpeg file is an exit-2
# usage error naming the option, and `dtrain bench io` runs on a jpeg file.
source "$(dirname "$0")/lib.sh"
: "${MAKE_STORE:?path of dtrain_make_jpeg_store}"
"$MAKE_STORE" train.h5 6000 gray=1
"$MAKE_STORE" test.h5 2000 gray=1 test=1
M="$SCRATCH/metrics.jsonl"
mpirun -np 1 "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data train.h5 --test-data test.h5 \
  --epochs 1 --log-interval 10 --metrics "$M" --loader-threads 2 \
  --augment rrc --rrc-scale 0.5,1 --augment-flip true
"$(dt_python)" - "$M" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "step"' in l or '"kind":"step"' in l]
first, last = steps[0]["loss"], steps[-1]["loss"]
print(f"loss at step {steps[0]['step']}: {first:.4f}, at step {steps[-1]['step']}: {last:.4f}")
sys.exit(0 if last < 0.75 * first else f"FAIL: the loss did not fall ({first} -> {last})")
PY
acc=$(json_field "$M" epoch test_accuracy)
echo "test accuracy $acc after one epoch of 6000 jpeg images"
"$(dt_python)" -c "import sys; sys.exit(0 if $acc >= 0.5 else 1)" || fail "accuracy $acc < 0.5"

expect_exit 2 "option 'train-data'" -- mpirun -np 1 "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" \
  --train-data train.h5 --test-data test.h5 --augment-pad 4 --metrics ""
out=$("$DTRAIN" bench io --data train.h5 --input 28x28x1 --augment rrc --flip --minibatch 64 --steps 5 --threads 2)
grep -q '"layout":"jpeg"' <<<"$out" || fail "bench io on a jpeg file: no json line: $out"
echo "ok: bench io on a jpeg file"
