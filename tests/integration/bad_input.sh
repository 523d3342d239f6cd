#!/usr/bin/env bash
# Bad jobs and bad datasets end with exit code 2 and a message naming the key
# or the file, before training starts; a diverging run stops with a message.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
J="$WORK/bad_job.ini"
printf 'model = lenet5\ntrain-data = %s\nminibtch = 3\n' "$D/fashion-mnist-train.h5" > "$J"
expect_exit 2 minibtch -- "$DTRAIN" train --job "$J"
expect_exit 2 "'minibatch'" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --minibatch -4
expect_exit 2 "/nonexistent.h5" -- "$DTRAIN" train --train-data /nonexistent.h5
expect_exit 2 "resnet51" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --model resnet51
echo "not hdf5" > "$WORK/garbage.h5"
expect_exit 2 "garbage.h5" -- "$DTRAIN" train --train-data "$WORK/garbage.h5"
expect_exit 2 "expects 224" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --model resnet18
expect_exit 2 "unknown command" -- "$DTRAIN" trian
expect_exit 2 "unknown benchmark 'net'" -- "$DTRAIN" bench net
expect_exit 0 "dtrain bench comm | io | compute" -- "$DTRAIN" bench --help
expect_exit 2 "'--help' takes nothing after it, got 'extra'" -- "$DTRAIN" bench --help extra
expect_exit 2 "the benchmark comes before its options: dtrain bench io --data" -- "$DTRAIN" bench --data x.h5 io
expect_exit 2 "which benchmark? (it comes before its options, got '--data')" -- "$DTRAIN" bench --data x.h5
# A word that is no option's value was dropped and the run went on without it.
expect_exit 2 "command line: 'extra' is not an option or an option's value" -- \
  "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" extra
expect_exit 2 "command line: '0.3' is not an option or an option's value" -- \
  "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --mean 0.5 0.3
expect_exit 2 "dtrain bench io: 'extra' is not an option" -- "$DTRAIN" bench io --data x.h5 extra
for v in inf nan -1; do  # inf was taken: "with inf ms of sleeping compute per step"
  expect_exit 2 "dtrain bench io: option 'compute-ms' must be a number of ms" -- "$DTRAIN" bench io --data x.h5 --compute-ms $v
done
expect_exit 2 "dtrain bench io: option 'eval-resize' must be >= 0" -- "$DTRAIN" bench io --data x.h5 --eval-resize -1
# A usage error ends with the usage's last line, not an empty one.
for c in "bench net" "trian"; do
  # shellcheck disable=SC2086  # the words of the command
  out=$("$DTRAIN" $c 2>&1; echo "end")
  [[ "$out" != *$'\n\nend' ]] || fail "dtrain $c: an empty line after the usage → $out"
