#!/usr/bin/env bash
# dtrain tune and dtrain report on LeNet-5 (quick: two small candidates, two
# steps each): the tuned job file exists and trains as is for 5 steps (one
# rank for a 1×1 cluster; mpirun with the printed rank count for 2×2), and
# dtrain report reads the produced metrics and prints the model's prediction.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
W="$WORK/tune"
rm -rf "$W" && mkdir -p "$W"
job=(--job "$SRC/jobs/fashion_lenet.ini" --train-data "$D/fashion-mnist-train.h5"
     --test-data "$D/fashion-mnist-test.h5" --max-test-samples 64 --threads 1)
mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" tune "${job[@]}" --nodes 1 --gpus-per-node 1 \
  --candidates 8,16 --profile-steps 2 --out "$W/tuned.ini" | tee "$W/tune.log"
[ -s "$W/tuned.ini" ] || fail "no tuned job file"
[ -s "$W/tuned.ini.profile.json" ] || fail "no profile"
grep -q "^minibatch = \(8\|16\)$" "$W/tuned.ini" || fail "tuned minibatch is not a candidate"
grep -q "chosen minibatch" "$W/tune.log" || fail "tune printed no choice"
# No output paths in the tuned job (the untuned job's metrics key is dropped): each
# run of it gets the trainer's own run folder; these runs name their metrics files.
! grep -qE "^(metrics|save-params) =" "$W/tuned.ini" || fail "the tuned job names output files"
# Numbers shortest round-trip, booleans true/false (core/format.hpp).
grep -qx "momentum = 0.9" "$W/tuned.ini" || fail "momentum not written shortest: $(grep '^momentum' "$W/tuned.ini")"
grep -qx "decay-bias-bn = false" "$W/tuned.ini" || fail "booleans not true/false"
! grep -qE "= [0-9.]*0000000[0-9]+$" "$W/tuned.ini" || fail "a number with float noise: $(grep -E '0000000[0-9]+$' "$W/tuned.ini")"
"$DTRAIN" train --job "$W/tuned.ini" --max-steps 5 --log-interval 2 --metrics "$W/one.jsonl"
grep -q '"kind":"run"' "$W/one.jsonl" || fail "no run record in the metrics"

# The profiler runs the trainer's device path: on cpu-staged (the CPU test double
# of a GPU's memory model) every kernel argument must be device memory.
"$DTRAIN" tune "${job[@]}" --device cpu-staged --nodes 1 --gpus-per-node 1 --candidates 8 \
  --profile-steps 2 --out "$W/staged.ini" > "$W/staged.log" || fail "tune on --device cpu-staged failed"
grep -q "^device = cpu-staged$" "$W/staged.ini" || fail "the tuned job lost --device"

# A 2-node × 2-worker cluster: ps or hybrid with servers; the file says how to launch it.
"$DTRAIN" tune "${job[@]}" --nodes 2 --workers-per-node 2 --link-gbps 1 --candidates 8,16 \
  --profile-steps 2 --modes ps,hybrid --out "$W/tuned4.ini" > "$W/tune4.log"
np=$(sed -n 's/^# Run: mpirun -np \([0-9]*\) .*/\1/p' "$W/tuned4.ini")
[ -n "$np" ] || fail "tuned4.ini names no rank count"
# The Run line names this dtrain by its path (a bare 'dtrain' is not on PATH after scripts/build.sh).
grep -qF "# Run: mpirun -np $np $(realpath "$DTRAIN") train --job $(realpath -s "$W/tuned4.ini")" "$W/tuned4.ini" \
  || fail "the Run line does not name this dtrain: $(grep '^# Run' "$W/tuned4.ini")"
grep -q "^mode = \(ps\|hybrid\)$" "$W/tuned4.ini" || fail "2×2 cluster tuned to neither ps nor hybrid"
mpirun -np "$np" --oversubscribe --bind-to none "$DTRAIN" train --job "$W/tuned4.ini" --max-steps 5 \
  --log-interval 2 --metrics "$W/four.jsonl"

