#!/usr/bin/env bash
# A new user's first hour (issue 11): one clear message per failure under
# mpirun, every rank exiting 2 on a usage error without MPI_Abort; "did you
# mean" for a misspelt option or job-file key; missing relative paths named
# with their folder; each run in its own numbered folder, an earlier run's
# files never touched, nothing created by a start that fails validation.
source "$(dirname "$0")/lib.sh"
D="$WORK/data"
J="$SRC/jobs/fashion_lenet.ini"
data=(--train-data "$D/fashion-mnist-train.h5" --test-data "$D/fashion-mnist-test.h5" --max-test-samples 500)

# 1. A usage error that every rank detects: printed once, every rank exits 2, no abort banner.
out=$(mpirun -np 4 --oversubscribe --bind-to none "$DTRAIN" train --job "$J" "${data[@]}" --minibtach 16 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] || fail "mpirun exited $rc, wanted 2: $out"
n=$(grep -c "dtrain: error:" <<<"$out" || true)
[ "$n" = 1 ] || fail "the usage error was printed $n times, wanted once: $out"
grep -qF "unrecognised option '--minibtach' (did you mean --minibatch?)" <<<"$out" || fail "no suggestion: $out"
grep -q "MPI_ABORT" <<<"$out" && fail "a usage error went through MPI_Abort: $out"
# Every rank's own exit code: each runs under a shell that records it, and
# mpirun is told not to kill the others when the first exits non-zero.
rm -f rank-exit.*
mpirun --mca orte_abort_on_non_zero_status 0 -np 4 --oversubscribe --bind-to none sh -c \
  '"$0" "$@"; rc=$?; echo $rc > rank-exit.$OMPI_COMM_WORLD_RANK; exit $rc' "$DTRAIN" train --job "$J" "${data[@]}" --minibtach 16 >/dev/null 2>&1 || true
for r in 0 1 2 3; do
  [ "$(cat rank-exit.$r 2>/dev/null)" = 2 ] || fail "rank $r exited '$(cat rank-exit.$r 2>/dev/null)', wanted 2"
done
echo "ok: a usage error under mpirun -np 4: one message, every rank exit 2, no MPI_Abort"
# The same for a bad value found later in validation (dataset smaller than one global batch), in tune and bench.
for cmd in "train --job $J ${data[*]} --minibatch 40000" "tune --job $J ${data[*]} --nodes 0" "bench comm --iters 0" "bench comm --pairs 0" "bench comm --ps 4"; do
  out=$(mpirun -np 4 --oversubscribe --bind-to none "$DTRAIN" $cmd 2>&1) && rc=0 || rc=$?
  [ "$rc" = 2 ] || fail "dtrain $cmd under mpirun: exit $rc, wanted 2: $out"
  n=$(grep -c "dtrain: error:" <<<"$out" || true)
  [ "$n" = 1 ] || fail "dtrain $cmd: the error was printed $n times: $out"
  grep -q "MPI_ABORT" <<<"$out" && fail "dtrain $cmd: MPI_Abort on a usage error: $out"
  echo "ok: once, exit 2: dtrain ${cmd%% *} ($(grep "dtrain: error:" <<<"$out" | cut -c1-90))"
done
# A training set cut below one global batch by --max-train-samples names that key and its source
# (it named the job file's minibatch).
expect_exit 2 "command line: option 'max-train-samples': 1 keeps 1 of the 60000 samples of" -- \
  "$DTRAIN" train --job "$J" "${data[@]}" --max-train-samples 1
# Commands without MPI (report, model, data) under mpirun: rank 0 alone runs them.
out=$(mpirun -np 4 --oversubscribe --bind-to none "$DTRAIN" report --metrics nope.jsonl 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] || fail "report under mpirun: exit $rc, wanted 2: $out"
[ "$(grep -c "dtrain: error:" <<<"$out" || true)" = 1 ] || fail "report's error printed more than once: $out"
out=$(mpirun -np 3 --oversubscribe --bind-to none "$DTRAIN" model --name lenet5 2>&1) || fail "model under mpirun: $out"
[ "$(grep -c "^model lenet5:" <<<"$out")" = 1 ] || fail "model's table printed more than once: $out"
echo "ok: report and model under mpirun print once"
# Bad values caught in validation: non-finite normalisation, no job at all.
expect_exit 2 "option 'mean': every value must be a finite number" -- "$DTRAIN" train --job "$J" "${data[@]}" --mean nan
expect_exit 2 "option 'std': every value must be a finite number > 0" -- "$DTRAIN" train --job "$J" "${data[@]}" --std inf
expect_exit 2 "no job: give a job file" -- "$DTRAIN" train
[ -e runs ] && fail "a failed start created $(find runs)"
echo "ok: no run folder after failed starts"

