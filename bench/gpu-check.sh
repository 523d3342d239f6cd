#!/usr/bin/env bash
# bench/gpu-check.sh — everything the GPU issue must show, on a machine with a GPU,
# in a few minutes: configure with -DDTRAIN_CUDA=ON, build the CUDA parts, run the
# [cuda] tests (must PASS here, not skip), short real `dtrain train --device cuda`
# runs on Fashion-MNIST (1 process; 1 GPU worker + 1 CPU parameter server in
# hybrid mode, the NCCL reducer and pinned staging; 2 GPU workers + 1 server when
# there are ≥ 2 GPUs), then the training throughput of
# alexnet-owt and resnet50 at minibatch 128 and 256 on dtrain (dtrain_gpu_bench) and
# on PyTorch/torchvision (bench/torch_gpu.py), FP32 and — with --tf32 — TF32 too,
# and — with --bf16 — bf16 mixed precision (dtrain --precision bf16 next to
# torch.autocast bf16; also one bf16 training run), printing the ratio dtrain /
# torch per setting.
#
#   bench/gpu-check.sh [--tf32] [--bf16] [--build DIR] [--steps S] [--python PY]
#                      [--no-torch] [--train-steps N] [--batches "128 256"] [--no-build]
#                      [--keep-going] [--timeout S]
#
# --no-build runs the binaries already in DIR (dtrain, dtrain_gpu_bench,
# tests/dtrain_tests, tests/dtrain_cuda_tests), built elsewhere with -DDTRAIN_CUDA=ON
# against the same libraries (a GPU node without compilers or -dev packages).
# --keep-going runs every test, training run and benchmark even after one failed
# (a first run on a new machine: see all of it), then exits non-zero naming them.
# --timeout S ends any one test or training command after S seconds (default 600):
# a hang is reported as a failure (exit 124), never waited on.
#
# Exit status: non-zero when the build, a [cuda] test or a training run fails
# (or the tests skipped: no GPU visible). Benchmark lines are printed as they
# come; a benchmark that fails (out of GPU memory, say) prints FAIL in its row
# and the others still run; a missing PyTorch only drops the ratio column.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build-gpu steps=15 warmup=5 tf32=0 bf16=0 py=python3 torch=1 train_steps=300 batches="128 256" no_build=0 keep_going=0 tlimit=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tf32) tf32=1 ;;
    --bf16) bf16=1 ;;
    --build) build=$2; shift ;;
    --steps) steps=$2; shift ;;
    --python) py=$2; shift ;;
    --no-torch) torch=0 ;;
    --train-steps) train_steps=$2; shift ;;
    --batches) batches=$2; shift ;;
    --no-build) no_build=1 ;;
    --keep-going) keep_going=1 ;;
    --timeout) tlimit=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "gpu-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

if [[ $no_build -eq 1 ]]; then  # before anything is written into $build
  for b in dtrain dtrain_gpu_bench tests/dtrain_tests tests/dtrain_cuda_tests; do
    [[ -x $build/$b ]] || { echo "gpu-check.sh: --no-build: $build/$b is missing" >&2; exit 2; }
  done
fi
source bench/lib.sh
dt_root_env
logs=$build/gpu-check-logs
mkdir -p "$logs"
jobs=$(nproc)
t0=$SECONDS
echo "== GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1 || echo '?')"
if [[ $no_build -eq 1 ]]; then
  echo "== prebuilt binaries in $build (--no-build)"
else
  echo "== configure + build ($build, -j$jobs)"
  cmake -S . -B "$build" -DDTRAIN_CUDA=ON -DCMAKE_BUILD_TYPE=Release > "$build.configure.log" 2>&1 \
    || { tail -20 "$build.configure.log"; exit 1; }
  cmake --build "$build" -j"$jobs" --target dtrain dtrain_tests dtrain_cuda_tests dtrain_gpu_bench 2>&1 | tail -3 \
    || { echo "gpu-check.sh: build FAILED" >&2; exit 1; }
  echo "   built in $((SECONDS - t0)) s"
