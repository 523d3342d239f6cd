#!/usr/bin/env bash
# bench/whatif_tables.sh — the what-if tables of docs/performance-model.md §5:
# `dtrain tune` with T_C given (--t-c-ms, no profiling) for AlexNet and
# ResNet-50 on 16 nodes × 4 workers over four network links, printed as
# Markdown from the cluster tables the tuner writes into OUT.profile.json
# (engine/predict.cpp — the same numbers as its printed table), G = 1, 2, 4 … 64.
# usage: bench/whatif_tables.sh OUTDIR   (seconds; builds two 16-image synthetic sets)
set -euo pipefail
B=${DTRAIN:-build/dtrain}
O=${1:?usage: $0 OUTDIR}
mkdir -p "$O"
"$B" data synth --shape 227x227x3 --n 16 --classes 1000 --out "$O/synth227.h5" --overwrite true > /dev/null
"$B" data synth --shape 224x224x3 --n 16 --classes 1000 --out "$O/synth224.h5" --overwrite true > /dev/null
links=("1 1 GbE" "10 10 GbE" "56 56 Gb/s IB" "100 100 Gb/s IB")
run() {  # model data minibatch t_c_ms memory_gb
  for l in "${links[@]}"; do
    gbps=${l%% *}
    "$B" tune --model "$1" --train-data "$O/$2" --minibatch "$3" --candidates "$3" --t-c-ms "$4" \
      --device-memory-gb "$5" --nodes 16 --workers-per-node 4 --link-gbps "$gbps" --intra-gbps 80 \
      --latency-us 2 --out "$O/$1-$gbps.ini" > "$O/$1-$gbps.log"
  done
}
run alexnet synth227.h5 128 51.2 16
run resnet50 synth224.h5 64 278 24
/usr/bin/python3 - "$O" "${links[@]}" <<'PY'
import json, sys
out, links = sys.argv[1], sys.argv[2:]
for model, title in (("alexnet", "AlexNet (BVLC)"), ("resnet50", "ResNet-50")):
    rows = []
    for l in links:
        gbps, name = l.split(" ", 1)
        p = json.load(open(f"{out}/{model}-{gbps}.ini.profile.json"))
        t = p["tables"]["cluster"]
        if not rows:
            pt = p["points"][0]
            print(f"\n#### {title}, P = {p['param_bytes'] / 1e6:.1f} MB, X_mini = {t['minibatch']}, "
                  f"T_C = {1e3 * pt['t_c_s']:.4g} ms\n")
            print("| link | G | nodes | ps: N_ps | ps: T_O ms | ps: S | hybrid: N_ps | hybrid: T_O ms | hybrid: S "
                  "| allreduce: T_O ms | allreduce: S | BytePS ms |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in t["rows"]:
            if r["workers"] not in (1, 2, 4, 8, 16, 32, 64):
                continue
            ps, hy, ar = r["ps"], r["hybrid"], r["allreduce"]
            print(f"| {name} | {r['workers']} | {r['nodes']} | {ps['servers']} | {1e3 * ps['t_o_s']:.2f} | "
                  f"{ps['speedup']:.2f} | {hy['servers']} | {1e3 * hy['t_o_s']:.2f} | {hy['speedup']:.2f} | "
                  f"{1e3 * ar['t_o_s']:.2f} | {ar['speedup']:.2f} | {1e3 * r['byteps_s']:.2f} |")
        rows.append(name)
PY
