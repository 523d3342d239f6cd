#!/usr/bin/env bash
# The published recipes (jobs/resnet50_imagenet.ini, jobs/alexnet_imagenet.ini)
# parse, state their schedule, and run 2 steps on synthetic ImageNet-shaped data
# under mpirun with 4 workers and 1 server (ResNet-50 hybrid, AlexNet ps;
# minibatch 1, 1 thread each): the loss is finite and, on a training set of 4
# images (every step sees the same global batch of 4), lower at the second step
# than at the first. The AlexNet run's evaluation reports top-5 beside top-1
# (1,000 classes); a 5-class run leaves top-5 out. 20–35 s on 2 cores.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
py=$(dt_python)

R50="$SRC/jobs/resnet50_imagenet.ini"
ALEX="$SRC/jobs/alexnet_imagenet.ini"
# The recipes' numbers (the comments in the files give the sources).
check_key() {  # FILE KEY WANT
  local got; got=$(job_value "$1" "$2")
  [ "$got" = "$3" ] || fail "$(basename "$1"): $2 = '$got', the recipe says '$3'"
}
check_key "$R50" lr 0.1;  check_key "$R50" minibatch 32; check_key "$R50" lr-schedule step
check_key "$R50" lr-milestones 30,60,80; check_key "$R50" warmup-epochs 5; check_key "$R50" epochs 90
check_key "$R50" momentum 0.9; check_key "$R50" weight-decay 1e-4; check_key "$R50" decay-bias-bn false
check_key "$ALEX" lr 0.01; check_key "$ALEX" minibatch 64; check_key "$ALEX" lr-step-epochs 20
check_key "$ALEX" epochs 90; check_key "$ALEX" momentum 0.9; check_key "$ALEX" weight-decay 5e-4
check_key "$ALEX" dropout 0.5
check_key "$R50" augment rrc; check_key "$R50" augment-flip true
check_key "$ALEX" augment crop; check_key "$ALEX" eval-resize 256; check_key "$ALEX" augment-flip true
[ -z "$(job_value "$ALEX" lr-milestones)" ] || fail "alexnet: lr-milestones beside lr-step-epochs"

# Stored at 256×256, as the recipes' stores are (shorter side 256): ResNet-50
# takes random-resized 224 crops of it, AlexNet random 227 crops.
"$DTRAIN" data synth --shape 256x256x3 --n 16 --classes 1000 --out "$SCRATCH/s256a.h5" --seed 3
"$DTRAIN" data synth --shape 256x256x3 --n 16 --classes 1000 --out "$SCRATCH/s256b.h5" --seed 4
common=(--max-steps 2 --max-train-samples 4 --minibatch 1 --threads 1 --loader-threads 1 --ps 1 --log-interval 1
        --save-params "")

run_recipe() {  # NAME JOB DATA MODE [ARGS...]
  local name=$1 job=$2 data=$3 mode=$4; shift 4
  local m="$SCRATCH/$name.jsonl"
  dt_mpirun 5 "$DTRAIN" train --job "$job" --train-data "$data" --mode "$mode" "${common[@]}" \
    --metrics "$m" "$@" >"$SCRATCH/$name.log" 2>&1 || fail_log "$SCRATCH/$name.log" "$name: dtrain failed"
  [ "$(grep -c '"kind":"step"' "$m")" = 2 ] || fail "$name: not 2 step records in $m"
  "$py" - "$m" "$name" <<'PY' || fail "$name: the loss is not finite or did not decrease"
import json, math, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "step"]
print(sys.argv[2] + ": losses", losses)
sys.exit(0 if all(math.isfinite(l) and l > 0 for l in losses) and losses[1] < losses[0] else 1)
PY
  echo "ok: $name, 4 workers + 1 server ($mode)"
}

run_recipe resnet50 "$R50" "$SCRATCH/s256a.h5" hybrid --ranks-per-node 2 --test-data ""
# Warm-up from 0.1·lr over 5 epochs of 1 step: step 0 at 0.01, step 1 at 0.01 + 0.09/5.
lr1=$(json_field "$SCRATCH/resnet50.jsonl" step lr)
"$py" -c "import sys; sys.exit(0 if abs($lr1 - 0.028) < 1e-6 else 1)" || fail "resnet50: lr at step 2 is $lr1, not 0.028"

run_recipe alexnet "$ALEX" "$SCRATCH/s256b.h5" ps --test-data "$SCRATCH/s256b.h5" --max-test-samples 8 --eval-minibatch 2
top1=$(json_field "$SCRATCH/alexnet.jsonl" epoch test_accuracy)
top5=$(json_field "$SCRATCH/alexnet.jsonl" epoch test_top5_accuracy)
"$py" -c "import sys; sys.exit(0 if 0 <= $top1 <= $top5 <= 1 else 1)" || fail "alexnet: top-1 $top1, top-5 $top5"
grep -qE "test accuracy [0-9.]+% \(top-5 [0-9.]+%\) test loss" "$SCRATCH/alexnet.log" || fail "alexnet: no top-5 in the progress line"
grep -qE "final test accuracy [0-9.]+% \(top-5 [0-9.]+%\)" "$SCRATCH/alexnet.log" || fail "alexnet: no top-5 in the final line"
echo "ok: alexnet evaluation, top-1 $top1, top-5 $top5"

# Fewer than 10 classes: no top-5, in the metrics or on stdout.
"$DTRAIN" data synth --shape 28x28x1 --n 32 --classes 5 --out "$SCRATCH/s5.h5" --seed 5
"$DTRAIN" train --model lenet5 --train-data "$SCRATCH/s5.h5" --test-data "$SCRATCH/s5.h5" --minibatch 8 \
  --epochs 1 --threads 1 --save-params "" --metrics "$SCRATCH/five.jsonl" >"$SCRATCH/five.log" 2>&1 \
  || fail_log "$SCRATCH/five.log" "5-class run failed"
json_field "$SCRATCH/five.jsonl" epoch test_accuracy >/dev/null
! grep -q top5 "$SCRATCH/five.jsonl" || fail "5 classes: test_top5_accuracy in the metrics"
! grep -q "top-5" "$SCRATCH/five.log" || fail "5 classes: top-5 on stdout"
echo "ok: 5 classes, top-1 only"
