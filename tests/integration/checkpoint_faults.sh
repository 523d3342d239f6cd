#!/usr/bin/env bash
# What goes wrong around checkpoints (docs/reliability.md): a dtrain process
# SIGKILLed while writing one leaves the previous one loadable and its
# temporaries are removed at the next start; an evaluation that fails finds
# its epoch checkpointed, and a failed checkpoint write ends the run at the
# next step boundary; bad checkpoint folders and files
# are exit-2 errors naming them, with nothing written; an Inf in one worker's
# gradient makes every rank skip that step (or, with abort, ends the run
# naming it); memory and open HDF5 objects stay flat across epochs.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
: "${COMPARE_CKPT:?path of dtrain_compare_checkpoints}"
mp() { local np=$1; shift; bounded 300 mpirun -np "$np" --oversubscribe --bind-to none "$@"; }
lenet=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "" --threads 1
       --minibatch 16 --log-interval 1000 --metrics "" --checkpoint-epoch-end false)

# --- 1. SIGKILL inside a checkpoint write (the writer thread of the real binary)
"$DTRAIN" train "${lenet[@]}" --max-steps 30 --save-params kill.ref.h5 > kill.ref.log 2>&1 || fail "reference run"
# (Its 30 steps end inside the job file's warm-up of 0.5 epoch: said once, at start.)
[ "$(grep -c "option 'max-steps' = 30 ends the run inside the warm-up of 1875 steps" kill.ref.log)" = 1 ] \
  || fail "a run cut inside its warm-up by --max-steps was not warned about once: $(head -5 kill.ref.log)"
# A write of the 3 arrays passes 14 kill points; the second checkpoint (step 20) holds points 15-28.
for point in 15 16 17 18 20 22 24 25 26 27 28; do
  rm -rf "k$point"
  rc=0
  DTRAIN_CKPT_KILL_AT=$point "$DTRAIN" train "${lenet[@]}" --max-steps 30 --checkpoint-dir "k$point" \
    --checkpoint-every-steps 10 --save-params "" > "k$point.log" 2>&1 || rc=$?
  [ "$rc" = 137 ] || fail "kill point $point: exit $rc, wanted 137 (SIGKILL): $(tail -3 "k$point.log")"
  "$DTRAIN" train "${lenet[@]}" --max-steps 30 --checkpoint-dir "k$point" --resume auto \
    --save-params "k$point.h5" > "k$point.resume.log" 2>&1 || fail "kill point $point: resume failed: $(tail -3 "k$point.resume.log")"
  from=$(sed -n 's/.*resuming from \([^:]*\):.*/\1/p' "k$point.resume.log")
  case "$from" in */ckpt-0000000010.h5|*/ckpt-0000000020.h5) ;; *) fail "kill point $point: resumed from '$from'";; esac
  if ls -a "k$point" | grep -q '^\.tmp-'; then fail "kill point $point: temporaries left: $(ls -a "k$point")"; fi
  "$COMPARE" kill.ref.h5 "k$point.h5" 0 > /dev/null || fail "kill point $point: the resumed run ended elsewhere"
  echo "ok: killed at write point $point → resumed from $(basename "$from"), temporaries removed, same final parameters"
done

# --- 1b. checkpoints by time: rank 0's clock, agreed by every worker; the run still ends with 0
out=$(mp 3 "$DTRAIN" train "${lenet[@]}" --max-steps 1500 --checkpoint-dir timed --checkpoint-every-s 0.5 \
      --checkpoint-keep 100 --save-params "" 2>&1) || fail "timed checkpoints: the run failed: $out"
n=$(grep -c "^checkpoint of step" <<<"$out") || true
secs=$(sed -n 's/.*finished [0-9]* steps in [0-9]* epoch(s), \([0-9.]*\) s.*/\1/p' <<<"$out")
[ "$n" -ge 3 ] || fail "timed checkpoints: $n in $secs s with --checkpoint-every-s 0.5: $out"
python3 -c "import sys; n, s = int(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if n <= s / 0.5 + 2 else 1)" "$n" "$secs" \
  || fail "timed checkpoints: $n in $secs s, more than one per 0.5 s"
echo "ok: --checkpoint-every-s 0.5: $n checkpoints in $secs s, exit 0"