# 2. Suggestions for a job-file key and a missing relative path with its folder.
printf 'model = lenet5\nminibtach = 16\n' > typo.ini
expect_exit 2 "(did you mean key 'minibatch'?)" -- "$DTRAIN" train --job typo.ini "${data[@]}"
expect_exit 2 "nope.h5 (relative to $SCRATCH): no such file" -- "$DTRAIN" train --job "$J" --train-data nope.h5
expect_exit 2 "does not exist" -- "$DTRAIN" train --job nope.ini
expect_exit 2 "(did you mean --minibatch?)" -- "$DTRAIN" bench io --minibatc 4
expect_exit 2 "(did you mean --name?)" -- "$DTRAIN" model --nmae lenet5
expect_exit 2 "(did you mean --nodes?)" -- "$DTRAIN" tune --job "$J" --nodez 2
expect_exit 2 "(did you mean --minibatch?)" -- "$DTRAIN" tune --job "$J" --minibtach 2
expect_exit 2 "(did you mean --profile?)" -- "$DTRAIN" report --metrics x.jsonl --proflie p.json
# Datasets are outputs too: an existing file is never replaced silently.
"$DTRAIN" data synth --shape 8x8x1 --n 4 --classes 2 --out s.h5 > /dev/null
sum=$(sha256sum s.h5)
expect_exit 2 "option 'out': 's.h5' exists" -- "$DTRAIN" data synth --shape 8x8x1 --n 4 --classes 2 --out s.h5 --seed 2
[ "$(sha256sum s.h5)" = "$sum" ] || fail "a refused conversion changed s.h5"
"$DTRAIN" data synth --shape 8x8x1 --n 4 --classes 2 --out s.h5 --seed 2 --overwrite true > /dev/null
touch plainfile
expect_exit 2 "is not a folder" -- "$DTRAIN" data synth --shape 8x8x1 --n 4 --out plainfile/s.h5
expect_exit 2 "exists" -- "$DTRAIN" data fashion-mnist --out "$D"

# 3. Run folders: the main job's layout run twice; the first run's metrics stay byte-identical.
main=(mpirun -np 5 --oversubscribe --bind-to none "$DTRAIN" train --job "$J" "${data[@]}" --mode hybrid --ps 1
      --ranks-per-node 2 --minibatch 16 --max-steps 30 --log-interval 10 --threads 1)
"${main[@]}" > first.log 2>&1 || { cat first.log; fail "first run"; }
[ -f runs/fashion_lenet/1/metrics.jsonl ] && [ -f runs/fashion_lenet/1/params.h5 ] || fail "no run folder 1: $(find runs)"
grep -q '"kind":"run"' runs/fashion_lenet/1/metrics.jsonl || fail "no run record line in run 1's metrics"
sum1=$(sha256sum runs/fashion_lenet/1/metrics.jsonl runs/fashion_lenet/1/params.h5)
"${main[@]}" > second.log 2>&1 || { cat second.log; fail "second run"; }
[ "$(sha256sum runs/fashion_lenet/1/metrics.jsonl runs/fashion_lenet/1/params.h5)" = "$sum1" ] || fail "the second run changed run 1's files"
[ -f runs/fashion_lenet/2/metrics.jsonl ] || fail "the second run has no folder 2: $(find runs)"
[ "$(readlink runs/fashion_lenet/latest)" = 2 ] || fail "latest → $(readlink runs/fashion_lenet/latest), wanted 2"
grep -q "run folder runs/fashion_lenet/2" second.log || fail "the run folder is not printed: $(cat second.log)"
grep -qE "^epoch 1/1 step [0-9]+/[0-9]+ .* elapsed [0-9]+s ETA [0-9]+s$" second.log || fail "progress line without elapsed/ETA: $(cat second.log)"
# Epochs are numbered from 1 in the metrics file, as on stdout.
[ "$(json_field runs/fashion_lenet/2/metrics.jsonl epoch epoch)" = 1 ] || fail "metrics epoch is not 1"
grep -q "^epoch 1 done" second.log || fail "stdout epoch is not 1"
echo "ok: run folders 1 and 2, run 1 byte-identical, latest → 2"
# dtrain report names a row given through `latest` by where the link leads.
out=$("$DTRAIN" report --metrics runs/fashion_lenet/latest/metrics.jsonl --train-data "$D/fashion-mnist-train.h5" --profile-steps 2) ||
  fail "report of latest: $out"
