#!/usr/bin/env bash
# bench/cluster_real.sh — real training (LeNet-5 on Fashion-MNIST, real compute)
# on 2 and 4 emulated nodes of the 1gbe preset (scripts/emulated-cluster.sh),
# measured against the prediction of a profile that `dtrain tune` measured on
# the same emulated cluster (T_C on its nodes, the links by ping-pong). The
# cluster's nodes share this machine's cores, so the prediction is `dtrain
# report`'s "machine" placement (time sharing of the cores, the wait policy
# the run chose; docs/performance-model.md §3).
#
#   bench/cluster_real.sh [--out DIR] [--nodes "2 4"] [--steps 300] [--build build]
#
# Each row is predicted twice: "machine" (every rank shares this VM's cores, as
# they do here) and "cluster" (each rank on cores of its own, as on a real
# cluster: right here while ranks × threads ≤ cores). "exchange hidden" is the
# median comm_hidden_fraction of the steps (the part of the exchange that
# overlapped backward; the model credits none).
# Rows per node count G: allreduce (G workers, one per node) and ps (G workers
# + 1 server on a node of its own). Output: DIR/real.jsonl, DIR/real.md.
# Needs root and data/fashion-mnist-*.h5 (build/dtrain data fashion-mnist --out data).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=/tmp/dtrain-cluster-real NODES="2 4" STEPS=300 BUILD=$SRC/build
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: $0 [--out DIR] [--nodes \"2 4\"] [--steps N] [--build DIR]" >&2; exit 2 ;;
  esac
done
D=$BUILD/dtrain C=$SRC/scripts/emulated-cluster.sh PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mkdir -p "$OUT"
: > "$OUT/real.jsonl"
DATA=$OUT/data
[ -f "$DATA/fashion-mnist-train.h5" ] || "$D" data fashion-mnist --out "$DATA" > /dev/null
NAME=rl$((RANDOM % 10000))
trap '"$C" down --name "$NAME" > /dev/null 2>&1 || true' EXIT
maxn=0; for g in $NODES; do [ "$g" -gt "$maxn" ] && maxn=$g; done
"$C" up --nodes $((maxn + 1)) --preset 1gbe --name "$NAME" > "$OUT/cluster.txt" 2>&1
mapfile -t IP < <(awk '{print $2}' /run/dtrain-cluster/$NAME/nodes)
crun() { "$C" mpirun --name "$NAME" -- --bind-to none -x OMP_NUM_THREADS=1 "$@"; }
common=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$DATA/fashion-mnist-train.h5" --test-data ""
        --minibatch 64 --threads 1 --lr-schedule constant --warmup-epochs 0)
for g in $NODES; do
  hosts=""; for ((i = 0; i < g; i++)); do hosts+="${IP[$i]}:1,"; done
  prof="$OUT/tune-$g.ini"; rm -f "$prof" "$prof.profile.json"
  crun -np "$g" --host "${hosts%,}" "$D" tune "${common[@]}" --nodes "$g" --workers-per-node 1 --candidates 64 \
    --out "$prof" > "$OUT/tune-$g.log" 2>&1
  for row in allreduce ps1; do
    m="$OUT/lenet-$g-$row.jsonl"; rm -f "$m"
    if [ $row = allreduce ]; then
      crun -np "$g" --host "${hosts%,}" "$D" train "${common[@]}" --mode allreduce --max-steps "$STEPS" \
        --log-interval 50 --metrics "$m" --save-params "" > "$OUT/lenet-$g-$row.log" 2>&1
    else
      crun -np $((g + 1)) --host "${hosts}${IP[$maxn]}:1" "$D" train "${common[@]}" --mode ps --ps 1 \
        --max-steps "$STEPS" --log-interval 50 --metrics "$m" --save-params "" > "$OUT/lenet-$g-$row.log" 2>&1
    fi
    "$D" report --metrics "$m" --profile "$prof.profile.json" --json > "$m.report.json"
    "$D" report --metrics "$m" --profile "$prof.profile.json" --placement cluster --json > "$m.report-cluster.json"
    $PY - "$m.report.json" "$m.report-cluster.json" "$m" "$g" "$row" >> "$OUT/real.jsonl" <<'PY'
import json, statistics, sys
g = json.load(open(sys.argv[1]))["groups"][0]
c = json.load(open(sys.argv[2]))["groups"][0]
steps = [json.loads(l) for l in open(sys.argv[3]) if '"kind":"step"' in l]
hidden = statistics.median(s.get("comm_hidden_fraction", 0) for s in steps[1:]) if len(steps) > 1 else 0
print(json.dumps({"nodes": int(sys.argv[4]), "row": sys.argv[5], "measured": g["measured"], "predicted": g["predicted"],
                  "predicted_cluster": c["predicted"], "comm_hidden_fraction": hidden,
                  "wait": g["wait"], "from_profile": g["from_profile"]}))
PY
  done
done
"$C" down --name "$NAME" > /dev/null
trap - EXIT
$PY - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/real.jsonl")]
lines = ["| nodes | row | wait | measured T_C ms | measured step ms | exchange hidden | predicted ms (machine) | error |"
         " predicted ms (cluster) | error |", "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    m, p, c = r["measured"], r["predicted"], r["predicted_cluster"]
    err = lambda q: f"{100 * (m['step_s'] / q['step_s'] - 1):+.1f}%"
    lines.append(f"| {r['nodes']} | {r['row']} | {r['wait']} | {1e3 * m['t_c_s']:.2f} | {1e3 * m['step_s']:.2f} | "
                 f"{100 * r['comm_hidden_fraction']:.0f}% | {1e3 * p['step_s']:.2f} | {err(p)} | {1e3 * c['step_s']:.2f} | "
                 f"{err(c)} |")
open(f"{sys.argv[1]}/real.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