fi

echo "== [cuda] tests"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
failed=()  # what failed; without --keep-going the first failure ends the check
fail() {
  failed+=("$1")
  echo "gpu-check.sh: $1 FAILED" >&2
  [[ $keep_going -eq 1 ]] || exit 1
}
limited() { timeout -k 10 "$tlimit" "$@"; }  # a hung GPU, rank or NCCL call ends here (exit 124)
set +e
limited "$build/tests/dtrain_cuda_tests" --reporter compact
rc=$?
if [[ $rc -eq 77 ]]; then echo "gpu-check.sh: no CUDA device visible: tests skipped" >&2; exit 1; fi
[[ $rc -eq 0 ]] || fail "[cuda] tests, 1 process (rc $rc)"
# the backend table: every CUDA kernel (f32, and bf16 where the GPU has it) vs the reference
out=$(limited "$build/tests/dtrain_tests" "[backend_ops][cuda]" --reporter compact 2>&1); rc=$?
if [[ $rc -eq 0 ]]; then echo "$out" | tail -5; else echo "$out"; fi  # a failure in full: which op, which output
if [[ $rc -eq 0 ]] && grep -q DTRAIN_TEST_SKIPPED <<<"$out"; then
  grep DTRAIN_TEST_SKIPPED <<<"$out" | sed 's/^/   /'
fi
[[ $rc -eq 0 ]] || fail "[backend_ops][cuda] (rc $rc)"
if [[ $ngpu -ge 2 ]]; then  # a real node reduction over NCCL
  limited mpiexec -n 2 --oversubscribe "$build/tests/dtrain_cuda_tests" "[nccl]" --reporter compact \
    || fail "[nccl] on 2 ranks (rc $?)"
fi
# the exchange's device path in hybrid: 1 GPU worker + 1 CPU server
CUDA_VISIBLE_DEVICES=0 limited mpiexec -n 2 --oversubscribe "$build/tests/dtrain_cuda_tests" "[exchange]" \
  --reporter compact || fail "[exchange] on 2 ranks (rc $?)"
# two ranks on one GPU: the binding check must refuse (test passes)
CUDA_VISIBLE_DEVICES=0 limited mpiexec -n 2 --oversubscribe "$build/tests/dtrain_cuda_tests" \
  "cuda: device binding*" --reporter compact || fail "device binding on 2 ranks (rc $?)"
set -e
echo "   tests done at $((SECONDS - t0)) s"

# Short real training runs through the trainer's CUDA path (ResNet-20 on
# Fashion-MNIST, minibatch 128, train_steps steps, no evaluation).
echo "== dtrain train --device cuda (Fashion-MNIST, resnet20, $train_steps steps)"
data=data/fashion-mnist-train.h5
if [[ ! -f $data ]]; then
  "$build/dtrain" data fashion-mnist --out data > /dev/null 2>&1 || true
fi
if [[ ! -f $data ]]; then  # no IDX files here: a synthetic set of the same shape, said so
  data=$build/synth-28x28x1.h5
  [[ -f $data ]] || "$build/dtrain" data synth --shape 28x28x1 --n 60000 --classes 10 --out "$data" > /dev/null
  echo "   (Fashion-MNIST not available: synthetic 28×28×1 data, $data)"