grep -qE "^…[a-z]*_lenet/2/metrics.jsonl +1 +lenet5 " <<<"$out" || fail "report's row is not named by run 2: $out"
echo "ok: report names the run behind latest"
# The glob of every run also matches latest/: each file counted once (the newest
# had twice the weight), with a note. A link before '..' is resolved first, as
# the system does (L1/../2 is run 2), and a row is named by that file.
out=$("$DTRAIN" report --metrics runs/fashion_lenet/*/metrics.jsonl --train-data "$D/fashion-mnist-train.h5" --profile-steps 2 2>&1) ||
  fail "report of the glob: $out"
grep -qF "dtrain report: 'runs/fashion_lenet/latest/metrics.jsonl' is the file 'runs/fashion_lenet/2/metrics.jsonl' already given: counted once" <<<"$out" ||
  fail "report did not say latest is run 2's file: $out"
grep -qE "^…[a-z]*_lenet/1/metrics.jsonl +2 +lenet5 " <<<"$out" || fail "report's row does not count 2 runs: $out"
ln -sfn runs/fashion_lenet/1 L1
out=$("$DTRAIN" report --metrics L1/../2/metrics.jsonl --train-data "$D/fashion-mnist-train.h5" --profile-steps 2) ||
  fail "report through L1/..: $out"
grep -qE "^…[a-z]*_lenet/2/metrics.jsonl +1 +lenet5 " <<<"$out" || fail "L1/../2 is not named as run 2: $out"
out=$("$DTRAIN" report --metrics L1/nothing.jsonl 2>&1) && fail "report of a missing file passed: $out"
grep -qF "cannot open 'L1/nothing.jsonl" <<<"$out" && grep -qF "No such file or directory" <<<"$out" ||
  fail "a missing metrics file is not named with why: $out"
rm -f L1
echo "ok: report counts a file once, resolves links before '..', says why a file cannot be opened"

# 4. An explicit output that exists is refused (exit 2 naming it) unless --overwrite true.
one=(--job "$J" "${data[@]}" --max-steps 3 --log-interval 1 --threads 1)
"$DTRAIN" train "${one[@]}" --metrics m.jsonl --save-params "" > /dev/null
sum=$(sha256sum m.jsonl)
n_runs=$(ls runs/fashion_lenet | wc -l)
expect_exit 2 "option 'metrics': 'm.jsonl' exists" -- "$DTRAIN" train "${one[@]}" --metrics m.jsonl --save-params ""
[ "$(sha256sum m.jsonl)" = "$sum" ] || fail "a refused run changed m.jsonl"
[ "$(ls runs/fashion_lenet | wc -l)" = "$n_runs" ] || fail "a refused run made a run folder"
"$DTRAIN" train "${one[@]}" --metrics m.jsonl --save-params "" --overwrite true --seed 2 > /dev/null
[ "$(sha256sum m.jsonl)" != "$sum" ] || fail "--overwrite true did not replace m.jsonl"
echo "ok: explicit outputs refused when they exist, replaced with --overwrite"
# --metrics-append true continues the file (each start of a requeued Slurm job adds its records).
before=$(wc -l < m.jsonl) sum=$(sha256sum < m.jsonl)
"$DTRAIN" train "${one[@]}" --metrics m.jsonl --save-params "" --metrics-append true > /dev/null
[ "$(head -n "$before" m.jsonl | sha256sum)" = "$sum" ] || fail "--metrics-append changed the existing records"
[ "$(wc -l < m.jsonl)" = $((2 * before)) ] || fail "--metrics-append: $(wc -l < m.jsonl) lines, wanted $((2 * before))"
[ "$(grep -c '"kind":"run"' m.jsonl)" = 2 ] || fail "--metrics-append: not two run records"
echo "ok: --metrics-append true appends to an existing metrics file"

# 5. --help shows defaults as a person writes them.
help=$("$DTRAIN" train --help)
grep -q -- "--lr arg (=0.01)" <<<"$help" || fail "lr default not shortest: $(grep -- --lr <<<"$help")"
grep -q -- "--augment-flip arg (=false)" <<<"$help" || fail "boolean default not true/false: $(grep -- --augment-flip <<<"$help")"
echo "ok: --help numbers and booleans"
# --version names the commit the binary was built from (this tree's, when it is a git checkout) and its libraries.
version=$("$DTRAIN" --version) || fail "dtrain --version failed"
if git -C "$SRC" rev-parse --short=12 HEAD > /dev/null 2>&1; then
  head=$(git -C "$SRC" rev-parse --short=12 HEAD)
  grep -q "^dtrain, commit $head" <<<"$version" || fail "--version does not name HEAD $head: $version"
fi
grep -q "^oneDNN [0-9]" <<<"$version" || fail "--version does not name oneDNN: $version"
expect_exit 2 "takes nothing after it" -- "$DTRAIN" --version extra
echo "ok: --version"
# dtrain data's help names where --src's default comes from, and shows this shell's value.
help=$(DTRAIN_FASHION_DIR=/srv/fmnist "$DTRAIN" data --help)
grep -q -- "--src arg (=/srv/fmnist)" <<<"$help" || fail "data --help: --src default not \$DTRAIN_FASHION_DIR's value: $(grep -- --src <<<"$help")"
grep -q -- 'DTRAIN_FASHION_DIR' <<<"$help" || fail "data --help does not name DTRAIN_FASHION_DIR"
grep -q -- 'fashion-mnist | synth | imagefolder' <<<"$help" || fail "data --help: --what does not list imagefolder"
echo "ok: data --help names DTRAIN_FASHION_DIR and the three datasets"

# 6. Default thread counts follow the CPUs the rank may run on: a rank started on one
#    CPU (taskset, or mpirun's core binding) computes on one thread, not on the host's count.
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')
one=(train --job "$J" "${data[@]}" --max-steps 1 --metrics "" --save-params "" --runs-dir "$SCRATCH/thr")
out=$(taskset -c "$cpu" "$DTRAIN" "${one[@]}" 2>&1) || fail "a run on one CPU failed: $out"
grep -qE "rank 0 worker .* cpus $cpu gpu none threads 1 \+ 1 loader" <<<"$out" ||
  fail "on CPU $cpu alone the placement is not 1 compute + 1 loader thread: $(grep 'rank 0' <<<"$out")"
out=$(mpirun -np 1 --bind-to core "$DTRAIN" "${one[@]}" 2>&1) || fail "mpirun -np 1 --bind-to core failed: $out"
grep -qE "rank 0 worker .* threads 1 \+ 1 loader" <<<"$out" ||
  fail "a rank bound to one core does not compute on one thread: $(grep 'rank 0' <<<"$out")"
echo "ok: one CPU, one compute thread (taskset and mpirun --bind-to core)"
# An explicit --threads beyond that share is kept, with a warning (a step ran 10–100× slower without one).
out=$(taskset -c "$cpu" "$DTRAIN" "${one[@]}" --threads 3 2>&1) || fail "--threads 3 on one CPU failed: $out"
grep -qF -- "--threads 3 but this rank's share of its CPUs is 1 (1 CPU(s) shared by 1 rank(s))" <<<"$out" ||
  fail "--threads 3 on one CPU: no oversubscription warning: $out"
out=$(taskset -c "$cpu" "$DTRAIN" "${one[@]}" --threads 1 2>&1) || fail "--threads 1 on one CPU failed: $out"
! grep -q "oversubscribe" <<<"$out" || fail "--threads 1 on one CPU warned: $out"
echo "ok: --threads beyond the rank's CPUs warns"

# 7. dtrain bench compute: its JSON record, and bad values named (exit 2) before any work.
bc=(bench compute --model lenet5 --no-peak)
out=$("$DTRAIN" "${bc[@]}" --minibatch 8 --steps 1 --warmup 0 --plan --json "$SCRATCH/bc.jsonl" 2>&1) || fail "bench compute failed: $out"
grep -q "^plan:" <<<"$out" || fail "bench compute --plan printed no plan: $out"
/usr/bin/python3 -c "import json,sys; j=json.loads(open(sys.argv[1]).readline()); sys.exit(0 if j['kind']=='bench_compute' and j['model']=='lenet5' and j['minibatch']==8 and j['threads']>=1 and j['images_per_s']>0 else 1)" "$SCRATCH/bc.jsonl" ||
  fail "bench compute's JSON record: $(cat "$SCRATCH/bc.jsonl")"
expect_exit 2 "option 'json': cannot open '$SCRATCH/no/such/dir/x.json'" -- "$DTRAIN" "${bc[@]}" --json "$SCRATCH/no/such/dir/x.json"
expect_exit 2 "option 'minibatch' = 0: must be >= 1" -- "$DTRAIN" "${bc[@]}" --minibatch 0
expect_exit 2 "option 'warmup' = -1: must be >= 0" -- "$DTRAIN" "${bc[@]}" --warmup -1
expect_exit 2 "options 'peak-only' and 'no-peak' exclude each other" -- "$DTRAIN" bench compute --peak-only --no-peak
echo "ok: bench compute's JSON record; bad values named"

# 8. Values far out of range are refused naming the option, before any run folder.
expect_exit 2 "option 'threads': must be in [0, 1024], got 100000" -- "$DTRAIN" train --job "$J" "${data[@]}" --threads 100000 --runs-dir "$SCRATCH/far"
[ ! -e "$SCRATCH/far" ] || fail "a refused --threads made a run folder"
# The benches take train's bounds (a thread count past the process limit crashed bench compute).
expect_exit 2 "option 'threads' = 100000: must be <= 1024 (as in dtrain train)" -- "$DTRAIN" "${bc[@]}" --threads 100000
expect_exit 2 "option 'minibatch' = 65537: must be <= 65536" -- "$DTRAIN" "${bc[@]}" --minibatch 65537
expect_exit 2 "option 'threads' must be in [0, 256], got 257" -- "$DTRAIN" bench io --data x.h5 --threads 257
expect_exit 2 "option 'depth' must be in [1, 64], got 65" -- "$DTRAIN" bench io --data x.h5 --depth 65
expect_exit 2 "'max-mb' = 0 (default 256)" -- mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" bench comm --max-mb 0
expect_exit 2 "option 'wait-for-check' applies to the exchange table, not to --links" -- mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" bench comm --links --wait-for-check
# The exchange table in both ps protocols (speculating servers, and waiting for the joint check): each says which it timed.
for flag in "" --wait-for-check; do
  out=$(mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" bench comm --ps 1 --min-kb 256 --max-mb 0.25 --iters 2 --pairs 1 $flag 2>&1) || fail "bench comm $flag: $out"
  grep -qE '^ +256 KiB( +[0-9.]+){9}$' <<<"$out" || fail "bench comm $flag printed no 256 KiB row: $out"
  want="--wait-for-check: without"; [ -n "$flag" ] && want="this run: --wait-for-check, not speculating"
  grep -qF -- "$want" <<<"$out" || fail "bench comm $flag does not say '$want': $out"
done
echo "ok: bench comm times the ps step with and without speculation, --wait-for-check refused with --links"
# 9. Options the chosen variant of a command does not read are refused, not ignored; limits as train's.
expect_exit 2 "option 'n' is not read without --chunking" -- "$DTRAIN" bench io --data x.h5 --n 5
expect_exit 2 "option 'data' is not read with --chunking" -- "$DTRAIN" bench io --chunking --data x.h5
expect_exit 2 "option 'dir': '/nonexistent' is not a folder" -- "$DTRAIN" bench io --chunking --dir /nonexistent
expect_exit 2 "option 'no-weight-mirror' is read with --precision bf16 only" -- "$DTRAIN" "${bc[@]}" --no-weight-mirror
expect_exit 2 "option 'json' is empty" -- "$DTRAIN" "${bc[@]}" --json ""
expect_exit 2 "option 'model' is not read with --peak-only" -- "$DTRAIN" bench compute --peak-only --model resnet50
expect_exit 2 "option 'ps' is not read with --links" -- mpirun -np 2 --oversubscribe --bind-to none "$DTRAIN" bench comm --links --ps 1
expect_exit 2 "option 'minibatch' must be in [1, 65536] (as in dtrain train), got 2147483647" -- \
  "$DTRAIN" model --name lenet5 --minibatch 2147483647
expect_exit 2 "option 'classes' must be in [1, 100000] (what dtrain train takes), got 2147483647" -- \
  "$DTRAIN" data synth --out "$SCRATCH/c.h5" --n 4 --shape 8x8x1 --classes 2147483647
expect_exit 2 "option 'shape': ' 8x8x1' is not HxWxC" -- "$DTRAIN" data synth --out "$SCRATCH/c.h5" --n 4 --shape " 8x8x1"
expect_exit 2 "option 'shape': '+8x8x1' is not HxWxC" -- "$DTRAIN" data synth --out "$SCRATCH/c.h5" --n 4 --shape "+8x8x1"
[ ! -e "$SCRATCH/c.h5" ] || fail "a refused synth wrote $SCRATCH/c.h5"
# An output name too long for the temporary beside it is refused before the work (it failed after training).
long=$(printf 'z%.0s' $(seq 252)).h5
expect_exit 2 "option 'save-params': the file name 'zzzz" -- "$DTRAIN" train --job "$J" "${data[@]}" --max-steps 1 \
  --metrics "" --save-params "$SCRATCH/$long" --runs-dir "$SCRATCH/long"
# --metrics-append continues metrics files only (it cut a notes file's last line and appended to it).
printf 'line one\nlast line without newline' > "$SCRATCH/notes.txt"
expect_exit 2 "is not a metrics file" -- "$DTRAIN" train --job "$J" "${data[@]}" --max-steps 1 --save-params "" \
  --metrics "$SCRATCH/notes.txt" --metrics-append true
[ "$(cat "$SCRATCH/notes.txt")" = "$(printf 'line one\nlast line without newline')" ] || fail "a refused append changed the file"
# … also when only a later line is foreign (the writer's refusal came after the failure recorder, which wrote into it).
head -n 1 m.jsonl > "$SCRATCH/mixed.jsonl"; printf 'my notes\nimportant: do not lose' >> "$SCRATCH/mixed.jsonl"
cp "$SCRATCH/mixed.jsonl" "$SCRATCH/mixed.before"
expect_exit 2 "its line 2, 'my notes'" -- "$DTRAIN" train --job "$J" "${data[@]}" --max-steps 1 --save-params "" \
  --metrics "$SCRATCH/mixed.jsonl" --metrics-append true
cmp -s "$SCRATCH/mixed.jsonl" "$SCRATCH/mixed.before" || fail "a refused append changed the file: $(tail -c 300 "$SCRATCH/mixed.jsonl")"
# A tail of zero bytes after a crash is cut, and the file stays readable.
cp m.jsonl "$SCRATCH/zeros.jsonl"; head -c 100 /dev/zero >> "$SCRATCH/zeros.jsonl"
"$DTRAIN" train --job "$J" "${data[@]}" --max-steps 3 --log-interval 1 --threads 1 --save-params "" \
  --metrics "$SCRATCH/zeros.jsonl" --metrics-append true > /dev/null 2>&1 || fail "append after a zero tail failed"
"$DTRAIN" report --metrics "$SCRATCH/zeros.jsonl" > /dev/null || fail "report cannot read a file continued after a zero tail"
# A checkpoint folder that is the run folders' parent: both 'latest' names clash.
expect_exit 2 "option 'checkpoint-dir'" -- "$DTRAIN" train --job "$J" "${data[@]}" --max-steps 1 \
  --runs-dir "$SCRATCH/cr" --run-name e12 --checkpoint-dir "$SCRATCH/cr/e12"
echo "ok: unread options, train's limits, long names, foreign files and clashing folders refused"
