#!/usr/bin/env bash
# --precision bf16 (layers/format.hpp, mixed precision): a short bf16 run of
# LeNet-5 learns as the fp32 one does, records its precision and keeps the
# parameters f32; bf16 is refused, naming the option and writing nothing,
# where it cannot run (a CPU without AVX512-BF16 — oneDNN limited with
# ONEDNN_MAX_CPU_ISA —, the reference kernels, the cpu-staged device).
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
short=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5"
       --max-train-samples 12000 --max-test-samples 2000 --epochs 1 --log-interval 50 --threads 2)

# Refusals first: exit 2, the option named, nothing written.
expect_exit 2 "option 'precision'" -- "$DTRAIN" train "${short[@]}" --precision fp16
expect_exit 2 "AVX512-BF16" -- env ONEDNN_MAX_CPU_ISA=AVX512_CORE "$DTRAIN" train "${short[@]}" --precision bf16
expect_exit 2 "option 'precision'" -- "$DTRAIN" train "${short[@]}" --precision bf16 --reference-kernels true
expect_exit 2 "option 'precision'" -- "$DTRAIN" train "${short[@]}" --precision bf16 --device cpu-staged
# dtrain bench compute refuses as train does, not with an error from inside oneDNN.
expect_exit 2 "AVX512-BF16" -- env ONEDNN_MAX_CPU_ISA=AVX512_CORE "$DTRAIN" bench compute --peak-only --precision bf16 --threads 1
expect_exit 2 "AVX512-BF16" -- env ONEDNN_MAX_CPU_ISA=AVX512_CORE "$DTRAIN" bench compute --model lenet5 --precision bf16 --steps 2
expect_exit 2 "option 'precision'" -- "$DTRAIN" bench compute --model lenet5 --precision bf16 --backend reference --steps 2
[ ! -e runs ] || fail "a refused run wrote $(find runs | head -3)"

# This CPU: bf16 or not (then the learning half is skipped, saying why).
out=$("$DTRAIN" train "${short[@]}" --precision bf16 --max-steps 1 --metrics "" --save-params "" 2>&1) || {
  grep -q "AVX512-BF16" <<<"$out" && { echo "SKIP: $out"; exit 77; }
  fail "a one-step bf16 run failed: $out"
}
rm -rf runs

for p in fp32 bf16; do
  "$DTRAIN" train "${short[@]}" --precision $p --metrics "$SCRATCH/$p.jsonl" --save-params "$SCRATCH/$p.h5" >"$SCRATCH/$p.log" 2>&1 ||
    { cat "$SCRATCH/$p.log"; fail "the $p run failed"; }
  grep -q "backend cpu $p" "$SCRATCH/$p.log" || fail "the $p run's start line does not say $p"
  [ "$(json_field "$SCRATCH/$p.jsonl" run precision)" = "$p" ] || fail "the $p run record's precision is not $p"
done
a32=$(json_field "$SCRATCH/fp32.jsonl" epoch test_accuracy)
a16=$(json_field "$SCRATCH/bf16.jsonl" epoch test_accuracy)
echo "test accuracy after one epoch on 12k images: fp32 $a32, bf16 $a16"
/usr/bin/python3 -c "import sys; sys.exit(0 if $a16 >= 0.75 and abs($a16 - $a32) <= 0.03 else 1)" ||
  fail "bf16 accuracy $a16 (fp32 $a32): below 0.75 or more than 3 points from fp32"
# The saved parameters are the f32 master weights, close to fp32's after 187 steps.
"$COMPARE" "$SCRATCH/fp32.h5" "$SCRATCH/bf16.h5" 0.2 || fail "bf16 parameters far from fp32's"

# The bf16 weight mirror (Net::weight_mirror): a worker that updates its own
# parameters reads the bf16 copy its SGD pass wrote; a worker whose parameters a
# parameter server updates never has one and converts in every forward. Same
# minibatch per worker, same arithmetic: the two must end bitwise equal, through
# epochs with evaluations (another minibatch size) between them — a stale or
# wrong mirror anywhere in the trainer shows here.
mirror=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5"
        --precision bf16 --threads 1 --minibatch 32 --max-train-samples 640 --epochs 3 --max-test-samples 100
        --eval-minibatch 24 --lr-schedule constant --warmup-epochs 0 --log-interval 10 --metrics "")
"$DTRAIN" train "${mirror[@]}" --save-params "$SCRATCH/mirror.h5" >"$SCRATCH/mirror.log" 2>&1 ||
  { cat "$SCRATCH/mirror.log"; fail "the 1-process bf16 run failed"; }
mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" train "${mirror[@]}" --mode ps --ps 1 \
  --save-params "$SCRATCH/converting.h5" >"$SCRATCH/converting.log" 2>&1 ||
  { cat "$SCRATCH/converting.log"; fail "the bf16 run with a parameter server failed"; }
h5diff "$SCRATCH/mirror.h5" "$SCRATCH/converting.h5" /params ||
  fail "bf16: the worker reading the weight mirror and the one converting (ps) end with different parameters"
echo "ok: bf16 with the weight mirror = bf16 converting every forward, bit for bit (60 steps, 3 evaluations)"

# A bf16 run's checkpoint resumes in fp32 (the master weights and momentum are f32 in
# either precision), and the change is said, not silent.
"$DTRAIN" train "${short[@]}" --precision bf16 --max-steps 20 --checkpoint-dir "$SCRATCH/ck" --checkpoint-every-steps 10 \
  --metrics "" --save-params "" >"$SCRATCH/ck.log" 2>&1 || { cat "$SCRATCH/ck.log"; fail "the bf16 run with checkpoints failed"; }
out=$("$DTRAIN" train "${short[@]}" --precision fp32 --max-steps 30 --checkpoint-dir "$SCRATCH/ck" --resume auto \
  --metrics "" --save-params "" 2>&1) || fail "resuming a bf16 checkpoint in fp32 failed: $out"
grep -q "was taken with another optimisation (.*precision bf16 → fp32" <<<"$out" || fail "the precision change on resume was not said: $out"
echo "ok: a bf16 checkpoint resumes in fp32, saying so"
