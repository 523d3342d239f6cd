#!/usr/bin/env bash
# The compute stand-in (--compute-stand-in-ms, engine/compute_stand_in.hpp,
# issue 16): LeNet-5 runs whose steps spend 50 ms instead of forward/backward.
# (1) 1 rank: every step record, the epoch and run records and the progress
#     line, the final line, the saved parameters' /compute_stand_in attribute
#     (and, in (2), the timeline's otherData) say so; T_C is never below 50 ms, its median over the steps is
#     within 5% of 50 ms, every step but at most one within 10% (a step woken
#     late on a loaded machine), none beyond 30%.
# (2) 2 workers + 1 server (ps) and 2 workers (allreduce): the exchange got the
#     whole arena every step (grads_ready_bytes = 4 × 61,706), and the final
#     parameters are finite and equal those of the 1-rank run (the summed
#     gradient is the stand-in's constant on every rank count, so every slice
#     the servers own got the same update); they differ from a run one step
#     shorter (the updates were applied). dtrain report mentions the stand-in.
# (3) with --test-data or --checkpoint-dir: exit 2 naming both options.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
W="$SCRATCH"
P=61706  # lenet5's parameters (layers/models.hpp)
common=(--model lenet5 --train-data "$D/fashion-mnist-train.h5" --test-data "" --max-train-samples 2000
        --threads 1 --loader-threads 1 --lr 1 --lr-schedule constant --momentum 0.9 --log-interval 1
        --compute-stand-in-ms 50)
run() {  # run NP NAME args...
  local np=$1 name=$2; shift 2
  dt_mpirun "$np" "$DTRAIN" train "${common[@]}" --save-params "$W/$name.h5" --metrics "$W/$name.jsonl" "$@" \
    | tee "$W/$name.out"
}
check_records() {  # check_records METRICS: every record's flag, the steps' T_C and loss
  "$(dt_python)" - "$@" <<'PY'
import json, statistics, sys
path, x = sys.argv[1], 50.0
recs = [json.loads(l) for l in open(path) if l.strip()]
steps = [r for r in recs if r["kind"] == "step"]
assert steps, f"{path}: no step records"
for k in ("step", "epoch", "run"):
    assert any(r["kind"] == k for r in recs), f"{path}: no {k} record"
for r in recs:
    if r["kind"] in ("step", "epoch", "run"):
        assert r.get("compute_stand_in_ms") == x, f"{path}: {r['kind']} record without compute_stand_in_ms: {r}"
tc = [1e3 * r["t_compute_s"] for r in steps]
med = statistics.median(tc)
print(f"{path}: T_C per step (ms): " + " ".join(f"{t:.2f}" for t in tc) + f"; median {med:.3f} ({100 * (med - x) / x:+.2f}%)")
assert min(tc) >= x - 0.1, f"{path}: a step shorter than the stand-in: {tc}"
assert abs(med - x) <= 0.05 * x, f"{path}: median T_C {med:.3f} ms not within 5% of {x}"
assert max(tc) <= 1.3 * x, f"{path}: a step beyond 30%: {tc}"
assert all(r["loss"] == 0 for r in steps), f"{path}: a stand-in loss is not 0"
PY
}

# (1) One rank.
run 1 one --max-steps 5
check_records "$W/one.jsonl" || fail "1-rank stand-in records"
grep -qF "(compute stand-in 50 ms)" "$W/one.out" || fail "the progress line does not name the stand-in"
grep -qF "compute stand-in 50 ms per step" "$W/one.out" || fail "the start-up line does not name the stand-in"
grep -qF "; COMPUTE STAND-IN (50 ms per step, no model trained" "$W/one.out" || fail "the final line does not name the stand-in"
h5dump -A "$W/one.h5" | grep -qF "these parameters were updated with stand-in gradients" ||
  fail "the saved parameters do not say they come from a stand-in run: $(h5dump -A "$W/one.h5" | head -20)"
echo "ok: the final line and the saved parameters (attribute /compute_stand_in) name the stand-in"

# (2) Two workers and a server; two workers under allreduce.
run 3 ps --max-steps 5 --mode ps --ps 1 --minibatch 32 --timeline "$W/ps-timeline.json"
run 2 allreduce --max-steps 5 --minibatch 32
for m in ps allreduce; do
  check_records "$W/$m.jsonl" || fail "$m stand-in records"
  b=$(json_field "$W/$m.jsonl" step grads_ready_bytes)
  "$(dt_python)" -c "import sys; sys.exit(0 if float('$b') == 4 * $P else 1)" ||
    fail "$m: $b gradient bytes per step handed to the exchange, wanted the whole arena $((4 * P))"
  echo "ok: $m handed the exchange the whole arena ($b bytes) every step"
  "$COMPARE" "$W/one.h5" "$W/$m.h5" 1e-6 || fail "$m: parameters differ from the 1-rank stand-in run (or are not finite)"
done
"$(dt_python)" - "$W/ps-timeline.json" <<'PY' || fail "the stand-in run's timeline does not say it is one"
import json, sys
d = json.load(open(sys.argv[1]))["otherData"]
assert d.get("compute_stand_in_ms") == 50 and "emulation" in d.get("compute_stand_in", ""), d
print("ok: the timeline's otherData names the stand-in")
PY
run 1 short --max-steps 4
echo "(a difference is wanted here:)"
if "$COMPARE" "$W/one.h5" "$W/short.h5" 1e-3; then fail "5 and 4 stand-in steps end with the same parameters"; fi
echo "ok: the stand-in's updates were applied (5 and 4 steps differ)"
out=$("$DTRAIN" report --metrics "$W/ps.jsonl" --train-data "$D/fashion-mnist-train.h5" --profile-steps 2)
grep -qF "compute stand-in: $W/ps.jsonl: 50 ms per step" <<<"$out" || fail "dtrain report does not mention the stand-in: $out"
echo "ok: dtrain report names the stand-in run"

# (3) Refused combinations.
expect_exit 2 "option 'compute-stand-in-ms': 5 computes no forward pass, so option 'test-data'" -- \
  "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5" --compute-stand-in-ms 5
expect_exit 2 "so option 'checkpoint-dir'" -- \
  "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --test-data "" --checkpoint-dir "$W/ck" --compute-stand-in-ms 5
expect_exit 2 "option 'compute-stand-in-ms'" -- \
  "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --compute-stand-in-ms -3
[ ! -e runs ] || fail "a refused start made a run folder"
