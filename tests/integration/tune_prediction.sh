#!/usr/bin/env bash
# One model, one answer (issue 11, item 6): for the same run shape, `dtrain
# tune`'s table for this machine, `dtrain report` and slurm/report give the
# same predicted step time and speedup — equal as numbers, since all three come
# from engine/predict.cpp (slurm/report through `dtrain report --json`). Also:
# tune prints a table for a hypothetical cluster whose header says it is not
# this machine, with exposed communication (T_O > 0, S < G), and beside it the
# table for this machine; the tuned job states the same prediction.
# Quick: LeNet-5, one candidate, 2 tune ranks, 2 × 20 training steps.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
W="$WORK/tune_prediction"
rm -rf "$W" && mkdir -p "$W/sweep/tuned-n02x2" "$W/sweep/allreduce-n01x1"
job=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5"
     --test-data "$D/fashion-mnist-test.h5" --max-test-samples 64 --threads 1)
mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" tune "${job[@]}" --nodes 2 --workers-per-node 2 --modes ps,hybrid \
  --candidates 16 --profile-steps 4 --out "$W/t.ini" > "$W/tune.log"
cat "$W/tune.log"
P="$W/t.ini.profile.json"
grep -q "^Predicted on a hypothetical cluster, NOT this machine: 2 node(s) × 2 worker(s)" "$W/tune.log" ||
  fail "the cluster table's header does not say it is not this machine"
grep -q "^Predicted on this machine" "$W/tune.log" || fail "no table for this machine"
grep -q "^# Predicted (engine/predict.cpp): .* on the cluster; .* run here" "$W/t.ini" ||
  fail "the tuned job states no prediction"
np=$(sed -n 's/^# Run: mpirun -np \([0-9]*\) .*/\1/p' "$W/t.ini")
[ "$np" -ge 5 ] || fail "tuned job for 2 × 2 workers runs on $np ranks"

# The tuned job as it is (4 workers in 2 virtual nodes + servers), and one worker alone.
mpirun -np "$np" --oversubscribe --bind-to none "$DTRAIN" train --job "$W/t.ini" --max-steps 20 \
  --log-interval 5 --metrics "$W/sweep/tuned-n02x2/metrics.jsonl" > "$W/four.log"
"$DTRAIN" train --job "$W/t.ini" --mode allreduce --ps 0 --ranks-per-node 0 --max-steps 20 --log-interval 5 \
  --metrics "$W/sweep/allreduce-n01x1/metrics.jsonl" > "$W/one.log"
# A sweep folder as slurm/sweep writes it, for slurm/report (one run per point
# folder, made by mpirun: --no-sacct counts the runs whose run record says done).
mode=$(sed -n 's/^mode = //p' "$W/t.ini") ps=$(sed -n 's/^ps = //p' "$W/t.ini")
echo "{\"name\": \"tuned-n02x2\", \"mode\": \"$mode\", \"nodes\": 2, \"workers_per_node\": 2, \"workers\": 4, \"ps\": $ps, \"world\": $np, \"minibatch\": 16}" \
  > "$W/sweep/tuned-n02x2/point.json"
echo '{"name": "allreduce-n01x1", "mode": "allreduce", "nodes": 1, "workers_per_node": 1, "workers": 1, "ps": 0, "world": 1, "minibatch": 16}' \
  > "$W/sweep/allreduce-n01x1/point.json"

# report and slurm/report predict with the load the tune table assumed (--background profile).
"$DTRAIN" report --profile "$P" --background profile --metrics "$W"/sweep/*/metrics.jsonl | tee "$W/report.txt"
"$DTRAIN" report --json --profile "$P" --background profile --metrics "$W"/sweep/*/metrics.jsonl > "$W/report.json"
/usr/bin/python3 "$SRC/slurm/report" "$W/sweep" --no-sacct --dtrain "$DTRAIN" --profile "$P" --background profile ||
  fail "slurm/report failed"
