#!/usr/bin/env bash
# bench/cluster_study.sh — the paper's scaling findings measured on an emulated
# cluster (scripts/emulated-cluster.sh): AlexNet (BVLC, 244 MB) and ResNet-50
# (102 MB) with the compute stand-in at the T_C that docs/performance-model.md §5
# assumes (a P100: AlexNet 51.2 ms at minibatch 128, ResNet-50 278 ms at 64), on
# the 1gbe and 10gbe presets: allreduce; ps with N_ps = 1, 2, 4; hybrid with 2
# workers per node and N_ps = 1, 2. Each row is measured next to the prediction
# of the profile `dtrain tune` writes for the same T_C and link
# (`dtrain report --placement cluster`), with the workers' local update T_U
# measured here (--t-u-ms -1: allreduce workers update on this machine's
# cores after the exchange, a stand-in step's only real compute).
#
#   bench/cluster_study.sh [--out DIR] [--presets "1gbe 10gbe"] [--models "alexnet resnet50"]
#                          [--rows "allreduce ps1 ps2 ps4 hybrid1 hybrid2"] [--append] [--report-only] [--steps 6] [--build build]
# (--rows: only those rows; --append: keep DIR/results.jsonl and add to it;
#  --report-only: run nothing, predict again from DIR's profiles and metrics
#  of an earlier study with this build's `dtrain report` — after a change to
#  the model, say.)
#
# Time dilation: a preset written PRESET/D (e.g. 10gbe/5) runs the preset
# D times slower: links at rate/D, the stand-in at D·T_C, the prediction made
# for the same (rate/D, D·T_C); the table divides both step times by D. In the
# model every term of a step scales by D (T_C, P/B), so the error and α are
# those of the undilated cluster, while the host's cores carry 1/D of the
# traffic (the time-dilation of network emulators: Gupta et al., "To Infinity
# and Beyond: Time-Warped Network Emulation", NSDI 2006). What does not dilate:
# the latency λ (µs here) and the CPU work of sums, copies and the update,
# which become D times smaller against the step (slightly optimistic).
#
# Layout: 4 worker nodes (node1..node4) and 4 server nodes (node5..node8), each
# a namespace with its own shaped link: every server has a link of its own, as
# the model assumes (B_ps = the link). allreduce and ps: one worker per worker
# node; hybrid: two. The servers are the last ranks (node5, node6, …).
# Links fed to the prediction: the preset's rate between nodes, and the
# latencies and the intra-node (shared memory) bandwidth measured by
# `dtrain bench comm --links` on the cluster (this kernel cannot add delay).
# Output: DIR/results.jsonl (one line per row), DIR/table.md, DIR/study.png,
# and each run's metrics and log. Needs root; ~15–25 min on 2 cores.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=/tmp/dtrain-cluster-study PRESETS="1gbe 10gbe" MODELS="alexnet resnet50" STEPS=6 BUILD=$SRC/build
ROWS="allreduce ps1 ps2 ps4 hybrid1 hybrid2" APPEND=0 REPORT_ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --presets) PRESETS=$2; shift 2 ;;  # 1gbe, 10gbe, ib-edr, or PRESET/D (dilated by D)
    --models) MODELS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
    --append) APPEND=1; shift ;;
    --report-only) REPORT_ONLY=1; shift ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: $0 [--out DIR] [--presets P] [--models M] [--rows R] [--append] [--report-only] [--steps N] [--build DIR]" >&2; exit 2 ;;
  esac
done
D=$BUILD/dtrain C=$SRC/scripts/emulated-cluster.sh PY=/usr/bin/python3
[ -x "$D" ] || { echo "no $D (scripts/build.sh)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
model_mb() { case $1 in alexnet) echo 128 ;; resnet50) echo 64 ;; esac; }
model_tc() { case $1 in alexnet) echo 51.2 ;; resnet50) echo 278 ;; esac; }
model_shape() { case $1 in alexnet) echo 227x227x3 ;; resnet50) echo 224x224x3 ;; esac; }
preset_gbps() { case $1 in 1gbe) echo 1 ;; 10gbe) echo 10 ;; ib-edr) echo 100 ;; esac; }
# Every argument is checked before anything runs (no cluster, no data, no output touched).
[ -n "$MODELS" ] && [ -n "$PRESETS" ] && [ -n "$ROWS" ] || { echo "--models, --presets and --rows must not be empty" >&2; exit 2; }
for model in $MODELS; do
  [ -n "$(model_mb "$model")" ] || { echo "model $model: not alexnet or resnet50" >&2; exit 2; }
