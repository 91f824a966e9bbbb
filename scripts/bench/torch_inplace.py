#!/usr/bin/env python3
"""PyTorch's side of examples/inplace_step.rs: SGD with momentum in place,
m <- 0.9 m + g, p <- p - lr m (p, m f32; g bf16), timed like the example (50 steps
after 3 untimed, host clock around a synchronize). Eager in-place ops, and
torch.compile of the same function (which keeps the mutation of its inputs).

    python3 scripts/bench/torch_inplace.py [PARAMS]
"""
import sys
import time

import torch


def step(p, m, g, lr: float):
    m.mul_(0.9).add_(g.float())
    p.add_(m, alpha=-lr)


def timed(fn, args, iters=50):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6 / iters


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 26
    p = torch.randn(n, device="cuda")
    m = torch.randn(n, device="cuda")
    g = torch.randn(n, device="cuda").bfloat16()
    args = (p, m, g, 1e-3)
    print(f"torch {torch.__version__}, {n} parameters")
    print("| variant | us per step | GB/s |")
    print("|---|---:|---:|")
    for name, fn in [("torch eager (in-place ops)", step), ("torch.compile", torch.compile(step))]:
        us = timed(fn, args)
        print(f"| {name} | {us:.1f} | {18 * n / us / 1e3:.0f} |")


if __name__ == "__main__":
    main()