# sacct that gives no job's state (the Slurm of the sweep is gone): nothing is
# written and an earlier report.csv stays (it was replaced by a table of dropped jobs).
mkdir -p "$W/gone/p1/77"
echo '{"name": "p1", "mode": "allreduce", "nodes": 1, "workers_per_node": 1, "workers": 1, "ps": 0, "world": 1, "minibatch": 16, "job_ids": [77]}' \
  > "$W/gone/p1/point.json"
echo keep > "$W/gone/report.csv"
if out=$(/usr/bin/python3 "$SRC/slurm/report" "$W/gone" --sacct /bin/false --sacct-wait 0 2>&1); then
  fail "slurm/report without job states exited 0: $out"
fi
grep -q "nothing written .*--no-sacct" <<<"$out" || fail "slurm/report without job states did not say so: $out"
[ "$(cat "$W/gone/report.csv")" = keep ] || fail "slurm/report without job states replaced report.csv"
echo "ok: slurm/report without any job state writes nothing and points at --no-sacct"

/usr/bin/python3 - "$W" "$mode" <<'PY' || fail "tune, report and slurm/report disagree"
import csv, json, sys
w, mode = sys.argv[1:3]
prof = json.load(open(f"{w}/t.ini.profile.json"))
cluster, machine = prof["tables"]["cluster"], prof["tables"]["machine"]
row = next(r for r in machine["rows"] if r["workers"] == 4)[mode]   # tune's table, this machine
alone = next(r for r in machine["rows"] if r["workers"] == 1)["allreduce"]
rep = json.load(open(f"{w}/report.json"))
group = {g["workers"]: g for g in rep["groups"]}
g4, g1 = group[4], group[1]
assert g4["from_profile"] and g1["from_profile"], rep
# The same shape: mode, workers, servers, nodes of 2, threads, wait policy.
for k in ("mode", "workers", "servers", "ranks_per_node", "threads", "wait"):
    assert g4[k] == row[k], (k, g4[k], row[k])
csvrows = {r["config"]: r for r in csv.DictReader(open(f"{w}/sweep/report.csv"))}
c4, c1 = csvrows["tuned-n02x2"], csvrows["allreduce-n01x1"]
# One number, one code path: equal, not close.
for key, ck in (("step_s", "predicted_step_time_s"), ("t_c_s", "predicted_t_c_s"), ("t_o_s", "predicted_t_o_s"),
                ("speedup", "predicted_speedup")):
    t, r, s = row[key], g4["predicted"][key], float(c4[ck])
    print(f"4 workers {key}: tune {t!r}  report {r!r}  slurm/report {s!r}")
    assert t == r == s, (key, t, r, s)
    t, r, s = alone[key], g1["predicted"][key], float(c1[ck])
    assert t == r == s, ("1 worker", key, t, r, s)
assert c4["predicted_from"].startswith("dtrain report (profile"), c4["predicted_from"]
# tune's printed table shows the same number (ms, 2 decimals) in the mode's step column.
col = {"ps": 4, "hybrid": 8, "allreduce": 11}[mode]
text = open(f"{w}/tune.log").read().split("Predicted on this machine")[1]
line = next(l for l in text.splitlines() if l.split()[:2] == ["4", "2"])
cells = [c for c in line.replace("|", " ").split()]
assert cells[col] == f"{1e3 * row['step_s']:.2f}", (line, row)
# The cluster table: the exchange is exposed (the old one printed T_O = 0, S = G everywhere).
crow = next(r for r in cluster["rows"] if r["workers"] == 4)[mode]
assert crow["t_o_s"] > 0 and crow["speedup"] < 4, crow
assert crow["wait"] == "spin" and row["wait"] == "sleep", (crow, row)
print("ok: tune's table, dtrain report and slurm/report predict", row["step_s"], "s per step,", "S =", row["speedup"])
PY
grep -qE "tuned-n02x2|metrics.jsonl" "$W/report.txt" || fail "report printed no rows"
# --gpus-per-node stays an alias; disagreeing with --workers-per-node is a usage error.
expect_exit 2 "disagree" -- "$DTRAIN" tune "${job[@]}" --workers-per-node 2 --gpus-per-node 3 --out "$W/x.ini"
echo "tune_prediction: ok"