done
for spec in $PRESETS; do
  p=${spec%%/*} d=1
  if [[ $spec == */* ]]; then d=${spec#*/}; fi
  [[ $d =~ ^[1-9][0-9]*$ ]] || { echo "preset $spec: the dilation after / must be a whole number ≥ 1" >&2; exit 2; }
  [ -n "$(preset_gbps "$p")" ] || { echo "preset $spec: not 1gbe, 10gbe or ib-edr" >&2; exit 2; }
done
for r in $ROWS; do
  [[ " allreduce ps1 ps2 ps4 hybrid1 hybrid2 " == *" $r "* ]] || { echo "row $r: not allreduce, ps1, ps2, ps4, hybrid1 or hybrid2" >&2; exit 2; }
done
[[ $STEPS =~ ^[1-9][0-9]*$ ]] || { echo "--steps $STEPS: a whole number ≥ 1" >&2; exit 2; }
if [ "$REPORT_ONLY" = 1 ]; then [ -d "$OUT" ] || { echo "--report-only: no study folder $OUT" >&2; exit 2; }; fi
mkdir -p "$OUT"
# Rows go to results.jsonl.new, which replaces results.jsonl at the end (a run with no row keeps the old one).
if [ "$APPEND" = 1 ] && [ -f "$OUT/results.jsonl" ]; then cp "$OUT/results.jsonl" "$OUT/results.jsonl.new"; else : > "$OUT/results.jsonl.new"; fi
NAME=st$((RANDOM % 10000))
trap '"$C" down --name "$NAME" > /dev/null 2>&1 || true' EXIT

for model in $MODELS; do
  [ "$REPORT_ONLY" = 0 ] || break  # the profiles and metrics exist; no data needed
  # 16 global batches of the hybrid rows' 8 workers (2,048 AlexNet / 1,024 ResNet-50 images).
  n=$((16 * $(model_mb $model)))
  [ -f "$OUT/$model.h5" ] && [ "$(h5ls "$OUT/$model.h5" | awk '/^labels/ {gsub(/[{}]/, "", $3); print $3}')" = "$n" ] ||
    "$D" data synth --shape "$(model_shape $model)" --n "$n" --classes 1000 --out "$OUT/$model.h5" --seed 1 \
      --overwrite true > /dev/null
done

for spec in $PRESETS; do
  preset=${spec%%/*} dil=1 tag=$preset
  if [[ $spec == */* ]]; then dil=${spec#*/} tag="$preset-dilated$dil"; fi
  [[ $dil =~ ^[1-9][0-9]*$ ]] || { echo "preset $spec: the dilation after / must be a whole number ≥ 1" >&2; exit 2; }
  [ -n "$(preset_gbps "$preset")" ] || { echo "preset $spec: not 1gbe, 10gbe or ib-edr" >&2; exit 2; }
  rate_mbit=$(( $(preset_gbps "$preset") * 1000 / dil ))
  if [ "$dil" = 1 ]; then up_link=(--preset "$preset"); else up_link=(--preset "$preset" --rate "${rate_mbit}mbit"); fi
  crun() { "$C" mpirun --name "$NAME" -- --bind-to none -x OMP_NUM_THREADS=1 "$@"; }
  if [ "$REPORT_ONLY" = 1 ]; then
    for f in "$OUT/links-inter-$tag.txt" "$OUT/links-intra-$tag.txt"; do
      [ -s "$f" ] || { echo "--report-only: no $f (run the study without it first)" >&2; exit 2; }
    done
    IP=(0 0 0 0 0 0 0 0)
  else
    "$C" up --nodes 8 "${up_link[@]}" --name "$NAME" > "$OUT/cluster-$tag.txt" 2>&1
    mapfile -t IP < <(awk '{print $2}' /run/dtrain-cluster/$NAME/nodes)
    crun -np 2 --host "${IP[0]}:1,${IP[1]}:1" "$D" bench comm --links --max-mb 64 > "$OUT/links-inter-$tag.txt"
    crun -np 2 --host "${IP[0]}:2" "$D" bench comm --links --max-mb 64 > "$OUT/links-intra-$tag.txt"
  fi
  read -r lat_inter intra_gbps lat_intra meas_gbps < <($PY - "$OUT/links-inter-$tag.txt" "$OUT/links-intra-$tag.txt" <<'PY'
import json, sys
def rec(f): return [json.loads(l) for l in open(f) if l.startswith('{"kind":"links"')][0]
e, a = rec(sys.argv[1])["inter"], rec(sys.argv[2])["intra"]
print(e["latency_us"], a["gbps"], a["latency_us"], e["gbps"])
PY
)
  gbps=$($PY -c "print($(preset_gbps "$preset") / $dil)")
  echo "== $tag: shaped $gbps Gb/s, measured between nodes $meas_gbps Gb/s (latency $lat_inter us); within a node $intra_gbps Gb/s"
  for model in $MODELS; do
    mb=$(model_mb $model) tc=$($PY -c "print($(model_tc $model) * $dil)")
    prof="$OUT/$model-$tag.ini"
    if [ "$REPORT_ONLY" = 1 ]; then
      [ -s "$prof.profile.json" ] || { echo "--report-only: no $prof.profile.json" >&2; exit 2; }
    else
    rm -f "$prof" "$prof.profile.json"
    # On the 4 worker nodes: T_U is measured by the 4 ranks at once (--t-u-ms -1), as the
    # allreduce workers update at once after the exchange, on the cores they share here.
    crun -np 4 --host "${IP[0]}:1,${IP[1]}:1,${IP[2]}:1,${IP[3]}:1" "$D" tune --model "$model" --train-data "$OUT/$model.h5" --minibatch "$mb" --candidates "$mb" --t-c-ms "$tc" --t-u-ms -1 \
      --link-gbps "$gbps" --intra-gbps "$intra_gbps" --latency-us "$lat_inter" --nodes 4 --workers-per-node 1 \
      --threads 1 --out "$prof" > "$OUT/tune-$model-$tag.log" 2>&1
    fi
    row() {  # LABEL MODE NPS WORKERS_PER_NODE
      local label=$1 mode=$2 nps=$3 k=$4 hosts="" i
      [[ " $ROWS " == *" $label "* ]] || return 0
      for i in 0 1 2 3; do hosts+="${IP[$i]}:$k,"; done
      for ((i = 0; i < nps; i++)); do hosts+="${IP[$((4 + i))]}:1,"; done
      local np=$((4 * k + nps)) m="$OUT/$model-$tag-$label.jsonl"
      local t0=$SECONDS
      if [ "$REPORT_ONLY" = 1 ]; then
        [ -s "$m" ] || { echo "  $label: no $m (skipped)"; return 0; }
      else
      rm -f "$m"
      crun -np "$np" --host "${hosts%,}" "$D" train --model "$model" --train-data "$OUT/$model.h5" --test-data "" \
        --minibatch "$mb" --compute-stand-in-ms "$tc" --mode "$mode" --ps "$nps" --max-steps "$STEPS" \
        --log-interval 1 --threads 1 --loader-threads 1 --metrics "$m" --save-params "" \
        > "$OUT/$model-$tag-$label.log" 2>&1 || { echo "  $label: failed ($(tail -2 "$OUT/$model-$tag-$label.log"))"; return 0; }
      fi
      "$D" report --metrics "$m" --profile "$prof.profile.json" --placement cluster --json > "$m.report.json"
      $PY - "$m.report.json" "$model" "$preset" "$label" "$mode" "$nps" "$k" "$gbps" "$meas_gbps" "$tc" \
        "$((SECONDS - t0))" "$dil" >> "$OUT/results.jsonl.new" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["groups"][0]
model, preset, label, mode, nps, k, gbps, meas, tc, wall, dil = sys.argv[2:]
d = int(dil)
# Dilated rows: the step times (and T_C) divided by the dilation, the link figures multiplied back.
for part in (g["measured"], g["predicted"]):
    for key in ("step_s", "t_c_s", "t_o_s"):
        if key in part: part[key] /= d
print(json.dumps({"model": model, "preset": preset, "dilation": d, "row": label, "mode": mode, "servers": int(nps),
                  "workers": 4 * int(k), "workers_per_node": int(k), "link_gbps": float(gbps) * d,
                  "link_measured_gbps": float(meas) * d, "t_c_ms": float(tc) / d, "wall_s": int(wall),
                  "measured": g["measured"], "predicted": g["predicted"]}))
PY
      tail -1 "$OUT/results.jsonl.new" | $PY -c "import json,sys; r=json.loads(sys.stdin.read()); m,p=r['measured'],r['predicted']; print(f\"  {r['model']:8s} {r['row']:10s} step {1e3*m['step_s']:8.1f} ms, predicted {1e3*p['step_s']:8.1f} ms ({100*(m['step_s']/p['step_s']-1):+.1f}%)\")"
    }
    row allreduce allreduce 0 1
    row ps1 ps 1 1
    row ps2 ps 2 1
    row ps4 ps 4 1
    row hybrid1 hybrid 1 2
    row hybrid2 hybrid 2 2
  done
  [ "$REPORT_ONLY" = 1 ] || "$C" down --name "$NAME" > /dev/null
done
trap - EXIT
if [ ! -s "$OUT/results.jsonl.new" ]; then
  rm -f "$OUT/results.jsonl.new"
  echo "no row was measured or found (see the lines above); $OUT/results.jsonl is unchanged" >&2
  exit 1
fi
mv "$OUT/results.jsonl.new" "$OUT/results.jsonl"

$PY - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl")]
def link(r):  # the preset, and how it was run when dilated
    d = r.get("dilation", 1)
    return r["preset"] + (f", dilated ×{d}" if d > 1 else "")
lines = ["| model | link | row | workers | N_ps | measured step ms | predicted ms | error | measured α | predicted α |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    m, p = r["measured"], r["predicted"]
    # α against one worker alone: T_C (the stand-in) / step, the weak-scaling efficiency S/G.
    am, ap = r["t_c_ms"] / 1e3 / m["step_s"], r["t_c_ms"] / 1e3 / p["step_s"]
    lines.append(f"| {r['model']} | {link(r)} ({r['link_measured_gbps']:.2f} Gb/s measured) | {r['row']} | "
                 f"{r['workers']} | {r['servers']} | {1e3 * m['step_s']:.0f} | {1e3 * p['step_s']:.0f} | "
                 f"{100 * (m['step_s'] / p['step_s'] - 1):+.1f}% | {am:.3f} | {ap:.3f} |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = sorted({(r["model"], link(r)) for r in rows})
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 4), squeeze=False)
    for ax, (model, preset) in zip(axes[0], keys):
        rs = [r for r in rows if r["model"] == model and link(r) == preset]
        x = range(len(rs))
        ax.bar([i - 0.2 for i in x], [1e3 * r["measured"]["step_s"] for r in rs], 0.4, label="measured")
        ax.bar([i + 0.2 for i in x], [1e3 * r["predicted"]["step_s"] for r in rs], 0.4, label="predicted")
        ax.set_xticks(list(x), [r["row"] for r in rs], rotation=30)
        ax.set_title(f"{model}, {preset}")
        ax.set_ylabel("step time, ms")
        ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/study.png", dpi=110)
    print(f"plot: {out}/study.png")
except ImportError:
    print("no matplotlib (python3-matplotlib): no plot")
PY
