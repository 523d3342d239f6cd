#!/usr/bin/env bash
# bench/vs_pytorch.sh — dtrain vs PyTorch, side by side, on this machine's CPU.
#
# Trains the same network with the same minibatch and thread count in dtrain and
# in PyTorch (bench/torch_train.py), alternating the two (and the order) over a few
# repeats, and prints the median images/s of each and the ratio dtrain/PyTorch:
#   lenet5       minibatch 64, 1 and 2 threads (real Fashion-MNIST)
#   alexnet-owt  minibatch 16, 2 threads (synthetic 224×224×3, 1000 classes)
#   resnet50     minibatch 16, 2 threads (synthetic 224×224×3, 1000 classes)
# each in fp32 and in bf16 (dtrain --precision bf16; PyTorch's forward and loss
# in torch.autocast("cpu", dtype=torch.bfloat16); on a CPU where dtrain refuses
# bf16, no AVX512-BF16 or AMX, the bf16 rows are left out, saying why). Every row also shows the
# GFLOP/s each engine reached (the model's training FLOPs per image, 3 × the
# forward FLOPs `dtrain model` counts, × images/s) next to this machine's GEMM
# peak in that precision at that thread count (`dtrain bench compute
# --peak-only`: oneDNN matmul 2048³), and for bf16 rows dtrain's bf16/fp32 ratio.
# What is timed (see bench/README.md): warm steady-state steps only. dtrain: its
# own JSONL images_per_s of every log interval after the warm-up ones, combined as
# Σ images / Σ seconds; PyTorch: per-step perf_counter after the same number of
# warm-up steps. Both include their per-step input work (dtrain: HDF5 read +
# normalise; PyTorch: LeNet's in-memory gather + normalise, none for 224 models).
#
# --before OLD/dtrain adds an earlier dtrain build to every fp32 row, run in the
# same interleaved order (a before/after table from one run; the old binary
# gets no --precision option, so bf16 rows have no "before").
#
# usage: bench/vs_pytorch.sh [--dtrain build/dtrain] [--before OLD/dtrain] [--python /usr/bin/python3]...
#                            [--repeats 3] [--models lenet5,alexnet-owt,resnet50]
#                            [--precisions fp32,bf16] [--workdir /tmp/dtrain-bench] [--quick]
#   --python may be given several times: one PyTorch peer per interpreter
#   (default: Debian's /usr/bin/python3 with python3-torch 1.13).
#   --quick: fewer steps and 1 repeat unless --repeats is given (a smoke run, not a measurement).
# Not part of ctest. Needs python3-torch, python3-torchvision and python3-h5py
# (DTRAIN_BENCH_DEPS=1 scripts/setup-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

dtrain=build/dtrain
before=""
pythons=()
repeats=3
models=lenet5,alexnet-owt,resnet50
precisions=fp32,bf16
workdir=${TMPDIR:-/tmp}/dtrain-bench
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dtrain) dtrain=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --python) pythons+=("$2"); shift 2 ;;
    --repeats) repeats=$2; repeats_set=1; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "vs_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#pythons[@]} -eq 0 ] && pythons=(/usr/bin/python3)
[ $quick = 1 ] && [ -z "${repeats_set:-}" ] && repeats=1  # --quick: 1 repeat unless --repeats says otherwise
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "vs_pytorch: --repeats '$repeats': expected a whole number >= 1" >&2; exit 2; }
[ -x "$dtrain" ] || { echo "vs_pytorch: $dtrain not found; build it (scripts/build.sh)" >&2; exit 2; }
[ -z "$before" ] || [ -x "$before" ] || { echo "vs_pytorch: --before $before is not an executable" >&2; exit 2; }
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

configs=()  # model:minibatch:threads:precision
IFS=, read -r -a wanted <<<"$models"
IFS=, read -r -a precs <<<"$precisions"
for p in "${precs[@]}"; do
  case "$p" in fp32|bf16) ;; *) echo "vs_pytorch: unknown precision '$p' (fp32, bf16)" >&2; exit 2 ;; esac
done
for m in "${wanted[@]}"; do
  for p in "${precs[@]}"; do
    case "$m" in
      lenet5) configs+=("lenet5:64:1:$p" "lenet5:64:2:$p") ;;
      alexnet-owt|resnet50) configs+=("$m:16:2:$p") ;;
      *) echo "vs_pytorch: unknown model '$m'" >&2; exit 2 ;;
    esac
  done
