#!/usr/bin/env bash
# The trainer's device path without a GPU: --device cpu-staged runs the CPU
# kernels behind the cuda path's memory model (arenas, batches, labels,
# probabilities on a checked "device"; gradients staged to host buffers by the
# exchange; parameters uploaded back; intra-node reduction by the MPI reducer
# in place of NCCL). With the reference kernels its parameters (and batch-norm
# buffers) must be BITWISE those of --device cpu, in one process and in every
# exchange mode. Also: --device cuda fails with exit 2 and a clear message
# where it cannot run (a build without CUDA, or no GPU visible: made so here).
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
W="$SCRATCH"
export OMP_NUM_THREADS=1
common=(--train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5" --max-test-samples 8
        --eval-minibatch 4 --log-interval 2 --threads 1 --reference-kernels true --metrics "")
pair() {  # pair NAME NP args...: the run on cpu and on cpu-staged, compared bitwise
  local name=$1 np=$2; shift 2
  for dev in cpu cpu-staged; do
    mpirun -np "$np" --oversubscribe --bind-to none "$DTRAIN" train "${common[@]}" --device "$dev" \
      --save-params "$W/$name-$dev.h5" "$@" > "$W/$name-$dev.log" 2>&1 || { cat "$W/$name-$dev.log"; fail "$name on $dev"; }
  done
  grep -q "backend cpu-staged" "$W/$name-cpu-staged.log" || fail "$name: the staged run did not use cpu-staged"
  h5diff "$W/$name-cpu.h5" "$W/$name-cpu-staged.h5" /params >/dev/null || fail "$name: cpu-staged parameters differ from cpu"
  h5diff "$W/$name-cpu.h5" "$W/$name-cpu-staged.h5" /buffers >/dev/null || fail "$name: cpu-staged buffers differ from cpu"
  echo "ok: $name bitwise equal on cpu and cpu-staged"
}
lenet=(--job "$SRC/jobs/fashion_lenet.ini" --max-steps 6 --lr-schedule constant --warmup-epochs 0 --minibatch 8)
pair lenet-1 1 "${lenet[@]}"
pair lenet-allreduce 2 "${lenet[@]}" --mode allreduce
pair lenet-ps 3 "${lenet[@]}" --mode ps --ps 1
pair lenet-hybrid 5 "${lenet[@]}" --mode hybrid --ps 1 --ranks-per-node 2
grep -q "intra-node reducer mpi" "$W/lenet-hybrid-cpu-staged.log" || fail "hybrid on cpu-staged did not report the mpi reducer"
# Batch norm: running statistics averaged over workers through host copies.
resnet=(--model resnet20 --max-steps 2 --minibatch 4)
pair resnet-1 1 "${resnet[@]}"
pair resnet-hybrid 3 "${resnet[@]}" --mode hybrid --ps 1 --ranks-per-node 2

# --device cuda where it cannot run: exit 2 with a message. The GPUs are hidden
# from the CUDA runtime (an empty CUDA_VISIBLE_DEVICES), so this runs on a GPU
# machine too; --device cuda itself runs in bench/gpu-check.sh.
out=$(CUDA_VISIBLE_DEVICES="" "$DTRAIN" train --job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5" \
        --test-data "" --metrics "" --max-steps 1 --device cuda 2>&1) && fail "--device cuda ran without a GPU: $out"
rc=$?
[ "$rc" = 2 ] || fail "--device cuda without a GPU: exit $rc, wanted 2: $out"
grep -qE "built without the CUDA backend|no CUDA device is visible" <<<"$out" || fail "--device cuda: unclear message: $out"
echo "ok: --device cuda without a GPU → exit 2: $(grep -oE "built without the CUDA backend|no CUDA device is visible" <<<"$out" | head -1)"
