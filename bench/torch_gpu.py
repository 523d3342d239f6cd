#!/usr/bin/env python3
"""bench/torch_gpu.py — the PyTorch peer of dtrain_gpu_bench (bench/gpu-check.sh).

Trains torchvision's alexnet (the "one weird trick" AlexNet dtrain calls
alexnet-owt) or resnet50 on one GPU with the settings dtrain_gpu_bench uses:
one random [B, 3, 224, 224] minibatch U(-1, 1) and random labels made once on
the GPU, cross-entropy (mean over the minibatch), SGD momentum 0.9 lr 0.01,
FP32 (TF32 off) or, with --tf32, TF32 in convolutions and matmuls, or, with
--bf16, forward and loss under torch.autocast("cuda", dtype=torch.bfloat16)
(convolutions and matmuls in bf16, f32 weights and optimizer: the peer of
dtrain_gpu_bench --bf16; TF32 stays off for what autocast leaves in f32);
cudnn.benchmark on (PyTorch's counterpart of dtrain's per-layer algorithm search).
--warmup steps are discarded, then --steps steps are each timed after a
torch.cuda.synchronize(). Prints:

    torch <version> model <M> minibatch <B> tf32 <0|1> bf16 <0|1> steps <S> images_per_s <X> step_s_median <Y>
"""
import argparse
import statistics
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, choices=["alexnet-owt", "resnet50"])
    p.add_argument("--minibatch", type=int, required=True)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--bf16", action="store_true")
    a = p.parse_args()
    if a.tf32 and a.bf16:
        print("torch_gpu.py: --tf32 and --bf16 are separate rows; pick one", file=sys.stderr)
        return 2
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"torch_gpu.py: {e}; install torch and torchvision (CUDA build)", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_gpu.py: torch sees no CUDA device", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    dev = torch.device("cuda")
    model = (torchvision.models.alexnet(num_classes=1000) if a.model == "alexnet-owt"
             else torchvision.models.resnet50(num_classes=1000)).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.empty(a.minibatch, 3, 224, 224, device=dev).uniform_(-1, 1)
    y = torch.randint(0, 1000, (a.minibatch,), device=dev)
    times = []
    for s in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # dtrain also brings the loss to the host every step
        torch.cuda.synchronize()
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    print(f"torch {torch.__version__} model {a.model} minibatch {a.minibatch} tf32 {int(a.tf32)} bf16 {int(a.bf16)} "
          f"steps {a.steps} images_per_s {a.steps * a.minibatch / sum(times):.1f} "
          f"step_s_median {statistics.median(times):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