done
printf '[train]\nmodel = lenet5\ntrain-data = %s\n' "$D/fashion-mnist-train.h5" > "$J"
expect_exit 2 "job file '$J': line 1: '[train]' is a section header" -- "$DTRAIN" train --job "$J"
printf 'model = lenet5\ntrain-data = %s\nmomentum = 1.5\n' "$D/fashion-mnist-train.h5" > "$J"
expect_exit 2 "job file '$J': option 'momentum': must be in [0, 1), got 1.5" -- "$DTRAIN" train --job "$J"
# The set-up's checks (data files, model, mean/std channels) name where the key
# was written too, in train and in tune (tune's mean of the wrong length had
# failed inside its profiling as an internal check, exit 1).
printf 'model = lenet5\ntrain-data = %s\nmean = 0.5,0.5\n' "$D/fashion-mnist-train.h5" > "$J"
expect_exit 2 "job file '$J': option 'mean': 2 values, but the model's input has 1 channel (one value per channel)" -- "$DTRAIN" train --job "$J" --max-steps 1
expect_exit 2 "job file '$J': option 'mean': 2 values, but the model's input has 1 channel (one value per channel)" -- "$DTRAIN" tune --job "$J" --nodes 1 --workers-per-node 1 --out "$WORK/bad-tuned.ini"
expect_exit 2 "command line: option 'std': 3 values, but the model's input has 1 channel" -- "$DTRAIN" train --job "$J" --mean 0.5 --std 1,1,1
expect_exit 2 "command line: option 'model': unknown model 'lenett'" -- "$DTRAIN" tune --job "$J" --mean 0.5 --model lenett --nodes 1 --workers-per-node 1 --out "$WORK/bad-tuned.ini"
expect_exit 2 "command line: option 'train-data': /nonexistent.h5" -- "$DTRAIN" tune --job "$J" --train-data /nonexistent.h5 --nodes 1 --workers-per-node 1 --out "$WORK/bad-tuned.ini"
printf 'model = lenet5\ntrain-data = /nonexistent.h5\n' > "$J"
expect_exit 2 "job file '$J': option 'train-data': /nonexistent.h5" -- "$DTRAIN" train --job "$J"
[ ! -e "$WORK/bad-tuned.ini" ] || fail "a refused tune wrote its output"
# A NUL in a job file's run-name made the run folder's mkdir loop forever on the
# name cut at the NUL (a break report): refused with its line, at once.
printf 'model = lenet5\ntrain-data = %s\nrun-name = ab\0cd\n' "$D/fashion-mnist-train.h5" > "$J"
expect_exit 2 "job file '$J': line 3 holds the control character \x00" -- timeout 60 "$DTRAIN" train --job "$J" --runs-dir "$WORK/nul-runs"
[ ! -e "$WORK/nul-runs" ] || fail "a refused job made its runs folder"
# tune's own options and the values it writes into the tuned job file are
# checked before profiling (--out $'t\e.ini' made such files after it; a '#'
# in a path read back cut at it; a missing test set was copied into the job).
printf 'model = lenet5\ntrain-data = %s\n' "$D/fashion-mnist-train.h5" > "$J"
tune=("$DTRAIN" tune --job "$J" --nodes 1 --workers-per-node 1 --candidates 16 --profile-steps 1)
expect_exit 2 "dtrain tune: option 'out' got 't\x1b.ini', which holds the control character \x1b" -- "${tune[@]}" --out $'t\e.ini'
expect_exit 2 "dtrain tune: option 'out' is empty" -- "${tune[@]}" --out ''
ln -sfn "$D/fashion-mnist-train.h5" "$WORK/tr#1.h5"
expect_exit 2 "command line: option 'train-data': '$WORK/tr#1.h5' holds '#'" -- "${tune[@]}" --train-data "$WORK/tr#1.h5" --out "$WORK/bad-tuned.ini"
expect_exit 2 "command line: option 'test-data': /nonexistent.h5" -- "${tune[@]}" --test-data /nonexistent.h5 --out "$WORK/bad-tuned.ini"
[ ! -e "$WORK/bad-tuned.ini" ] && [ -z "$(ls "$WORK" | grep -a $'\e' || true)" ] || fail "a refused tune wrote its output"
# Names and values with escape sequences are shown as \xNN, never raw.
out=$("$DTRAIN" train --run-name $'--\e[31mred' 2>&1 || true)
grep -qF "got the value '--\x1b[31mred'" <<<"$out" && ! grep -q $'\e' <<<"$out" || fail "an option-like value printed raw: $(cat -A <<<"$out")"
expect_exit 2 "unknown command 'tr\x1bain'" -- "$DTRAIN" $'tr\eain'
# dtrain report: a folder, a link loop.
expect_exit 2 "option 'metrics': '$WORK' is a folder, not a file" -- "$DTRAIN" report --metrics "$WORK"
ln -sfn loopB "$WORK/loopA"; ln -sfn loopA "$WORK/loopB"
expect_exit 2 "cannot open '$WORK/loopA': Too many levels of symbolic links" -- "$DTRAIN" report --metrics "$WORK/loopA"
rm -f "$WORK/loopA" "$WORK/loopB" "$WORK/tr#1.h5"
# A run name longer than a folder name may be failed after start-up (exit 1, "File name too long").
expect_exit 2 "bytes long, more than the 255 a folder name may have" -- \
  "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --run-name "$(printf 'y%.0s' $(seq 300))" --runs-dir "$WORK/long-runs"
