#!/usr/bin/env bash
# bench/vs_pytorch.sh — dtrain vs PyTorch, side by side, on this machine's CPU.
#
# Trains the same network with the same minibatch and thread count in dtrain and
# in PyTorch (bench/torch_train.py), alternating the two (and the order) over a few
# repeats, and prints the median images/s of each and the ratio dtrain/PyTorch:
#   lenet5       minibatch 64, 1 and 2 threads (real Fashion-MNIST)
#   alexnet-owt  minibatch 16, 2 threads (synthetic 224×224×3, 1000 classes)
#   resnet50     minibatch 16, 2 threads (synthetic 224×224×3, 1000 classes)
# What is timed (see bench/README.md): warm steady-state steps only. dtrain: its
# own JSONL images_per_s of every log interval after the warm-up ones, combined as
# Σ images / Σ seconds; PyTorch: per-step perf_counter after the same number of
# warm-up steps. Both include their per-step input work (dtrain: HDF5 read +
# normalise; PyTorch: LeNet's in-memory gather + normalise, none for 224 models).
#
# usage: bench/vs_pytorch.sh [--dtrain build/dtrain] [--python /usr/bin/python3]...
#                            [--repeats 3] [--models lenet5,alexnet-owt,resnet50]
#                            [--workdir /tmp/dtrain-bench] [--quick]
#   --python may be given several times: one PyTorch peer per interpreter
#   (default: Debian's /usr/bin/python3 with python3-torch 1.13).
#   --quick: 1 repeat and fewer steps (a smoke run, not a measurement).
# Not part of ctest. Needs python3-torch, python3-torchvision and python3-h5py
# (DTRAIN_BENCH_DEPS=1 scripts/setup-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

dtrain=build/dtrain
pythons=()
repeats=3
models=lenet5,alexnet-owt,resnet50
workdir=${TMPDIR:-/tmp}/dtrain-bench
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dtrain) dtrain=$2; shift 2 ;;
    --python) pythons+=("$2"); shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --quick) quick=1; repeats=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "vs_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#pythons[@]} -eq 0 ] && pythons=(/usr/bin/python3)
[ -x "$dtrain" ] || { echo "vs_pytorch: $dtrain not found; build it (scripts/build.sh)" >&2; exit 2; }
for py in "${pythons[@]}"; do
  "$py" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "vs_pytorch: $py cannot import torch and torchvision" >&2; exit 2; }
done
mkdir -p "$workdir"
results=$workdir/results.jsonl
: >"$results"

# Steps: LeNet warm-up = one log interval; 224 models: 2 warm-up steps.
if [ $quick = 1 ]; then
  lenet_interval=50 lenet_measured=100 big_warmup=1 big_measured=2
else
  lenet_interval=100 lenet_measured=400 big_warmup=2 big_measured=6
fi

# Data: real Fashion-MNIST for LeNet, a small synthetic ImageNet-shaped set otherwise.
fashion=data/fashion-mnist-train.h5
if [ ! -f "$fashion" ]; then
  fashion=$workdir/fashion-mnist-train.h5
  [ -f "$fashion" ] || "$dtrain" data fashion-mnist --out "$workdir" >/dev/null
fi
synth=$workdir/synth-224x224x3.h5
[ -f "$synth" ] || "$dtrain" data synth --shape 224x224x3 --n 64 --classes 1000 --out "$synth" >/dev/null
mean=0.2860 std=0.3530

configs=()  # model:minibatch:threads
IFS=, read -r -a wanted <<<"$models"
for m in "${wanted[@]}"; do
  case "$m" in
    lenet5) configs+=(lenet5:64:1 lenet5:64:2) ;;
    alexnet-owt|resnet50) configs+=("$m:16:2") ;;
    *) echo "vs_pytorch: unknown model '$m'" >&2; exit 2 ;;
  esac
done

