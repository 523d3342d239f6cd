#!/usr/bin/env bash
# bench/gpu-check.sh — everything the GPU issue must show, on a machine with a GPU,
# in a few minutes: configure with -DDTRAIN_CUDA=ON, build the CUDA parts, run the
# [cuda] tests (must PASS here, not skip), then the training throughput of
# alexnet-owt and resnet50 at minibatch 128 and 256 on dtrain (dtrain_gpu_bench) and
# on PyTorch/torchvision (bench/torch_gpu.py), FP32 and — with --tf32 — TF32 too,
# printing the ratio dtrain / torch per setting.
#
#   bench/gpu-check.sh [--tf32] [--build DIR] [--steps S] [--python PY] [--no-torch]
#
# Exit status: non-zero when the build or a [cuda] test fails (or they skipped:
# no GPU visible). Benchmark lines are printed as they come; a missing PyTorch
# only drops the ratio column.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build-gpu steps=15 warmup=5 tf32=0 py=python3 torch=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tf32) tf32=1 ;;
    --build) build=$2; shift ;;
    --steps) steps=$2; shift ;;
    --python) py=$2; shift ;;
    --no-torch) torch=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc)
t0=$SECONDS
echo "== GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1 || echo '?')"
echo "== configure + build ($build, -j$jobs)"
cmake -S . -B "$build" -DDTRAIN_CUDA=ON -DCMAKE_BUILD_TYPE=Release > "$build.configure.log" 2>&1 \
  || { tail -20 "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$jobs" --target dtrain_cuda_tests dtrain_gpu_bench 2>&1 | tail -3
echo "   built in $((SECONDS - t0)) s"

echo "== [cuda] tests"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
set +e
"$build/tests/dtrain_cuda_tests" --reporter compact
rc=$?
if [[ $rc -eq 0 && $ngpu -ge 2 ]]; then  # a real node reduction over NCCL
  mpiexec -n 2 --oversubscribe "$build/tests/dtrain_cuda_tests" "[nccl]" --reporter compact; rc=$?
fi
if [[ $rc -eq 0 ]]; then  # two ranks on one GPU: the binding check must refuse (test passes)
  CUDA_VISIBLE_DEVICES=0 mpiexec -n 2 --oversubscribe "$build/tests/dtrain_cuda_tests" \
    "cuda: device binding*" --reporter compact; rc=$?
fi
set -e
if [[ $rc -eq 77 ]]; then echo "gpu-check.sh: no CUDA device visible: tests skipped" >&2; exit 1; fi
if [[ $rc -ne 0 ]]; then echo "gpu-check.sh: [cuda] tests FAILED (rc $rc)" >&2; exit 1; fi
echo "   tests done at $((SECONDS - t0)) s"

echo "== throughput (images/s, training steps; warmup $warmup, timed $steps)"
have_torch=0
if [[ $torch -eq 1 ]] && "$py" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  have_torch=1
else
  echo "   (no CUDA PyTorch+torchvision for $py: dtrain only; --python PY to pick one)"
fi
modes=(0); [[ $tf32 -eq 1 ]] && modes=(0 1)
printf '%-12s %5s %5s %12s %12s %8s\n' model batch tf32 dtrain torch ratio
for m in "${modes[@]}"; do
  for model in alexnet-owt resnet50; do
    for b in 128 256; do
      flag=(); [[ $m -eq 1 ]] && flag=(--tf32)
      d=$("$build/dtrain_gpu_bench" --model "$model" --minibatch "$b" --steps "$steps" \
            --warmup "$warmup" --quiet-algos "${flag[@]}" | sed -n 's/.*images_per_s \([0-9.]*\).*/\1/p')
      t=-
      if [[ $have_torch -eq 1 ]]; then
        t=$("$py" bench/torch_gpu.py --model "$model" --minibatch "$b" --steps "$steps" \
              --warmup "$warmup" "${flag[@]}" | sed -n 's/.*images_per_s \([0-9.]*\).*/\1/p')
      fi
      r=-; [[ $t != - && -n $t && -n $d ]] && r=$(awk -v d="$d" -v t="$t" 'BEGIN{printf "%.2f", d/t}')
      printf '%-12s %5s %5s %12s %12s %8s\n' "$model" "$b" "$m" "${d:-FAIL}" "${t:-FAIL}" "$r"
    done
  done
done
echo "== done in $((SECONDS - t0)) s"