# A start mark that cannot be written (slurm/train.sbatch's DTRAIN_STARTED_FILE)
# ends the job before it trains (a later crash would be taken for a start-up
# one and relaunched from step 0), on every rank. One that can is written by
# rank 0 of 2 after the first collective.
DTRAIN_STARTED_FILE=/nonexistent/started expect_exit 1 "cannot write DTRAIN_STARTED_FILE '/nonexistent/started'" -- \
  bounded 120 mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" \
  --test-data "" --max-steps 1 --threads 1 --save-params "" --metrics ""
rm -f "$SCRATCH/started"
DTRAIN_STARTED_FILE=$SCRATCH/started bounded 120 mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" train \
  --train-data "$D/fashion-mnist-train.h5" --test-data "" --max-steps 1 --threads 1 --save-params "" --metrics "" \
  > /dev/null 2>&1 || fail "np 2 with DTRAIN_STARTED_FILE: the run failed"
grep -q "^2 rank(s) through MPI_Init and the first collective at " "$SCRATCH/started" && [ ! -e "$SCRATCH/started.tmp" ] ||
  fail "np 2: DTRAIN_STARTED_FILE holds '$(cat "$SCRATCH/started" 2>&1)'"
echo "ok: DTRAIN_STARTED_FILE: $(cat "$SCRATCH/started")"
# Divergence is caught at the step it happens, not carried on as NaN.
expect_exit 1 "diverged" -- "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" --lr 1e6 --momentum 0 \
  --max-steps 200 --log-interval 1000
# ... once for the job, though every worker diverges in the same step (it was
# printed by each, with Open MPI's errors of the simultaneous aborts).
out=$(bounded 120 mpirun -np 4 --oversubscribe --bind-to none "$DTRAIN" train --train-data "$D/fashion-mnist-train.h5" \
      --test-data "" --lr 1e6 --momentum 0 --max-steps 200 --minibatch 16 --threads 1 --metrics "$SCRATCH/diverged.jsonl" \
      --save-params "" --log-interval 1000 2>&1) && fail "np 4 --lr 1e6: the run succeeded"
n=$(grep -c "dtrain: error:" <<<"$out" || true)
[ "$n" = 1 ] && grep -q "dtrain: error: rank 0 on .*diverged" <<<"$out" \
  || fail "np 4 --lr 1e6: wanted one message, from rank 0; got $n: $out"
echo "ok: a divergence on 4 workers is reported once, by rank 0"
# ... and its metrics file says why the run ended (it was empty), which
# dtrain report repeats rather than "no run record".
msg=$(sed -n 's/^dtrain: error: //p' <<<"$out")
last=$(tail -n 1 "$SCRATCH/diverged.jsonl")
MSG=$msg python3 -c '
import json, os, sys
r = json.loads(sys.stdin.read())
assert r["kind"] == "failed" and r["error"] == os.environ["MSG"] and r["exit_code"] == 1 and r["wall_s"] >= 0, r' <<<"$last" \
  || fail "np 4 --lr 1e6: the metrics file does not end with the failure as printed: $last"
expect_exit 2 "diverged.jsonl is of a run that failed, with no {\"kind\":\"run\"} record: rank 0 on" -- \
  "$DTRAIN" report --metrics "$SCRATCH/diverged.jsonl"
echo "ok: the diverged run's metrics file ends with {\"kind\":\"failed\"} and dtrain report names it"

