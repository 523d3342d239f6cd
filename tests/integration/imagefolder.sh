#!/usr/bin/env bash
# dtrain data imagefolder from the command line, on the Fashion-MNIST image tree
# of tests/image_tree.hpp (written by $MAKE_TREE): both stores; an interrupted
# conversion (SIGKILL through DTRAIN_CONVERT_KILL_AT, twice) continued by
# rerunning the same command gives the same file (h5diff) and report as an
# uninterrupted one; a partial output of other options is refused; exit 2 for
# an existing output, an empty tree, a labels file naming a missing file,
# missing options. The pixel checks are unit tests ([imagefolder]).
source "$(dirname "$0")/lib.sh"
: "${MAKE_TREE:?path of dtrain_make_image_tree}"
"$MAKE_TREE" tree 12 30
T=tree/train
n_train=133 n_bad=4  # 12 per class + 13 odd/bad files, 4 of them bad (tests/image_tree.cpp)
convert() { "$DTRAIN" data imagefolder --root "$T" --size 32 --quality 85 "$@"; }

# Uninterrupted conversions: the references.
for store in raw jpeg; do
  convert --store $store --out $store.h5 --threads 2 | tee $store.log
  grep -qF "$store.h5: $((n_train - n_bad)) images" $store.log || fail "$store: summary line"
  grep -qF "10 classes, $n_bad skipped (listed in $store.h5.skipped.txt)" $store.log || fail "$store: skipped count"
  [ "$(wc -l < $store.h5.skipped.txt)" = $n_bad ] || fail "$store: report lines"
done
h5ls raw.h5 | grep -q "images.*Dataset {$((n_train - n_bad))/$n_train, 32, 32, 3}" || fail "raw images shape (N / the inputs, the maximum)"
h5ls jpeg.h5 | grep -q "offsets.*Dataset {$((n_train - n_bad + 1))}" || fail "jpeg offsets shape"
grep -qF "trouser/notes.JPEG" raw.h5.skipped.txt || fail "the text file named .JPEG is not listed"
grep -qF "ankle_boot/truncated.JPEG" raw.h5.skipped.txt || fail "the truncated JPEG is not listed"

# Kill, resume (killed again), resume: the same file as the uninterrupted run.
for store in raw jpeg; do
  rc=0
  DTRAIN_CONVERT_KILL_AT=50 convert --store $store --out k-$store.h5 --threads 2 --checkpoint-every 16 > kill1.log 2>&1 || rc=$?
  [ $rc = 137 ] || fail "$store: the first run was not killed (exit $rc): $(cat kill1.log)"
  [ -f k-$store.h5.partial ] && [ ! -e k-$store.h5 ] || fail "$store: after the kill: $(ls)"
  expect_exit 2 "left by a conversion with other options" -- \
    "$DTRAIN" data imagefolder --root "$T" --size 24 --quality 85 --store $store --out k-$store.h5
  rc=0
  DTRAIN_CONVERT_KILL_AT=30 convert --store $store --out k-$store.h5 --threads 3 --checkpoint-every 16 > kill2.log 2>&1 || rc=$?
  [ $rc = 137 ] || fail "$store: the second run was not killed (exit $rc): $(cat kill2.log)"
  # Checkpoints every 16 inputs; the kill comes at the first one with ≥ 50 images stored by the run (64
  # inputs, one bad), before it is recorded: 48 inputs stand. The second run (≥ 30 images) is killed at
  # input 80, so 64 stand.
  grep -qF "resuming k-$store.h5.partial: 48 of $n_train inputs done" kill2.log || fail "$store: $(cat kill2.log)"
  convert --store $store --out k-$store.h5 --threads 1 | tee resume.log
  grep -qF "resuming k-$store.h5.partial: 64 of $n_train inputs done" resume.log || fail "$store: second resume"
  grep -qF "(resumed after 64 of $n_train)" resume.log || fail "$store: summary of a resumed run"
  h5diff $store.h5 k-$store.h5 || fail "$store: the resumed file differs from the uninterrupted one"
  cmp $store.h5.skipped.txt k-$store.h5.skipped.txt || fail "$store: the resumed report differs"
  ls | grep -q '\.partial' && fail "$store: partial files left: $(ls)"
  echo "ok: $store: killed twice, resumed, same file"