fi
train_run() {  # train_run LABEL NP args...
  local label=$1 np=$2; shift 2
  local out m="$logs/train-${label//[^a-zA-Z0-9]/_}.jsonl"
  rm -f "$m"
  out=$(limited mpiexec -n "$np" --oversubscribe --bind-to none "$build/dtrain" train --job jobs/fashion_resnet.ini \
          --train-data "$data" --test-data "" --metrics "$m" --save-params "" --device cuda --max-steps "$train_steps" \
          --log-interval 100 --augment-flip false --augment-pad 0 "$@" 2>&1) \
    || { echo "$out" | tail -20; fail "training run '$label'"; return 0; }
  # steady: the last log interval (after the cuDNN algorithm search of step 0); overall: the whole run
  local steady overall
  steady=$(json_field "$m" step images_per_s 2>/dev/null | cut -d. -f1)
  overall=$(json_field "$m" run images_per_s 2>/dev/null | cut -d. -f1)
  printf '   %-44s %8s images/s steady, %8s overall  %s\n' "$label" "${steady:-?}" "${overall:-?}" \
    "$(grep -o 'intra-node reducer [a-z]*' <<<"$out" | head -1)"
}
train_run "1 process, 1 GPU" 1
if [[ $bf16 -eq 1 ]]; then
  train_run "1 process, 1 GPU, --precision bf16" 1 --precision bf16
fi
CUDA_VISIBLE_DEVICES=0 train_run "hybrid: 1 GPU worker + 1 CPU server" 2 --mode hybrid --ps 1
if [[ $ngpu -ge 2 ]]; then
  train_run "hybrid: 2 GPU workers (NCCL) + 1 CPU server" 3 --mode hybrid --ps 1 --minibatch 64
fi
echo "   training runs done at $((SECONDS - t0)) s"

echo "== throughput (images/s, training steps; warmup $warmup, timed $steps)"
have_torch=0
if [[ $torch -eq 1 ]] && "$py" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  have_torch=1
else
  echo "   (no CUDA PyTorch+torchvision for $py: dtrain only; --python PY to pick one)"
fi
modes=(fp32); [[ $tf32 -eq 1 ]] && modes+=(tf32); [[ $bf16 -eq 1 ]] && modes+=(bf16)
bench_failed=0
printf '%-12s %5s %5s %12s %12s %8s\n' model batch mode dtrain torch ratio
for m in "${modes[@]}"; do
  for model in alexnet-owt resnet50; do
    for b in $batches; do
      flag=(); [[ $m != fp32 ]] && flag=(--"$m")  # --tf32 | --bf16, the same switch on both sides
      # A benchmark that fails (e.g. out of GPU memory at resnet50 / 256) gives a FAIL
      # entry for its row, not the end of the script (set -e, pipefail): the next row runs.
      d=$(limited "$build/dtrain_gpu_bench" --model "$model" --minibatch "$b" --steps "$steps" \
            --warmup "$warmup" --quiet-algos "${flag[@]}" | sed -n 's/.*images_per_s \([0-9.]*\).*/\1/p') \
        || { rc=$?; d=""; echo "   dtrain_gpu_bench $model/$b/$m FAILED (exit $rc; its message above)" >&2; }
      t=-
      if [[ $have_torch -eq 1 ]]; then
        t=$(limited "$py" bench/torch_gpu.py --model "$model" --minibatch "$b" --steps "$steps" \
              --warmup "$warmup" "${flag[@]}" | sed -n 's/.*images_per_s \([0-9.]*\).*/\1/p') \
          || { rc=$?; t=""; echo "   torch_gpu.py $model/$b/$m FAILED (exit $rc; its message above)" >&2; }
      fi
      [[ -n $d ]] || bench_failed=1
      r=-; [[ $t != - && -n $t && -n $d ]] && r=$(awk -v d="$d" -v t="$t" 'BEGIN{printf "%.2f", d/t}')
      printf '%-12s %5s %5s %12s %12s %8s\n' "$model" "$b" "$m" "${d:-FAIL}" "${t:-FAIL}" "$r"
    done
  done
done
echo "== done in $((SECONDS - t0)) s"
# The build, a [cuda] test or a training run that failed has ended the check
# above, or, with --keep-going, is in failed[] (exit 1 below); a benchmark row
# that FAILed (often out of memory at the largest setting) is reported here
# without failing the check.
[[ $bench_failed -eq 0 ]] || echo "gpu-check.sh: some dtrain benchmark rows FAILED (see above)" >&2
if [[ ${#failed[@]} -gt 0 ]]; then  # --keep-going: everything ran; say what failed
  printf 'gpu-check.sh: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
