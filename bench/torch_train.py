#!/usr/bin/env python3
"""bench/torch_train.py — the PyTorch peer of bench/vs_pytorch.sh.

Trains, on the CPU, the same network that `dtrain train --model M` trains, with
the same minibatch, thread count and optimizer (SGD, momentum 0.9, cross-entropy,
mean over the minibatch), and prints the steady-state throughput:

    torch <version> model <M> minibatch <B> threads <T> steps <S> images_per_s <X>

plus, with --json FILE, one JSON object {"images_per_s", "step_s_median", ...}.

Models:
  lenet5       dtrain's LeNet-5 exactly: 1×28×28 → conv 6@5×5 pad 2 → ReLU →
               maxpool 2 → conv 16@5×5 → ReLU → maxpool 2 → fc 120 → ReLU →
               fc 84 → ReLU → fc 10 (61,706 parameters, asserted). Inputs are
               real Fashion-MNIST from dtrain's HDF5 file (--data, needs h5py)
               or the gzipped IDX files (--idx-dir); every step draws a random
               minibatch from the uint8 images held in memory and normalises it
               ((x/255 − mean)/std), which is timed, as dtrain's input work is.
  alexnet-owt  torchvision.models.alexnet(num_classes=1000) (dropout 0.5)
  resnet50     torchvision.models.resnet50(num_classes=1000)
               For these two, one random 3×224×224 minibatch and random labels
               are made once: they measure compute, not input.

Precision: --precision fp32 (default), or bf16: forward and loss inside
torch.autocast("cpu", dtype=torch.bfloat16) (convolutions and matrix
products in bf16, fp32 master weights and optimizer: PyTorch's mixed
precision on the CPU), backward and SGD outside it, as PyTorch documents.

Timing: --warmup steps are run and discarded, then --steps steps are each
timed with time.perf_counter(); images/s = steps·B / (sum of step times).

Run it with Debian's interpreter (/usr/bin/python3, python3-torch 1.13) or any
other Python that has torch and torchvision (e.g. a PyPI venv).
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import sys
import time

import torch
import torch.nn as nn


class LeNet5(nn.Module):
    """dtrain's layers::lenet5 (layers/models.cpp)."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def read_idx(path):
    """A gzipped IDX file (uint8 data) → (dims, bytes)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit(f"{path}: not a uint8 IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return dims, raw[4 + 4 * ndim:]


def load_fashion(args):
    """uint8 images [N, 28, 28] and int64 labels [N] as torch tensors."""
    if args.data:
        import h5py  # Debian: python3-h5py (scripts/setup-deps.sh with DTRAIN_BENCH_DEPS=1)
        with h5py.File(args.data, "r") as f:
            images = torch.from_numpy(f["images"][...])  # [N, H, W, C] uint8
            labels = torch.from_numpy(f["labels"][...]).long()
        if images.dim() != 4 or images.shape[1:] != (28, 28, 1):
            sys.exit(f"{args.data}: /images is {tuple(images.shape)}, expected [N, 28, 28, 1]")
        return images[..., 0].contiguous(), labels
    (n, h, w), img = read_idx(os.path.join(args.idx_dir, "train-images-idx3-ubyte.gz"))
    (nl,), lab = read_idx(os.path.join(args.idx_dir, "train-labels-idx1-ubyte.gz"))
    if nl != n or (h, w) != (28, 28):
        sys.exit(f"{args.idx_dir}: unexpected IDX shapes")
    images = torch.frombuffer(bytearray(img), dtype=torch.uint8).view(n, h, w)
    labels = torch.frombuffer(bytearray(lab), dtype=torch.uint8).long()
    return images, labels


def make_model(name):
    if name == "lenet5":
        m = LeNet5()
        n = sum(p.numel() for p in m.parameters())
        assert n == 61706, f"LeNet-5 has {n} parameters, dtrain's has 61,706"
        return m
    import torchvision
    if name == "alexnet-owt":
        return torchvision.models.alexnet(num_classes=1000)
    if name == "resnet50":
        return torchvision.models.resnet50(num_classes=1000)
    sys.exit(f"unknown model {name}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=["lenet5", "alexnet-owt", "resnet50"])
    p.add_argument("--minibatch", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--data", default="", help="LeNet: Fashion-MNIST HDF5 written by `dtrain data`")
    p.add_argument("--idx-dir", default="/usr/share/datasets/fashion-mnist",
                   help="LeNet without --data: directory of the gzipped IDX files")
    p.add_argument("--mean", type=float, default=0.2860)
    p.add_argument("--std", type=float, default=0.3530)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--json", default="", help="append one JSON result object to this file")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)

    model = make_model(args.model)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()
    b = args.minibatch

    if args.model == "lenet5":
        images, labels = load_fashion(args)
        gen = torch.Generator().manual_seed(args.seed)
        n = images.shape[0]

        def batch():
            idx = torch.randint(0, n, (b,), generator=gen)
            x = images.index_select(0, idx).unsqueeze(1).float()
            x = (x / 255.0 - args.mean) / args.std
            return x, labels.index_select(0, idx)
    else:
        x_fixed = torch.randn(b, 3, 224, 224)
        y_fixed = torch.randint(0, 1000, (b,))

        def batch():
            return x_fixed, y_fixed

    def step():
        x, y = batch()
        opt.zero_grad(set_to_none=True)
        if args.precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    times = []
    loss = float("nan")
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    ips = b * len(times) / sum(times)
    print(f"torch {torch.__version__} model {args.model} minibatch {b} threads {args.threads} {args.precision} "
          f"steps {args.steps} images_per_s {ips:.1f} step_ms_median {1e3 * statistics.median(times):.2f} "
          f"loss {loss:.4f}", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"torch": torch.__version__, "model": args.model, "minibatch": b,
                                "threads": args.threads, "precision": args.precision, "steps": args.steps,
                                "images_per_s": ips, "step_s_median": statistics.median(times),
                                "loss": loss}) + "\n")


if __name__ == "__main__":
    main()
