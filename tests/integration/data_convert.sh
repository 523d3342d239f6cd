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
[ ! -e "$WORK/x" ] || fail "a refused conversion left $WORK/x"
