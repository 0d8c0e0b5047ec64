#!/usr/bin/env python3
"""A launch-bound single-GPU PyTorch training loop, for AON's always-on benchmark.

    python3 bench/always_on/train_loop.py [--steps 1500] [--warmup 50] [--batch 8]
                                          [--seq 64] [--torch-profiler] [--no-nvtx]

A 4-layer transformer encoder (d_model 256, 4 heads) with AdamW on a small batch:
a few hundred kernels of a few microseconds per step, so the step time is set by
launches, the case where a profiler's per-launch cost shows most. Every step is
one NVTX range "step <i>" (AON's default step pattern) unless --no-nvtx. The
data and the model are seeded: every run does the same work.

Prints, after the run, one line per measured step time and a summary:

    STEP_MS <ms> ...            (all steps after --warmup, one line)
    TRAIN steps=<n> median_ms=<m> mean_ms=<m> loss=<final loss>
"""

import argparse
import contextlib
import statistics
import sys
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--warmup", type=int, default=50, help="steps left out of the statistics")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--torch-profiler", action="store_true",
                   help="run inside torch.profiler.profile(activities=[CPU, CUDA])")
    p.add_argument("--no-nvtx", action="store_true", help="no NVTX step ranges")
    args = p.parse_args()
    if args.steps <= args.warmup or args.warmup < 0 or args.batch < 1 or args.seq < 1:
        p.error("--steps must exceed --warmup >= 0; --batch and --seq must be >= 1")
    if not torch.cuda.is_available():
        print("FAIL no CUDA device", flush=True)
        return 1
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.seq, 256, device=dev)
    target = torch.randn(args.batch, args.seq, 256, device=dev)

    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        ctx = contextlib.nullcontext()
    times = []
    torch.cuda.synchronize()
    with ctx:
        for i in range(args.steps):
            t0 = time.perf_counter_ns()
            if not args.no_nvtx:
                torch.cuda.nvtx.range_push(f"step {i}")
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
            opt.step()
            loss_value = loss.item()  # the step's end on the host: a real loop reads its loss
            if not args.no_nvtx:
                torch.cuda.nvtx.range_pop()
            times.append((time.perf_counter_ns() - t0) / 1e6)
    if not (loss_value == loss_value):  # NaN: something broke
        print("FAIL loss is NaN", flush=True)
        return 1
    kept = times[args.warmup:]
    print("STEP_MS " + " ".join(f"{t:.4f}" for t in kept), flush=True)
    print(f"TRAIN steps={len(kept)} median_ms={statistics.median(kept):.4f} "
          f"mean_ms={statistics.mean(kept):.4f} loss={loss_value:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