# One JSON line per run into $results: {"engine", "config", "images_per_s", ...}.
run_dtrain() {  # model b t
  local model=$1 b=$2 t=$3 data interval warm total m=$workdir/dtrain-metrics.jsonl
  if [ "$model" = lenet5 ]; then
    data=$fashion interval=$lenet_interval warm=1 total=$((lenet_interval + lenet_measured))
    norm=(--mean $mean --std $std)
  else
    data=$synth interval=1 warm=$big_warmup total=$((big_warmup + big_measured)) norm=()
  fi
  rm -f "$m"
  OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$dtrain" train --model "$model" --train-data "$data" \
    --test-data "" --minibatch "$b" --threads "$t" --max-steps "$total" --log-interval "$interval" \
    --momentum 0.9 --lr 0.01 "${norm[@]}" --metrics "$m" --save-params "" >"$workdir/dtrain.log" 2>&1 ||
    { cat "$workdir/dtrain.log" >&2; exit 1; }
  /usr/bin/python3 - "$m" "$warm" "$b" "$model:$b:$t" >>"$results" <<'EOF'
import json, sys
path, warm, b, config = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
steps = [r for r in map(json.loads, open(path)) if r.get("kind") == "step"]
prev = steps[warm - 1]["step"] if warm > 0 else 0
images = seconds = compute = io = 0.0
for r in steps[warm:]:
    n = r["step"] - prev; prev = r["step"]
    images += n * b; seconds += n * b / r["images_per_s"]
    compute += n * r["t_compute_s"]; io += n * r["t_io_wait_s"]
print(json.dumps({"engine": "dtrain", "config": config, "images_per_s": images / seconds,
                  "compute_images_per_s": images / compute, "io_share": io / seconds}))
EOF
}

run_torch() {  # python model b t
  local py=$1 model=$2 b=$3 t=$4 warm steps out
  if [ "$model" = lenet5 ]; then warm=$lenet_interval steps=$lenet_measured
  else warm=$big_warmup steps=$big_measured; fi
  out=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$py" bench/torch_train.py --model "$model" \
        --minibatch "$b" --threads "$t" --warmup "$warm" --steps "$steps" --data "$fashion" \
        --mean $mean --std $std --json /dev/stdout | tail -n 1)
  /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]);
print(json.dumps({"engine": sys.argv[2], "config": sys.argv[3], "images_per_s": r["images_per_s"],
                  "torch": r["torch"]}))' "$out" "$py" "$model:$b:$t" >>"$results"
}

echo "vs_pytorch: $(nproc) cores, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $repeats repeat(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$repeats"); do
  for c in "${configs[@]}"; do
    IFS=: read -r model b t <<<"$c"
    echo "  repeat $rep: $model minibatch $b threads $t"
    if [ $((rep % 2)) = 1 ]; then
      run_dtrain "$model" "$b" "$t"
      for py in "${pythons[@]}"; do run_torch "$py" "$model" "$b" "$t"; done
    else
      for py in "${pythons[@]}"; do run_torch "$py" "$model" "$b" "$t"; done
      run_dtrain "$model" "$b" "$t"
    fi
  done
done
echo "vs_pytorch: done, load: $(cut -d' ' -f1-3 /proc/loadavg); raw runs in $results"
echo

/usr/bin/python3 - "$results" "${pythons[@]}" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peers = sys.argv[2:]
version = {p: next((r["torch"] for r in rows if r["engine"] == p), "?") for p in peers}
configs = list(dict.fromkeys(r["config"] for r in rows))
def med(engine, config, key="images_per_s"):
    v = [r[key] for r in rows if r["engine"] == engine and r["config"] == config]
    return statistics.median(v) if v else float("nan")
head = f"{'config':<34}{'dtrain img/s':>13}"
for p in peers:
    head += f"{'torch ' + version[p]:>24}{'ratio':>7}"
head += f"{'dtrain T_C-only':>17}{'io':>6}"
print(head)
for c in configs:
    model, b, t = c.split(":")
    d = med("dtrain", c)
    line = f"{model + ' minibatch ' + b + ' threads ' + t:<34}{d:>13.1f}"
    for p in peers:
        tv = med(p, c)
        line += f"{tv:>24.1f}{d / tv:>7.2f}"
    line += f"{med('dtrain', c, 'compute_images_per_s'):>17.1f}{100 * med('dtrain', c, 'io_share'):>5.1f}%"
    print(line)
print("\nimages/s: median over repeats of warm steady-state steps; ratio = dtrain / PyTorch;")
print("dtrain T_C-only: minibatch / t_compute_s (dtrain without its HDF5 read + normalise); io: that share.")
EOF
