#!/usr/bin/env bash
# Converts Debian's Fashion-MNIST into $WORK/data and checks both files exist
# with the expected sizes (also the fixture of the training tests).
source "$(dirname "$0")/lib.sh"
rm -rf "$WORK/data"  # the fixture: converted anew each time (dtrain refuses to overwrite)
"$DTRAIN" data fashion-mnist --out "$WORK/data"
h5ls "$WORK/data/fashion-mnist-train.h5" | grep -q "images.*Dataset {60000, 28, 28, 1}" || fail "train images shape"
h5ls "$WORK/data/fashion-mnist-test.h5" | grep -q "labels.*Dataset {10000}" || fail "test labels shape"
# A missing source folder is a usage error naming it.
expect_exit 2 /nonexistent -- "$DTRAIN" data fashion-mnist --src /nonexistent --out "$WORK/x"
# A source folder nobody typed says where it came from.
expect_exit 2 "(the source folder is \$DTRAIN_FASHION_DIR, as --src was not given)" -- \
  env DTRAIN_FASHION_DIR=/nonexistent "$DTRAIN" data fashion-mnist --out "$WORK/x"
# An option the dataset does not read is refused, not ignored.
mkdir -p "$WORK/q/c0" && rm -f "$WORK/q/a.h5"*
python3 -c "import zlib,struct,sys
def ch(t,d): return struct.pack('>I',len(d))+t+d+struct.pack('>I',zlib.crc32(t+d)&0xffffffff)
sys.stdout.buffer.write(b'\x89PNG\r\n\x1a\n'+ch(b'IHDR',struct.pack('>IIBBBBB',8,8,8,0,0,0,0))+ch(b'IDAT',zlib.compress(b''.join(b'\x00'+bytes(range(8)) for _ in range(8))))+ch(b'IEND',b''))" > "$WORK/q/c0/i.png"
"$DTRAIN" data imagefolder --root "$WORK/q" --out "$WORK/q/a.h5" --store raw --size 8 --quality 95 2> "$WORK/q.err" ||
  fail "imagefolder --store raw --quality 95: $(cat "$WORK/q.err")"
grep -q "option 'quality' is for --store jpeg, unused with --store raw" "$WORK/q.err" || fail "--quality with raw: no warning"
expect_exit 2 "dtrain data imagefolder: option 'classes' is not read by this dataset (it is synth's)" -- \
  "$DTRAIN" data imagefolder --root "$WORK/x" --out "$WORK/x/a.h5" --store jpeg --size 32 --classes 10
expect_exit 2 "dtrain data fashion-mnist: option 'shape' is not read by this dataset (it is synth's)" -- \
  "$DTRAIN" data fashion-mnist --out "$WORK/x" --shape 28x28x1
expect_exit 2 "dtrain data synth: option 'src' is not read by this dataset (it is fashion-mnist's)" -- \
  "$DTRAIN" data synth --out "$WORK/x/s.h5" --n 4 --src /tmp
[ ! -e "$WORK/x" ] || fail "a refused conversion left $WORK/x"
# A write that fails (a full disk: here a file-size limit below the training
# split's 47 MB) leaves no file and none of the folders the call made.
rc=0; (trap '' XFSZ; ulimit -f 20000; exec "$DTRAIN" data fashion-mnist --out "$WORK/n1/n2/n3") > "$WORK/n1.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a conversion over the file-size limit: exit $rc, wanted 1: $(cat "$WORK/n1.log")"
[ ! -e "$WORK/n1" ] || fail "a failed conversion left $(find "$WORK/n1")"
echo "ok: a failed write leaves no file and no folder it made"
# A control character in an environment variable is refused, not made a folder's name.
expect_exit 2 "environment variable DTRAIN_DATA_DIR='dd\x1b[31m' holds the control character \x1b" -- \
  env DTRAIN_DATA_DIR=$'dd\e[31m' "$DTRAIN" data fashion-mnist