# Both tune ranks profiled T_C in turn: two per-process figures, 2 × 2 per-step samples.
python3 - "$W/tuned.ini.profile.json" <<'PY' || fail "profile lacks per-process T_C samples"
import json, sys
p = json.load(open(sys.argv[1]))
pt = p["points"][0]
assert len(pt["t_c_process_s"]) == 2 and len(pt["t_c_samples_s"]) == 4, pt
assert 0 <= p["poll_cpu_fraction"] < 0.5 and p["poll_period_s"] > 0, p
PY
# A second run of the same configuration (its own parameters file: the tuned
# job names one, and an existing explicit output is refused).
"$DTRAIN" train --job "$W/tuned.ini" --max-steps 5 --log-interval 2 --metrics "$W/one2.jsonl" \
  --save-params "$W/one2.params.h5"
out=$("$DTRAIN" report --profile "$W/tuned.ini.profile.json" --metrics "$W/one.jsonl" "$W/one2.jsonl" "$W/four.jsonl")
echo "$out"
grep -q "lenet5" <<<"$out" || fail "report lacks the runs"
grep -qE "one\.jsonl +2 lenet5" <<<"$out" || fail "the two runs of one configuration are not one row of n = 2"
grep -q "configuration(s) outside" <<<"$out" || fail "report lacks the verdict line"
grep -q "what-if" <<<"$out" && fail "a measured T_C called what-if: $out"
# The tuned job takes the mode of --modes with the best predicted speedup (allreduce too:
# the tuner chose only between ps and hybrid, whatever its table said). What-if
# tunes: fast links, where the ring wins, and a slow one; each run's "mode" line
# must name the largest S among the allowed modes.
best_mode_ok() {  # $1: a tune log; $2: the tuned job
  python3 - "$1" "$2" <<'PY'
import re, sys
log = open(sys.argv[1]).read()
m = re.search(r"^mode (\w+): predicted S = ([\d.]+) at G = \d+ on the cluster \((.*)\)$", log, re.M)
assert m, "no mode line in " + sys.argv[1]
chosen, s = m.group(1), float(m.group(2))
for part in m.group(3).split(", "):
    name, val = part.split(" ")[:2]
    if "(not in --modes)" not in part:
        assert float(val) <= s, f"{name} {val} beats the chosen {chosen} {s}"
job = dict(l.split(" = ", 1) for l in open(sys.argv[2]).read().splitlines() if " = " in l and not l.startswith("#"))
assert job["mode"] == chosen, f"job mode {job['mode']} != {chosen}"
print(chosen)
PY
}
modes_seen=""
for gbps in 100 1; do
  "$DTRAIN" tune "${job[@]}" --candidates 16 --t-c-ms 5 --link-gbps $gbps --nodes 3 --workers-per-node 5 \
    --out "$W/m$gbps.ini" > "$W/m$gbps.log" || fail "tune --link-gbps $gbps failed"
  modes_seen+="$(best_mode_ok "$W/m$gbps.log" "$W/m$gbps.ini") " || fail "--link-gbps $gbps: not the best mode"
done
grep -q allreduce <<<"$modes_seen" || fail "allreduce never chosen over 100 Gb/s and 1 Gb/s links: $modes_seen"
"$DTRAIN" tune "${job[@]}" --candidates 16 --t-c-ms 5 --link-gbps 100 --nodes 3 --workers-per-node 5 \
  --modes ps,hybrid --out "$W/mserv.ini" > "$W/mserv.log"
[ "$(best_mode_ok "$W/mserv.log" "$W/mserv.ini")" != allreduce ] || fail "--modes ps,hybrid gave allreduce"
grep -q "(not in --modes)" "$W/mserv.log" || fail "the excluded allreduce's S was not shown"
expect_exit 2 "option 't-c-ms' must be a finite number of ms in [0, 3600000]" -- \
  "$DTRAIN" tune "${job[@]}" --t-c-ms 1e300 --out "$W/x.ini"
expect_exit 2 "is a profile written by dtrain tune, not a metrics file: give it with --profile" -- \
  "$DTRAIN" report --metrics "$W/m1.ini.profile.json"
expect_exit 2 "option 'background': '1e300' is not run, profile or a number of cores in [0, 1000000]" -- \
  "$DTRAIN" report --profile "$W/m1.ini.profile.json" --background 1e300 --metrics "$W/m1.ini.profile.json"
