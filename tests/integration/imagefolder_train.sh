#!/usr/bin/env bash
# It trains: ResNet-20 trained from an ImageNet-style tree of Fashion-MNIST's
# real images (tests/image_tree.hpp, write_fashion_tree: a third each gray PNG
# 28×28, gray-as-RGB JPEG 28×28, RGB PNG upscaled to 56×56), converted by
# `dtrain data imagefolder` to a raw and to a jpeg store (28×28×3; the
# 1-channel model reads luma), reaches a test accuracy within 1 point of the
# same training from the IDX-converted file (`dtrain data fashion-mnist`):
# same seed, same steps, the same 8,000 training and 10,000 test images (in
# another order: the converter's is class by class). 3 epochs, minibatch 64,
# lr 0.05 cosine, flips; each run ~90 s on one core, ~5 min in all.
# The two conversions with 2 threads also guard the libvips/liborc crash
# (io/image_codec.cpp, init_vips).
source "$(dirname "$0")/lib.sh"
: "${MAKE_TREE:?path of dtrain_make_image_tree}"
export OMP_NUM_THREADS=1
py=$(dt_python)
N_TRAIN=8000 N_TEST=10000
"$MAKE_TREE" --fashion tree $N_TRAIN $N_TEST
"$DTRAIN" data fashion-mnist --out idx > /dev/null
for store in raw jpeg; do
  "$DTRAIN" data imagefolder --root tree/train --out tr-$store.h5 --store $store --size 28 --quality 90 --threads 2 \
    | tail -1
  "$DTRAIN" data imagefolder --root tree/val --labels tree/val_labels.txt --class-table tr-$store.h5 \
    --out va-$store.h5 --store $store --size 28 --quality 90 --threads 2 | tail -1
done
h5ls tr-raw.h5 | grep -q "images.*Dataset {$N_TRAIN, 28, 28, 3}" || fail "raw train store: $(h5ls tr-raw.h5)"

common=(--job "$SRC/jobs/fashion_resnet.ini" --epochs 3 --warmup-epochs 0 --lr 0.05 --minibatch 64
        --augment-pad 0 --augment-flip true --seed 1 --threads 1 --loader-threads 2 --log-interval 1000
        --save-params "")
train() {  # NAME TRAIN TEST [ARGS...]
  local name=$1 tr=$2 te=$3; shift 3
  mpirun -np 1 "$DTRAIN" train "${common[@]}" --train-data "$tr" --test-data "$te" --metrics $name.jsonl "$@" \
    > $name.log 2>&1 || fail_log "$name.log" "$name: training failed"
  grep -F "final test accuracy" $name.log
}
train idx idx/fashion-mnist-train.h5 idx/fashion-mnist-test.h5 --max-train-samples $N_TRAIN
train raw tr-raw.h5 va-raw.h5
train jpeg tr-jpeg.h5 va-jpeg.h5

"$py" - <<'PY' || fail "an imagefolder-trained accuracy is more than 1 point from the IDX-trained one"
import json
def last(name, field):
    return [r for r in map(json.loads, open(name + ".jsonl")) if r.get("kind") == "epoch"][-1][field]
ref = last("idx", "test_accuracy")
steps = {n: sum(1 for r in map(json.loads, open(n + ".jsonl")) if r.get("kind") == "step") for n in ("idx", "raw", "jpeg")}
bad = False
for name in ("raw", "jpeg"):
    acc = last(name, "test_accuracy")
    print(f"{name}: test accuracy {100 * acc:.2f}% vs {100 * ref:.2f}% from the IDX file ({100 * (acc - ref):+.2f} points)")
    bad |= abs(acc - ref) > 0.01
if len(set(steps.values())) != 1:
    print("not the same number of steps:", steps); bad = True
if ref < 0.75:
    print("the IDX-trained reference did not learn:", ref); bad = True
raise SystemExit(1 if bad else 0)
PY
echo "ok: trained from the converted tree (raw, jpeg) within 1 point of the IDX file"