# dtrain report on damaged metrics files and profiles: exit 2 naming the file,
# the line and the field; never an internal check, a bare JSON exception or inf.
R="$WORK/report_bad"
mkdir -p "$R"
RUN='{"kind":"run","model":"lenet5","minibatch":8,"mode":"allreduce","workers":1,"servers":0,"ranks_per_node":0,"threads":1,"cores":2.0,"background_cores":0.0,"wait_policy":"spin"}'
STEP='{"kind":"step","step":10,"images_per_s":4000.0,"t_compute_s":0.002}'
metrics() { local f="$R/$1"; shift; printf '%s\n' "$@" > "$f"; echo "$f"; }
expect_exit 2 "array.jsonl:1: the line is not a JSON object" -- "$DTRAIN" report --metrics "$(metrics array.jsonl '[1,2,3]')"
expect_exit 2 "number.jsonl:2: the line is not a JSON object" -- "$DTRAIN" report --metrics "$(metrics number.jsonl "$STEP" 5)"
for field in minibatch workers servers mode ranks_per_node threads cores model; do
  rec=$(sed -E "s/\"$field\":(\"[a-z0-9]*\"|[0-9.]*),//" <<<"$RUN")
  expect_exit 2 "no_$field.jsonl:2: run record: field '$field' is missing" -- \
    "$DTRAIN" report --metrics "$(metrics "no_$field.jsonl" "$STEP" "$rec")"
done
expect_exit 2 "ips_text.jsonl:1: step record: field 'images_per_s' is not a number" -- \
  "$DTRAIN" report --metrics "$(metrics ips_text.jsonl "${STEP/4000.0/\"x\"}" "$RUN")"
expect_exit 2 "ips_zero.jsonl:1: step record: field 'images_per_s' is 0" -- \
  "$DTRAIN" report --metrics "$(metrics ips_zero.jsonl "${STEP/4000.0/0}" "$RUN")"
expect_exit 2 "tc_neg.jsonl:1: step record: field 't_compute_s' is -0.002" -- \
  "$DTRAIN" report --metrics "$(metrics tc_neg.jsonl "${STEP/0.002/-0.002}" "$RUN")"
expect_exit 2 "mb_neg.jsonl:2: run record: field 'minibatch' is -64, must be ≥ 1" -- \
  "$DTRAIN" report --metrics "$(metrics mb_neg.jsonl "$STEP" "${RUN/\"minibatch\":8/\"minibatch\":-64}")"
expect_exit 2 "workers0.jsonl:2: run record: field 'workers' is 0" -- \
  "$DTRAIN" report --metrics "$(metrics workers0.jsonl "$STEP" "${RUN/\"workers\":1/\"workers\":0}")"
expect_exit 2 "cores0.jsonl:2: run record: field 'cores' is 0" -- \
  "$DTRAIN" report --metrics "$(metrics cores0.jsonl "$STEP" "${RUN/\"cores\":2.0/\"cores\":0}")"
expect_exit 2 "ps0.jsonl:2: run record: field 'servers' is 0, mode ps needs ≥ 1" -- \
  "$DTRAIN" report --metrics "$(metrics ps0.jsonl "$STEP" "${RUN/allreduce/ps}")"
expect_exit 2 "use a smaller --log-interval" -- "$DTRAIN" report --metrics "$(metrics nosteps.jsonl "$RUN")"
# --metrics-append: a start that failed after an earlier one finished is the
# file's result, not the earlier run record; a failed start before a finished
# one is not (a requeued Slurm job that then completed).
FAILED='{"kind":"failed","error":"rank 0 on h: training loss is 1e+17 at step 2","exit_code":1,"wall_s":0.1}'
expect_exit 2 "failed_last.jsonl:4: the last start of this run failed, after the run record of line 2: rank 0 on h: training loss" -- \
  "$DTRAIN" report --metrics "$(metrics failed_last.jsonl "$STEP" "$RUN" "$STEP" "$FAILED")"
out=$("$DTRAIN" report --metrics "$(metrics failed_first.jsonl "$STEP" "$FAILED" "$STEP" "$RUN")") \
  || fail "report on a failed start followed by a finished one: $out"