done

# A run stopped after F took its name, before its report did: the same command finishes it
# (the command line must not refuse the F it finds), another conversion's command refuses F.
cp raw.h5 f-raw.h5 && cp raw.h5.skipped.txt f-raw.h5.skipped.txt.partial
expect_exit 2 "f-raw.h5 exists" -- convert --store jpeg --out f-raw.h5
convert --store raw --out f-raw.h5 --threads 2 > finish.log 2>&1 || fail "finishing: $(cat finish.log)"
grep -qF "finished the end of an earlier run" finish.log || fail "finishing: $(cat finish.log)"
cmp raw.h5.skipped.txt f-raw.h5.skipped.txt && [ ! -e f-raw.h5.skipped.txt.partial ] || fail "finishing: $(ls)"
echo "ok: a stopped end finished by the same command"
# This conversion's partial file over an F of its own (an --overwrite run stopped): the same
# command resumes it and its commit replaces F (not "finished" from the old F, not refused).
cp raw.h5 o-raw.h5
rc=0; DTRAIN_CONVERT_KILL_AT=50 convert --store raw --out o-raw.h5 --overwrite true --checkpoint-every 16 > o.log 2>&1 || rc=$?
[ $rc = 137 ] && [ -f o-raw.h5.partial ] || fail "overwrite run not killed (exit $rc): $(cat o.log)"
convert --store raw --out o-raw.h5 --threads 2 > o2.log 2>&1 || fail "resume over own F: $(cat o2.log)"
grep -qF "resuming o-raw.h5.partial" o2.log || fail "resume over own F did not resume: $(cat o2.log)"
h5diff raw.h5 o-raw.h5 && cmp raw.h5.skipped.txt o-raw.h5.skipped.txt || fail "resume over own F: another file"
echo "ok: an --overwrite run's partial file resumed over its own F"
# A raw file of another size than the model's input, fitted by --eval-resize with --augment none:
# the job's check accepted it and the training loader refused it (it was not given fit_raw).
"$DTRAIN" train --model lenet5 --train-data raw.h5 --test-data "" --augment none --eval-resize 32 --max-steps 2 \
  --minibatch 8 --threads 1 --runs-dir runs --save-params "" > fit.log 2>&1 || fail "fit_raw: $(cat fit.log)"
echo "ok: --augment none --eval-resize trains on a raw file of another size"

# Validation with the train file's class table.
"$DTRAIN" data imagefolder --root tree/val --labels tree/val_labels.txt --class-table raw.h5 --out val.h5 \
  --store raw --size 32 | grep -qF "val.h5: 29 images 32x32x3 (raw), 10 classes, 1 skipped" || fail "val"

# Exit 2, nothing written.
expect_exit 2 "option 'out': " -- convert --store raw --out raw.h5
touch old.h5.skipped.txt  # the report's name is taken
expect_exit 2 "old.h5.skipped.txt" -- convert --store raw --out old.h5
mkdir -p empty/n01440764
expect_exit 2 "no images" -- "$DTRAIN" data imagefolder --root empty --out e.h5 --store raw --size 32
printf 'ILSVRC2012_val_00000001.JPEG tshirt_top\nILSVRC2012_val_00012345.JPEG bag\n' > bad_labels.txt
expect_exit 2 "ILSVRC2012_val_00012345.JPEG, which does not exist" -- \
  "$DTRAIN" data imagefolder --root tree/val --labels bad_labels.txt --out b.h5 --store jpeg --size 32