done

# The yardsticks: forward GFLOPs per image of each model, the GEMM peak per (precision, threads).
facts=$workdir/facts.jsonl
: >"$facts"
for m in "${wanted[@]}"; do
  gf=$("$dtrain" model --name "$m" --minibatch 1 | sed -n 's/.*, \([0-9.e+-]*\) GFLOPs forward per minibatch of 1$/\1/p')
  echo "{\"kind\": \"flops\", \"model\": \"$m\", \"forward_gflop\": $gf}" >>"$facts"
done
# A CPU without bf16 (dtrain refuses it, exit 2): the bf16 rows are left out, saying why.
if [[ " ${precs[*]} " == *" bf16 "* ]] &&
   ! why=$("$dtrain" bench compute --peak-only --precision bf16 --threads 1 --json "$facts" 2>&1 >/dev/null); then
  echo "vs_pytorch: no bf16 rows: $why" >&2
  kept=()
  for c in "${configs[@]}"; do [[ "$c" == *:bf16 ]] || kept+=("$c"); done
  configs=("${kept[@]}")
  [ ${#configs[@]} -gt 0 ] || { echo "vs_pytorch: nothing left to run" >&2; exit 2; }
fi
for c in "${configs[@]}"; do
  IFS=: read -r _ _ t p <<<"$c"
  grep -q "\"precision\":\"$p\",\"threads\":$t}" "$facts" ||
    OMP_NUM_THREADS=$t "$dtrain" bench compute --peak-only --precision "$p" --threads "$t" --json "$facts" >/dev/null
done

# One JSON line per run into $results: {"engine", "config", "images_per_s", ...}.
run_dtrain() {  # model b t precision [binary engine-label]
  local model=$1 b=$2 t=$3 p=$4 bin=${5:-$dtrain} engine=${6:-dtrain} data interval warm total m=$workdir/dtrain-metrics.jsonl
  local prec=(--precision "$p")
  [ "$engine" = dtrain ] || prec=()  # an older build without --precision: fp32
  if [ "$model" = lenet5 ]; then
    data=$fashion interval=$lenet_interval warm=1 total=$((lenet_interval + lenet_measured))
    norm=(--mean $mean --std $std)
  else
    data=$synth interval=1 warm=$big_warmup total=$((big_warmup + big_measured)) norm=()
  fi
  rm -f "$m"
  OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$bin" train --model "$model" --train-data "$data" \
    --test-data "" --minibatch "$b" --threads "$t" "${prec[@]}" --max-steps "$total" --log-interval "$interval" \
    --momentum 0.9 --lr 0.01 "${norm[@]}" --metrics "$m" --save-params "" >"$workdir/dtrain.log" 2>&1 ||
    { cat "$workdir/dtrain.log" >&2; exit 1; }
  /usr/bin/python3 - "$m" "$warm" "$b" "$model:$b:$t:$p" "$engine" >>"$results" <<'EOF'
import json, sys
path, warm, b, config, engine = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
steps = [r for r in map(json.loads, open(path)) if r.get("kind") == "step"]
prev = steps[warm - 1]["step"] if warm > 0 else 0
images = seconds = compute = io = 0.0
for r in steps[warm:]:
    n = r["step"] - prev; prev = r["step"]
    images += n * b; seconds += n * b / r["images_per_s"]
    compute += n * r["t_compute_s"]; io += n * r["t_io_wait_s"]
print(json.dumps({"engine": engine, "config": config, "images_per_s": images / seconds,
                  "compute_images_per_s": images / compute, "io_share": io / seconds}))
EOF
}

run_torch() {  # python model b t precision
  local py=$1 model=$2 b=$3 t=$4 p=$5 warm steps out
  if [ "$model" = lenet5 ]; then warm=$lenet_interval steps=$lenet_measured
  else warm=$big_warmup steps=$big_measured; fi
  out=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$py" bench/torch_train.py --model "$model" \
        --minibatch "$b" --threads "$t" --precision "$p" --warmup "$warm" --steps "$steps" --data "$fashion" \
        --mean $mean --std $std --json /dev/stdout | tail -n 1)
  /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]);
print(json.dumps({"engine": sys.argv[2], "config": sys.argv[3], "images_per_s": r["images_per_s"],
                  "torch": r["torch"]}))' "$out" "$py" "$model:$b:$t:$p" >>"$results"
}