expect_exit 2 "unknown command 'trian' (did you mean train?)" -- "$DTRAIN" trian
# --out: 230 bytes is the longest whose OUT.profile.json.tmp.<pid> fits 255; the message says by how much.
expect_exit 2 "option 'out': the file name 'yyyy" -- "$DTRAIN" tune "${job[@]}" --candidates 16 --t-c-ms 5 \
  --out "$W/$(printf 'y%.0s' $(seq 227)).ini"
expect_exit 2 "shorten it by 1 bytes" -- "$DTRAIN" tune "${job[@]}" --candidates 16 --t-c-ms 5 \
  --out "$W/$(printf 'y%.0s' $(seq 227)).ini"
"$DTRAIN" tune "${job[@]}" --candidates 16 --t-c-ms 5 --out "$W/$(printf 'y%.0s' $(seq 226)).ini" > /dev/null ||
  fail "tune --out of 230 bytes failed"
rm -f "$W"/yyyyyyyy*
# A metrics file given as the profile is named as one.
expect_exit 2 "is a metrics file of dtrain train (JSON Lines), not a profile: give it with --metrics" -- \
  "$DTRAIN" report --profile "$W/one.jsonl" --metrics "$W/one.jsonl"
expect_exit 2 "option 'modes': 'ring' in 'ps,ring' is not ps, hybrid or allreduce" -- \
  "$DTRAIN" tune "${job[@]}" --modes ps,ring --out "$W/x.ini"
# A what-if profile (T_C and links given) says so where report names its source.
"$DTRAIN" tune "${job[@]}" --candidates 16 --t-c-ms 5 --link-gbps 1 --out "$W/whatif.ini" > /dev/null
out=$("$DTRAIN" report --profile "$W/whatif.ini.profile.json" --metrics "$W/one.jsonl")
grep -qF "a what-if profile: T_C given (dtrain tune --t-c-ms), not measured on this machine; its links given" <<<"$out" ||
  fail "report does not say the profile is a what-if: $out"
# Two runs in one file (appended, or cat): the last run only, with a note.
cat "$W/one.jsonl" "$W/four.jsonl" > "$W/both.jsonl"
out=$("$DTRAIN" report --metrics "$W/both.jsonl" --profile "$W/tuned.ini.profile.json" 2>&1)
grep -qF "holds 2 runs (run records not ending \"checkpointed\"); only the last" <<<"$out" || fail "report pooled two runs: $out"
grep '"kind":"step"' "$W/one.jsonl" > "$W/norun.jsonl"
expect_exit 2 'no {"kind":"run"} record' -- "$DTRAIN" report --metrics "$W/norun.jsonl"
# Bad tune input ends at once with exit 2, before any profiling: a candidate
# that cannot fit (60,000 LeNet images in 1 MB) is never run.
expect_exit 2 "fits" -- "$DTRAIN" tune "${job[@]}" --candidates 60000 --device-memory-gb 0.001 --out "$W/x.ini"
# Candidates train would refuse as a minibatch: beyond 65536, a global batch
# the 60,000 training images cannot fill; one given twice.
expect_exit 2 "option 'candidates': '100000' in '16,100000', more than 65536, the largest minibatch" -- \
  "$DTRAIN" tune "${job[@]}" --candidates 16,100000 --out "$W/x.ini"
expect_exit 2 "option 'candidates': 16000 × 4 worker(s) = 64000 images per step, more than the 60000 of the training set" -- \
  "$DTRAIN" tune "${job[@]}" --nodes 2 --workers-per-node 2 --candidates 16,16000 --out "$W/x.ini"
expect_exit 2 "option 'candidates': '16' in '16,32,16', which is given twice" -- \
  "$DTRAIN" tune "${job[@]}" --candidates 16,32,16 --out "$W/x.ini"
expect_exit 2 "option 'candidates' got '8\x0c,16', which holds the control character \x0c" -- \
  "$DTRAIN" tune "${job[@]}" --candidates $'8\f,16' --out "$W/x.ini"
expect_exit 2 "option 'candidates': '8\xc2\xa0' in '8\xc2\xa0,16', which is not an integer" -- \
  "$DTRAIN" tune "${job[@]}" --candidates $'8\xc2\xa0,16' --out "$W/x.ini"