# --- 1c. a failure between checkpoints loses no more than it must. A test set
# that fails to read at an epoch's evaluation (a damaged compressed chunk: it
# opens and validates, then inflate fails) finds that epoch checkpointed — the
# checkpoint comes before the evaluation — and a resume with a readable test set
# goes on from it (before: the run ended with the checkpoint folder empty).
"$DTRAIN" data synth --shape 28x28x1 --n 512 --classes 10 --out ev.h5 > /dev/null
h5repack -f /images:GZIP=1 -l /images:CHUNK=64x28x28x1 ev.h5 evc.h5
cp evc.h5 evz.h5
python3 -c "import os, sys; f = open(sys.argv[1], 'r+b'); f.seek(int(os.path.getsize(sys.argv[1]) * 0.6)); f.write(bytes(200))" evz.h5
ev=(--job "$SRC/jobs/fashion_lenet.ini" --train-data ev.h5 --threads 1 --metrics "" --save-params "")
rm -rf evck
expect_exit 2 "evz.h5: /images: reading samples" -- "$DTRAIN" train "${ev[@]}" --epochs 2 --checkpoint-dir evck --test-data evz.h5
[ "$(cat evck/latest 2>/dev/null)" = ckpt-0000000008.h5 ] || fail "no checkpoint of epoch 1 (8 steps) after its evaluation failed: $(ls -a evck)"
out=$("$DTRAIN" train "${ev[@]}" --epochs 2 --checkpoint-dir evck --test-data ev.h5 --resume auto 2>&1) \
  || fail "the resume with a readable test set failed: $out"
grep -q "resuming from evck/ckpt-0000000008.h5: 8 steps done, epoch 2 step 1 next" <<<"$out" || fail "resumed elsewhere: $out"
grep -q "^epoch 1 (its checkpoint, evaluated on resume): test accuracy" <<<"$out" \
  || fail "the resume did not score epoch 1, which its stopped run could not: $out"
grep -q "^epoch 2 done in .* test accuracy" <<<"$out" || fail "the resumed run did not evaluate epoch 2: $out"
# The same at the run's last step: the resume has nothing left to train but the score.
rm -rf evck1
expect_exit 2 "evz.h5: /images: reading samples" -- "$DTRAIN" train "${ev[@]}" --epochs 1 --checkpoint-dir evck1 --test-data evz.h5
out=$("$DTRAIN" train "${ev[@]}" --epochs 1 --checkpoint-dir evck1 --test-data ev.h5 --resume auto 2>&1) \
  || fail "the resume of a finished run failed: $out"
grep -q "nothing left to train" <<<"$out" && grep -q "^epoch 1 (its checkpoint, evaluated on resume)" <<<"$out" &&
  grep -q "final test accuracy" <<<"$out" || fail "the resume at the run's last step did not score it: $out"