echo "vs_pytorch: $(nproc) cores, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $repeats repeat(s), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$repeats"); do
  for c in "${configs[@]}"; do
    IFS=: read -r model b t p <<<"$c"
    echo "  repeat $rep: $model minibatch $b threads $t $p"
    run_before() { [ -z "$before" ] || [ "$p" != fp32 ] || run_dtrain "$model" "$b" "$t" "$p" "$before" dtrain-before; }
    if [ $((rep % 2)) = 1 ]; then
      run_dtrain "$model" "$b" "$t" "$p"
      run_before
      for py in "${pythons[@]}"; do run_torch "$py" "$model" "$b" "$t" "$p"; done
    else
      for py in "${pythons[@]}"; do run_torch "$py" "$model" "$b" "$t" "$p"; done
      run_before
      run_dtrain "$model" "$b" "$t" "$p"
    fi
  done
done
echo "vs_pytorch: done, load: $(cut -d' ' -f1-3 /proc/loadavg); raw runs in $results"
echo

/usr/bin/python3 - "$results" "$facts" "${pythons[@]}" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
facts = [json.loads(l) for l in open(sys.argv[2])]
peers = sys.argv[3:]
fwd = {f["model"]: f["forward_gflop"] for f in facts if f["kind"] == "flops"}
peak = {(f["precision"], f["threads"]): f["gemm_peak_gflops"] for f in facts if f["kind"] == "gemm_peak"}
version = {p: next((r["torch"] for r in rows if r["engine"] == p), "?") for p in peers}
configs = list(dict.fromkeys(r["config"] for r in rows))
def med(engine, config, key="images_per_s"):
    v = [r[key] for r in rows if r["engine"] == engine and r["config"] == config]
    return statistics.median(v) if v else float("nan")
has_before = any(r["engine"] == "dtrain-before" for r in rows)
head = f"{'config':<34}"
if has_before:
    head += f"{'before img/s':>13}"
head += f"{'dtrain img/s':>13}{'GFLOP/s':>9}{'%peak':>7}"
for p in peers:
    head += f"{'torch ' + version[p]:>22}{'GFLOP/s':>9}{'ratio':>7}"
head += f"{'bf16/fp32':>10}{'T_C-only':>10}{'io':>6}"
print(head)
for c in configs:
    model, b, t, prec = c.split(":")
    d = med("dtrain", c)
    train = 3 * fwd[model]  # GFLOP per image
    pk = peak.get((prec, int(t)), float("nan"))
    line = f"{model + ' mb ' + b + ' threads ' + t + ' ' + prec:<34}"
    if has_before:
        line += f"{med('dtrain-before', c):>13.1f}"
    line += f"{d:>13.1f}{d * train:>9.1f}{100 * d * train / pk:>6.0f}%"
    for p in peers:
        tv = med(p, c)
        line += f"{tv:>22.1f}{tv * train:>9.1f}{d / tv:>7.2f}"
    f32 = med("dtrain", ":".join([model, b, t, "fp32"]))
    line += f"{d / f32:>10.2f}" if prec == "bf16" else f"{'':>10}"
    line += f"{med('dtrain', c, 'compute_images_per_s'):>10.1f}{100 * med('dtrain', c, 'io_share'):>5.1f}%"
    print(line)
for (prec, t), v in sorted(peak.items()):
    print(f"GEMM peak {prec}, {t} thread(s): {v:.0f} GFLOP/s (oneDNN matmul 2048^3)")
print("\nimages/s: median over repeats of warm steady-state steps; ratio = dtrain / PyTorch; GFLOP/s = images/s x")
print("3 x forward GFLOP per image (`dtrain model`); %peak: of the GEMM peak in that precision and thread count;")
print("bf16/fp32: dtrain's bf16 images/s over its fp32 images/s; T_C-only: minibatch / t_compute_s (dtrain without")
print("its HDF5 read + normalise); io: that share." + (" before: the --before build, same run." if has_before else ""))
EOF