touch "$W/afile"
expect_exit 2 "is not a folder" -- "$DTRAIN" tune "${job[@]}" --candidates 8 --out "$W/afile/x.ini"
# An existing tuned job is never replaced silently.
expect_exit 2 "option 'out': '$W/tuned.ini' exists" -- "$DTRAIN" tune "${job[@]}" --candidates 8 --out "$W/tuned.ini"
expect_exit 2 "option 'knee'" -- "$DTRAIN" tune "${job[@]}" --knee -3
# Tune's own numbers are read as typed, as train's are (1e-400 was read as 0: "measure").
expect_exit 2 "dtrain tune: option 'link-gbps' got '1e-400', which a double holds as 0" -- \
  "$DTRAIN" tune "${job[@]}" --candidates 8 --link-gbps 1e-400 --out "$W/x.ini"
expect_exit 2 "dtrain tune: option 'nodes' got '1e2', which is not an integer" -- \
  "$DTRAIN" tune "${job[@]}" --candidates 8 --nodes 1e2 --out "$W/x.ini"
expect_exit 2 "option 'candidates': '16,32,' has an empty item" -- \
  "$DTRAIN" tune "${job[@]}" --candidates 16,32, --out "$W/x.ini"
expect_exit 2 "option 'candidates': '0x10' in '8,0x10', which is not an integer" -- \
  "$DTRAIN" tune "${job[@]}" --candidates 8,0x10 --out "$W/x.ini"
expect_exit 2 "option 'link-gbps' must be > 0" -- "$DTRAIN" tune "${job[@]}" --link-gbps -1
expect_exit 2 "option 'latency-us' must be ≥ 0" -- "$DTRAIN" tune "${job[@]}" --latency-us -3
expect_exit 2 "option 't-u-ms' needs 't-c-ms'" -- "$DTRAIN" tune "${job[@]}" --t-u-ms 5
expect_exit 2 "option 't-c-ms' must be a finite number" -- "$DTRAIN" tune "${job[@]}" --t-c-ms nan
expect_exit 2 "at most" -- "$DTRAIN" tune "${job[@]}" --nodes 100000 --gpus-per-node 100000
# The linear lr rule is capped: lr 0.05 for batch 16 → 2 × 2 workers × 16 = ×4 allowed, ×8 not.
"$DTRAIN" tune "${job[@]}" --nodes 2 --gpus-per-node 2 --base-batch 16 --candidates 32 --profile-steps 2 \
  --link-gbps 1 --out "$W/cap.ini" > "$W/cap.log" 2> "$W/cap.err"
grep -q "factor 8 is capped at 4 " "$W/cap.log" || fail "the lr factor 8 was not capped"
grep -q "^lr = 0.2$" "$W/cap.ini" || fail "capped lr is not 0.05 × 4: $(grep '^lr =' "$W/cap.ini")"
# Scaled down (global batch 2 × 2 × 32 = 128 below base-batch 1024): said, not silent.
"$DTRAIN" tune "${job[@]}" --nodes 2 --gpus-per-node 2 --base-batch 1024 --candidates 32 --profile-steps 2 \
  --link-gbps 1 --out "$W/down.ini" > /dev/null 2> "$W/down.err"
grep -q "warning: the tuned global batch 128 is below option 'base-batch' 1024: the linear rule scales lr down by 0.125, from 0.05 to 0.00625 " "$W/down.err" ||
  fail "lr scaled down without a warning: $(cat "$W/down.err")"
grep -q "^lr = 0.00625$" "$W/down.ini" || fail "lr is not 0.05 / 8: $(grep '^lr =' "$W/down.ini")"
if grep -q "below option 'base-batch'" "$W/cap.err"; then fail "a scaled-up lr was warned about"; fi
# --help defaults are shortest round-trip too (0.8, not 0.80000000000000004).
help=$("$DTRAIN" tune --help)
grep -q "target-efficiency arg (=0.8) " <<<"$help" || fail "tune --help: $(grep target-eff <<<"$help")"
grep -q "workers-per-node arg (=1) " <<<"$help" || fail "tune --help lacks --workers-per-node"
echo "tune: ok"