echo "ok: an evaluation that fails leaves its epoch checkpointed; the resume scores it and goes on"
# A warm-up as long as the run (warmup-epochs = epochs: allowed) never trains at lr either.
out=$("$DTRAIN" train "${ev[@]}" --epochs 1 --warmup-epochs 1 --test-data "" 2>&1) || fail "warmup-epochs = epochs: $out"
grep -q "the run's 8 steps end inside the warm-up of 8 steps" <<<"$out" || fail "a run all warm-up was not warned about: $out"
# (evc.h5's 50 KB chunks draw a layout warning: from rank 0 alone, not from each of the 3 ranks.)
out=$(mp 3 "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data evc.h5 --test-data "" --threads 1 \
      --minibatch 16 --mode ps --ps 1 --max-steps 2 --metrics "" --save-params "" 2>&1) || fail "3 ranks on evc.h5: $out"
[ "$(grep -c "evc.h5: /images: chunks of 64 samples hold 50176 bytes" <<<"$out")" = 1 ] \
  || fail "the layout warning was not printed once in a 3-rank job: $out"
echo "ok: a dataset's layout warning comes once from a 3-rank job"
# A checkpoint write that fails (a file-size limit: EFBIG; SIGXFSZ ignored as a
# batch system's limit would leave it) ends the run at the next step boundary,
# not at the next checkpoint: ResNet-18's 89 MB against a 16 MB limit (PMIx
# needs a few MB to start), checkpoints every 5 steps.
"$DTRAIN" data synth --shape 224x224x3 --n 16 --classes 10 --out r224.h5 > /dev/null
rm -rf fsz
rc=0
( trap '' XFSZ; ulimit -f 16000; exec "$DTRAIN" train --model resnet18 --train-data r224.h5 --test-data "" --threads 2 \
    --minibatch 2 --metrics "" --max-steps 30 --checkpoint-dir fsz --checkpoint-every-steps 5 \
    --checkpoint-epoch-end false --log-interval 1 --save-params "" ) > fsz.log 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a failed checkpoint write: exit $rc, wanted 1: $(tail -3 fsz.log)"
grep -q "error: .*ckpt-0000000005.*File too large" fsz.log || fail "the failed write of step 5 is not named: $(tail -3 fsz.log)"
last=$(sed -n 's/^epoch [0-9]*\/[0-9]* step [0-9]*\/[0-9]* (run step \([0-9]*\)\/.*/\1/p' fsz.log | tail -1)
[ -n "$last" ] && [ "$last" -lt 10 ] || fail "the run went on to step $last after the write of step 5 failed: $(tail -3 fsz.log)"
if ls -a fsz | grep -q '^\.tmp-'; then fail "the failed write left its temporary: $(ls -a fsz)"; fi
rm -f r224.h5
echo "ok: a failed checkpoint write ends the run at step $last (the write of step 5), not at the next checkpoint"

# --- 2. bad folders and files: exit 2 naming them, nothing written
touch afile
before=$(find . | sort)
expect_exit 2 "option 'checkpoint-dir'" -- "$DTRAIN" train "${lenet[@]}" --checkpoint-dir afile/ck
expect_exit 2 "option 'checkpoint-dir'" -- "$DTRAIN" train "${lenet[@]}" --checkpoint-dir /proc/ck
expect_exit 2 "option 'checkpoint-dir'" -- mp 3 "$DTRAIN" train "${lenet[@]}" --checkpoint-dir afile/ck
if mkdir -p small && mount -t tmpfs -o size=256k tmpfs small 2>/dev/null; then
  expect_exit 2 "free" -- "$DTRAIN" train "${lenet[@]}" --checkpoint-dir small/ck
  umount small
else
  echo "SKIPPED-PART: cannot mount a small tmpfs here; the full-folder refusal was not checked"
fi
rmdir small 2>/dev/null || true
after=$(find . | sort)
[ "$before" = "$after" ] || fail "refused starts wrote: $(comm -13 <(echo "$before") <(echo "$after"))"
# A folder with checkpoints of an earlier run is not reused silently.
"$DTRAIN" train "${lenet[@]}" --max-steps 20 --checkpoint-dir old --checkpoint-every-steps 10 --save-params "" > /dev/null 2>&1
expect_exit 2 "holds checkpoints of an earlier run" -- "$DTRAIN" train "${lenet[@]}" --checkpoint-dir old
# A folder with a name the run's checkpoints take: refused at the start, not
# after the training (its final checkpoint failed, and no params.h5 was written).
mkdir -p squat/ckpt-0000000500.h5
expect_exit 2 "squat/ckpt-0000000500.h5 is a folder" -- mp 2 "$DTRAIN" train "${lenet[@]}" --max-steps 500 --checkpoint-dir squat
[ ! -e squat/.lock ] || fail "the refused start left squat/.lock"
# Another model's checkpoint.
expect_exit 2 "old/ckpt-0000000020.h5 is of model lenet5" -- "$DTRAIN" train --job "$SRC/jobs/fashion_resnet.ini" \
  --train-data "$D/fashion-mnist-train.h5" --test-data "" --metrics "" --resume old/ckpt-0000000020.h5
# A corrupt newest checkpoint: PATH is an error naming it; auto falls back to the previous one, saying so.
cp -r old bad
python3 - bad/ckpt-0000000020.h5 <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0xFF          # inside the parameters
open(p, "wb").write(b)
PY
expect_exit 2 "bad/ckpt-0000000020.h5" -- "$DTRAIN" train "${lenet[@]}" --max-steps 30 --resume bad/ckpt-0000000020.h5
out=$("$DTRAIN" train "${lenet[@]}" --max-steps 30 --checkpoint-dir bad --resume auto --save-params "" 2>&1) \
  || fail "auto with a corrupt newest checkpoint failed: $out"
grep -q "skipping bad/ckpt-0000000020.h5" <<<"$out" || fail "the corrupt checkpoint was not reported: $out"
grep -q "resuming from bad/ckpt-0000000010.h5" <<<"$out" || fail "auto did not fall back to step 10: $out"
echo "ok: a corrupt newest checkpoint: PATH refused naming it, auto fell back to the previous one and said so"
# A given file into a folder holding another timeline's checkpoints: refused
# (the new run would overwrite them); another optimisation is logged, not silent.
expect_exit 2 "which the new run would overwrite" -- "$DTRAIN" train "${lenet[@]}" --max-steps 30 \
  --checkpoint-dir bad --resume old/ckpt-0000000010.h5
out=$("$DTRAIN" train "${lenet[@]}" --max-steps 40 --lr 0.05 --resume old/ckpt-0000000020.h5 --save-params "" 2>&1) \
  || fail "resume with another optimisation failed: $out"
grep -q "was taken with another optimisation (planned steps 20 → 40, lr at step 20" <<<"$out" \
  || fail "a changed schedule was not logged: $out"
echo "ok: a changed learning rate and plan on resume are logged"
# Another worker count re-shards and says so; LeNet-5 has no batch-norm statistics to average.
out=$(mp 2 "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "" \
      --threads 1 --minibatch 8 --log-interval 1000 --metrics "" --checkpoint-epoch-end false --max-steps 22 \
      --resume old/ckpt-0000000020.h5 --save-params "" 2>&1) \
  || fail "the 1-worker checkpoint resumed by 2 workers failed: $out"
grep -q "the arena is re-sharded" <<<"$out" || fail "the new worker count was not logged: $out"
if grep -q "batch-norm" <<<"$out"; then fail "LeNet-5 has no batch norm, yet the resume spoke of its statistics: $out"; fi
echo "ok: 1 → 2 workers on resume: re-sharded, logged, no word of batch norm for LeNet-5"
# What the job trains on, changed between a stop and its resume (a job file
# edited before the requeue): another training file of the same size, other
# normalisation, augmentation, clipping, decay of biases. Each is logged; they
# resumed without a word.
cp "$D/fashion-mnist-train.h5" other-train.h5
out=$("$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data other-train.h5 --test-data "" --threads 1 \
      --minibatch 16 --log-interval 1000 --metrics "" --checkpoint-epoch-end false --max-steps 20 \
      --resume old/ckpt-0000000020.h5 --save-params "" --mean 0.5 --std 0.25 --augment-pad 2 --augment-flip true \
      --clip-grad-norm 0.5 --decay-bias-bn true 2>&1) || fail "resume with other inputs failed: $out"
grep -qE "train-data /[^ ]*/fashion-mnist-train.h5 → /[^ ]*/other-train.h5" <<<"$out" \
  || fail "the other training file was not logged on resume: $out"
for change in "mean 0.286 → 0.5" "std 0.353 → 0.25" \
              "augment-pad 0 → 2" "augment-flip false → true" "clip-grad-norm 0 → 0.5" "decay-bias-bn false → true"; do
  grep -qF "$change" <<<"$out" || fail "'$change' was not logged on resume: $out"
done
out=$("$DTRAIN" train "${lenet[@]}" --max-steps 20 --resume old/ckpt-0000000020.h5 --save-params "" 2>&1) \
  || fail "resume with the same inputs failed: $out"
if grep -q "another optimisation" <<<"$out"; then fail "an unchanged job was said to differ: $out"; fi
rm -f other-train.h5
# --dropout is read by AlexNet's dropout layers only: a changed value on LeNet-5's resume is no change.
out=$("$DTRAIN" train "${lenet[@]}" --max-steps 20 --dropout 0.3 --resume old/ckpt-0000000020.h5 --save-params "" 2>&1) \
  || fail "resume with --dropout 0.3 failed: $out"
if grep -q "another optimisation" <<<"$out"; then fail "a dropout change was logged for a model without dropout: $out"; fi
# A checkpoint of a dtrain that recorded no inputs: resumed, and said that nothing was compared.
rm -rf noinputs
"$COMPARE_CKPT" --without-inputs old/ckpt-0000000020.h5 noinputs > /dev/null || fail "could not write a checkpoint without inputs"
out=$("$DTRAIN" train "${lenet[@]}" --max-steps 20 --resume noinputs/ckpt-0000000020.h5 --save-params "" 2>&1) \
  || fail "resume from a checkpoint without inputs failed: $out"
grep -q "records none of the job's inputs" <<<"$out" || fail "a checkpoint without inputs was not said to be: $out"
out=$("$DTRAIN" train "${lenet[@]}" --max-steps 20 --resume old/ckpt-0000000020.h5 --save-params "" 2>&1) || fail "$out"
if grep -q "records none of the job's inputs" <<<"$out"; then fail "a checkpoint with inputs was said to have none: $out"; fi
echo "ok: changed data, normalisation, augmentation and clipping on resume are logged; an unchanged job says nothing"
# A resumed run logs on the uninterrupted run's steps (every log-interval steps of
# the epoch), not every log-interval steps from its start (14, 18 from step 10).
out=$("$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --test-data "" \
      --threads 1 --minibatch 16 --metrics "" --checkpoint-epoch-end false --max-steps 20 --log-interval 4 \
      --resume old/ckpt-0000000010.h5 --save-params "" 2>&1) || fail "resume with --log-interval 4 failed: $out"
steps=$(sed -n 's/^epoch [0-9]*\/[0-9]* step \([0-9]*\)\/.*/\1/p' <<<"$out" | tr '\n' ' ')
[ "$steps" = "12 16 20 " ] || fail "a run resumed at step 10 logged steps '$steps', wanted '12 16 20 ': $out"
echo "ok: a resumed run logs on the uninterrupted run's steps"
# Only dtrain's own temporaries are removed at start.
mkdir -p own && echo keep > own/.tmp-notes.txt
"$DTRAIN" train "${lenet[@]}" --max-steps 2 --checkpoint-dir own --save-params "" > /dev/null 2>&1 || fail "run in own/"
[ -f own/.tmp-notes.txt ] || fail "a file that is not dtrain's temporary was removed"
# A stop request during start-up (handlers are in place before MPI_Init): one
# checkpoint at the first boundaries, exit 75. Sent once rank 1 catches SIGUSR1
# (SigCgt bit 10 in /proc/PID/status), i.e. right after it entered main().
( rc=0; mp 3 "$DTRAIN" train "${lenet[@]}" --max-steps 3000 --checkpoint-dir early --save-params "" \
    --run-name early > early.log 2>&1 || rc=$?; echo "$rc" > early.rc ) &
sent=""
for _ in $(seq 1 400); do
  for p in $(pgrep -f -- "--run-name early" || true); do
    grep -qz '^OMPI_COMM_WORLD_RANK=1$' "/proc/$p/environ" 2>/dev/null || continue
    mask=$(sed -n 's/^SigCgt:\s*//p' "/proc/$p/status" 2>/dev/null)
    [ -n "$mask" ] && (( (16#$mask >> 9) & 1 )) && kill -USR1 "$p" && sent=$p
  done
  [ -n "$sent" ] && break
  sleep 0.01
done
wait
[ -n "$sent" ] || fail "start-up stop: rank 1 never caught SIGUSR1"
rc=$(cat early.rc)
[ "$rc" = 75 ] || fail "a stop request during start-up: exit $rc, wanted 75: $(tail -5 early.log)"
at=$(sed -n 's/.*checkpointing step \([0-9]*\).*/\1/p' early.log)
echo "ok: a stop request right after start-up → checkpoint of step $at, exit 75"
# A truncated file.
cp -r old cut && truncate -s 4000 cut/ckpt-0000000020.h5
expect_exit 2 "cut/ckpt-0000000020.h5" -- "$DTRAIN" train "${lenet[@]}" --resume cut/ckpt-0000000020.h5
# A job whose ranks were started with different arguments.
expect_exit 2 "runs another job than rank 0" -- bounded 120 mpirun -np 2 --oversubscribe "$DTRAIN" train "${lenet[@]}" \
  --max-steps 5 : -np 1 "$DTRAIN" train "${lenet[@]}" --max-steps 6
# A folder another job holds (flock on its .lock, io/checkpoint.hpp CheckpointStore::lock): refused at
# once, naming the holder; nothing in it touched (a second job once removed the first's live temporary).
mkdir -p held && echo "held by pid 4242 on node17 since 0 (Unix time)" > held/.lock && : > held/.tmp-ckpt-0000000009.h5.4242
exec 9<held/.lock && flock -x -n 9 || fail "could not flock held/.lock"
expect_exit 2 "held is in use by another job (held by pid 4242 on node17" -- env DTRAIN_CHECKPOINT_LOCK_WAIT=0 \
  "$DTRAIN" train "${lenet[@]}" --checkpoint-dir held --max-steps 5
# With a wait (120 s under Slurm: a requeued job and its dead predecessor's lease), it says so, then refuses.
expect_exit 2 "waiting up to 2 s for it (DTRAIN_CHECKPOINT_LOCK_WAIT)" -- env DTRAIN_CHECKPOINT_LOCK_WAIT=2 \
  "$DTRAIN" train "${lenet[@]}" --checkpoint-dir held --max-steps 5
exec 9<&-
[ -e held/.tmp-ckpt-0000000009.h5.4242 ] || fail "a refused job removed the holder's temporary file"
# … or another command on one rank: named at once, not a silent wait in the first collective.
expect_exit 2 "rank 2 runs 'dtrain bench comm', rank 0 'dtrain train'" -- bounded 120 mpirun -np 2 --oversubscribe \
  "$DTRAIN" train "${lenet[@]}" --max-steps 5 : -np 1 "$DTRAIN" bench comm

# --- 3. an Inf in one worker's gradient in step 8 (DTRAIN_NONFINITE_AT_STEP=7: the
#     0-based index; messages, progress lines and checkpoint names count from 1)
# (ps: the Inf is in the last range backward reports, so the server has returned
# the other slices speculatively and rolls the step back: comm::ServeHooks.)
for mode in allreduce shared hybrid ps; do
  margs=(); np=4; inj=3; shared=$((1 << 40))
  # shared: allreduce with the non-finite check shared out over the workers
  # (forced for LeNet-5's small arena), the Inf in rank 1's share or not.
  [ "$mode" = shared ] && { margs=(--mode allreduce); shared=0; inj=1; }
  [ "$mode" = hybrid ] && { margs=(--mode hybrid --ps 1 --ranks-per-node 2); np=5; inj=2; }
  [ "$mode" = ps ] && { margs=(--mode ps --ps 1); np=5; inj=3; }
  out=$(DTRAIN_SHARED_CHECK_MIN_PARAMS=$shared DTRAIN_NONFINITE_AT_STEP=7 DTRAIN_NONFINITE_RANK=$inj mp $np "$DTRAIN" train "${lenet[@]}" "${margs[@]}" \
        --max-steps 12 --checkpoint-dir "nf.$mode" --checkpoint-every-steps 1 --checkpoint-keep 20 --save-params "" 2>&1) \
    || fail "$mode: the run with an Inf failed: $out"
  grep -q "step 8: the summed gradient holds an Inf or NaN; every rank skipped the update" <<<"$out" || fail "$mode: no skip logged: $out"
  grep -q "parameters bitwise identical on all 4 workers" <<<"$out" || fail "$mode: workers differ: $out"
  # Step 8 skipped: the state after 8 steps is the state after 7 (params and momentum), all finite (else no checkpoint).
  "$COMPARE_CKPT" "nf.$mode/ckpt-0000000007.h5" "nf.$mode/ckpt-0000000008.h5" params momentum > /dev/null \
    || fail "$mode: step 8 changed the parameters or the momentum"
  ! "$COMPARE_CKPT" "nf.$mode/ckpt-0000000008.h5" "nf.$mode/ckpt-0000000009.h5" params > /dev/null \
    || fail "$mode: step 9 did not update"
  echo "ok: $mode: an Inf in rank $inj's gradient in step 8 → every rank skipped step 8, identical finite parameters"
done
out=$(DTRAIN_NONFINITE_AT_STEP=7 DTRAIN_NONFINITE_RANK=1 mp 5 "$DTRAIN" train "${lenet[@]}" --mode ps --ps 1 \
      --max-steps 12 --on-nonfinite abort --save-params "" 2>&1) && fail "abort: the run succeeded"
grep -q "step 8 (epoch 1): the summed gradient holds an Inf or NaN and --on-nonfinite is abort" <<<"$out" \
  || fail "abort: no message naming step 8: $out"
! grep -q "checkpoint is intact" <<<"$out" || fail "abort: a checkpoint was said to be intact in a run without one: $out"
n=$(grep -c "dtrain: error:" <<<"$out" || true)
[ "$n" = 1 ] || fail "abort: the error was printed $n times"
echo "ok: --on-nonfinite abort ends the run naming step 8, once"
# With a checkpoint folder the claim needs a checkpoint: none before step 10, one after.
for every in 10 2; do
  out=$(DTRAIN_NONFINITE_AT_STEP=5 "$DTRAIN" train "${lenet[@]}" --max-steps 12 --on-nonfinite abort --save-params "" \
        --checkpoint-dir "abort$every" --checkpoint-every-steps $every 2>&1) && fail "abort, every $every: the run succeeded"
  claim=no; grep -q "the last checkpoint is intact" <<<"$out" && claim=yes
  [ "$claim" = "$([ "$every" = 2 ] && echo yes || echo no)" ] || fail "abort, every $every: claims an intact checkpoint: $claim: $out"
done
echo "ok: --on-nonfinite abort says a checkpoint is intact only where one was written"
out=$(DTRAIN_NONFINITE_AT_STEP=3 mp 2 "$DTRAIN" train "${lenet[@]}" --max-steps 12 --max-nonfinite-skips 1 \
      --save-params "" 2>&1) && fail "max-nonfinite-skips 1: the run succeeded"
grep -q "max-nonfinite-skips 1" <<<"$out" || fail "max-nonfinite-skips: no message: $out"
echo "ok: --max-nonfinite-skips ends a run that keeps skipping"

# --- 3b. global-norm clipping: with momentum and weight decay off, one step moves the
#     parameters by exactly lr · min(‖g‖, C); C far below ‖g‖ makes that lr · C.
for layout in "1" "5 --mode ps --ps 2"; do
  set -- $layout
  np=$1; shift
  mp "$np" "$DTRAIN" train "${lenet[@]}" "$@" --max-steps 3 --lr 0.1 --lr-schedule constant \
    --warmup-epochs 0 --momentum 0 --weight-decay 0 --clip-grad-norm 1e-4 --checkpoint-dir "clip.$np" \
    --checkpoint-every-steps 1 --save-params "" > "clip.$np.log" 2>&1 || fail "clip ($layout): run failed"
  d=$("$COMPARE_CKPT" "clip.$np/ckpt-0000000002.h5" "clip.$np/ckpt-0000000003.h5" params \
      | sed -n 's/.*L2 norm of the difference \(.*\)/\1/p' || true)  # exits 1: the arrays differ
  python3 -c "import sys; d = float(sys.argv[1]); sys.exit(0 if abs(d - 1e-5) < 1e-8 else 1)" "${d:-0}" \
    || fail "clip ($layout): one step moved the parameters by ${d:-?}, wanted lr · C = 1e-5"
  echo "ok: --clip-grad-norm 1e-4 ($np rank(s)$([ "$np" = 5 ] && echo ", ps with 2 servers")): a step moved the parameters by $d (lr · C = 1e-5)"
done

# --- 4. memory and HDF5 objects stay flat with checkpoints every 20 steps and every epoch
mp 5 "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" --threads 1 \
  --minibatch 16 --log-interval 1000 --mode hybrid --ps 1 --ranks-per-node 2 --max-train-samples 6400 --epochs 4 \
  --checkpoint-dir mem.c --checkpoint-every-steps 20 --test-data "$D/fashion-mnist-test.h5" --max-test-samples 2000 \
  --metrics mem.jsonl --save-params "" > mem.log 2>&1 || fail "memory run failed: $(tail -3 mem.log)"
python3 - mem.jsonl <<'PY' || fail "memory or HDF5 objects grew"
import json, sys
ep = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "epoch"]
ck = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "checkpoint"]
r2, r3 = ep[1], ep[2]
grow = (r3["rss_bytes"] - r2["rss_bytes"]) / r2["rss_bytes"]
print("rss per epoch (MiB):", [round(r["rss_bytes"] / 2**20, 2) for r in ep])
print(f"rss end of epoch 2 {r2['rss_bytes']/2**20:.1f} MiB, epoch 3 {r3['rss_bytes']/2**20:.1f} MiB ({100*grow:+.2f}%); "
      f"open HDF5 objects {[r['hdf5_open_objects'] for r in ep]}; {len(ck)} checkpoints")
assert len(ck) >= 12, "fewer checkpoints than asked for"
# 1% of resident memory, but at least 1 MiB: a 55 MiB process (a build without
# CUDA) moves by about that much between epochs in glibc's and HDF5's own
# bookkeeping. A leak per checkpoint (a snapshot is 0.5 MB here, 5 checkpoints
# per epoch) or per evaluation still exceeds it.
limit = max(0.01 * r2["rss_bytes"], 2**20)
assert r3["rss_bytes"] - r2["rss_bytes"] <= limit, "resident memory grew by more than max(1%, 1 MiB)"
assert len({r["hdf5_open_objects"] for r in ep}) == 1, "the open HDF5 object count changed"
PY
echo "ok: memory flat across epochs with a checkpoint each"