expect_exit 2 "option 'store' is required" -- "$DTRAIN" data imagefolder --root "$T" --out s.h5 --size 32
expect_exit 2 "option 'size'" -- "$DTRAIN" data imagefolder --root "$T" --out s.h5 --store jpeg
for f in e.h5 b.h5 s.h5; do ls | grep -q "^$f" && fail "$f: something was written: $(ls)"; done
[ "$(ls | grep '^old\.h5')" = old.h5.skipped.txt ] || fail "old.h5: something was written: $(ls)"
# (it said "cannot create nodir/x/o.h5.lock: No such file or directory")
expect_exit 2 "option 'out': the folder 'nodir/x' of nodir/x/o.h5 does not exist: make it first" -- "$DTRAIN" data imagefolder --root "$T" --out nodir/x/o.h5 --store raw --size 32
# The same for data synth (it failed inside HDF5, exit 1), and a folder that is a dangling link.
expect_exit 2 "dtrain data synth: option 'out': the folder 'nodir/x' of nodir/x/s.h5 does not exist: make it first" -- \
  "$DTRAIN" data synth --shape 8x8x1 --n 4 --classes 2 --out nodir/x/s.h5
ln -s gone dangling
expect_exit 2 "option 'out': the folder 'dangling' of dangling/o.h5 is a link to 'gone', which is not a folder" -- \
  "$DTRAIN" data imagefolder --root "$T" --out dangling/o.h5 --store raw --size 32
rm dangling

# A second converter of the same F while the first runs (stopped here with SIGSTOP
# once it holds F.lock): exit 2 naming the lock; the first then finishes alone.
"$DTRAIN" data imagefolder --root "$T" --size 32 --store raw --out lk.h5 --threads 1 > lk.log 2>&1 &
first=$!
for _ in $(seq 200); do [ -e lk.h5.lock ] && break; sleep 0.05; done
kill -STOP $first
expect_exit 2 "lk.h5 is being written by another converter (lk.h5.lock is held by: dtrain data imagefolder, pid $first on " -- \
  "$DTRAIN" data imagefolder --root "$T" --size 32 --store raw --out lk.h5 --threads 1
kill -CONT $first
wait $first || fail "the first converter failed: $(cat lk.log)"
h5diff raw.h5 lk.h5 || fail "the first converter's file differs from the reference"
[ ! -e lk.h5.lock ] || fail "lk.h5.lock left"

# Headers that claim more pixels than a file can hold are skipped without allocating for them.
mkdir -p bomb/a bomb/b
"$(dt_python)" - bomb/a/bomb.png <<'PY'
import struct, sys, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
ihdr = struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)   # 30000×30000 RGB, 8 bit
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))
PY
cp "$T"/bag/$(ls "$T"/bag | head -1) bomb/b/
# Peak RSS (KB) from getrusage of the child (a fresh Debian has no /usr/bin/time).
"$(dt_python)" -c 'import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' \
  "$DTRAIN" data imagefolder --root bomb --size 32 --store raw --out bomb.h5 --threads 1 | tail -1 > bomb.rss
grep -qF "a/bomb.png	a PNG of 30000x30000 pixels to decode, more than the limit" bomb.h5.skipped.txt ||
  fail "the PNG bomb is not skipped as such: $(cat bomb.h5.skipped.txt)"
[ "$(cat bomb.rss)" -lt 600000 ] || fail "the PNG bomb took $(cat bomb.rss) KB"

# A test set whose class table differs from the training set's (converted without
# --class-table from a labels file that leaves out a class): refused by dtrain train.
grep -v ' bag$' tree/val_labels.txt | grep -v truncated | grep -v '^#' > nobag_labels.txt
"$DTRAIN" data imagefolder --root tree/val --labels nobag_labels.txt --out nobag.h5 --store raw --size 32 > /dev/null
expect_exit 2 "number their classes differently" -- mpirun -np 1 "$DTRAIN" train --model lenet5 --train-data raw.h5 \
  --test-data nobag.h5 --max-steps 1 --metrics "" --save-params ""
echo "imagefolder: all ok"