# A cut last line (a killed writer; no newline) is left out with a warning; a
# broken line elsewhere is still refused.
cut=$(metrics cut.jsonl "$STEP" "$RUN" "$FAILED"); printf '{"kind":"st' >> "$cut"
expect_exit 2 "cut.jsonl:3: the last start of this run failed" -- "$DTRAIN" report --metrics "$cut"
expect_exit 2 "mid.jsonl:2: the line is not JSON" -- "$DTRAIN" report --metrics "$(metrics mid.jsonl "$STEP" '{"kind":"st' "$RUN")"
echo "ok: dtrain report names a failure after the last run record, and takes a run record after a failure"
ok=$(metrics ok.jsonl "$STEP" "$STEP" "$RUN")
# Profiles: a good one, then one damaged field at a time.
PROF='{"kind":"profile","model":"lenet5","threads":1,"cores":2,"param_bytes":246824,"fixed_bytes":740472,"per_sample_bytes":100000,"points":[{"minibatch":8,"t_c_s":0.002,"images_per_s":4000,"memory_bytes":1000000}],"intra":{"bandwidth_Bps":1e9,"latency_s":1e-6},"inter":{"bandwidth_Bps":2e9,"latency_s":2e-6}}'
profile() { local f="$R/$1"; printf '%s\n' "$2" > "$f"; echo "$f"; }
out=$("$DTRAIN" report --metrics "$ok" --profile "$(profile good.json "$PROF")") || fail "report on a good profile: $out"
# The checks below look for what must NOT be there; first make sure the table is.
grep -qE "ok\.jsonl +1 lenet5 " <<<"$out" || fail "report on a good profile printed no row for ok.jsonl: $out"
grep -qF "of 1 configuration(s) outside" <<<"$out" || fail "report on a good profile printed no verdict line: $out"
grep -qE 'inf|nan' <<<"$out" && fail "report prints inf/nan: $out"
grep -q "not from the profile" <<<"$out" && fail "a matching run reported as not from the profile: $out"
bad_profile() {  # bad_profile NAME SED-EXPRESSION MESSAGE
  local f; f=$(profile "$1" "$(sed -E "$2" <<<"$PROF")")
  expect_exit 2 "option 'profile': $f: $3" -- "$DTRAIN" report --metrics "$ok" --profile "$f"
}
bad_profile no_points.json 's/"points":\[[^]]*\]/"points":[]/' "points is empty"
bad_profile intra_bw0.json 's/"bandwidth_Bps":1e9/"bandwidth_Bps":0/' "intra.bandwidth_Bps 0 must be > 0"
bad_profile inter_bw.json 's/"bandwidth_Bps":2e9/"bandwidth_Bps":-5/' "inter.bandwidth_Bps -5 must be > 0"
bad_profile inter_lat.json 's/"latency_s":2e-6/"latency_s":-1/' "inter.latency_s -1 must be ≥ 0"
bad_profile mb0.json 's/"minibatch":8/"minibatch":0/' "points[0].minibatch 0 must be ≥ 1"
bad_profile tc0.json 's/"t_c_s":0.002/"t_c_s":0/' "points[0].t_c_s 0 must be > 0"
bad_profile threads0.json 's/"threads":1/"threads":0/' "threads 0 must be ≥ 1"
bad_profile cores0.json 's/"cores":2/"cores":0/' "cores 0 must be > 0"
bad_profile params.json 's/"param_bytes":246824/"param_bytes":-1/' "param_bytes -1 must be > 0"
bad_profile no_model.json 's/"model":"lenet5",//' "model is missing"
# A run the profile does not fit (threads, model) is named, with the reason, after the table.
thr2=$(metrics thr2.jsonl "$STEP" "${RUN/\"threads\":1/\"threads\":2}")
out=$("$DTRAIN" report --metrics "$ok" "$thr2" --profile "$R/good.json") || fail "report: $out"
grep -qF "not from the profile: $thr2: threads 2 ≠ profile's 1: its T_C1 was measured in-process here" <<<"$out" \
  || fail "report does not name the run the profile did not apply to: $out"
grep -qF "not from the profile: $ok" <<<"$out" && fail "the matching run is named too: $out"
grep -qF "1 of 2 run(s) with T_C1 measured in-process" <<<"$out" || fail "footer claims the profile for all runs: $out"
out=$("$DTRAIN" report --metrics "$ok" --profile "$(profile resnet.json "${PROF/lenet5/resnet20}")") || fail "report: $out"
grep -qF "model lenet5 ≠ profile's resnet20" <<<"$out" || fail "report does not name the model mismatch: $out"
echo "ok: report names the runs its profile did not apply to"
