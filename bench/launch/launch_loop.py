#!/usr/bin/env python3
"""Launch loop in PyTorch: the per-op cost of a profiler on a launch-bound eager loop.

    python3 bench/launch/launch_loop.py [--launches 10000] [--reps 5] [--warmup 1000]
                                        [--torch-profiler]

An in-place add of two one-element CUDA tensors, --launches times per repetition
(one kernel launch each), timed from the first add to the end of a
torch.cuda.synchronize() after the last. With --torch-profiler the warm-up and
all repetitions run inside torch.profiler.profile(activities=[CPU, CUDA]) (nothing
is exported). Prints, like bench/launch/launch_loop.cu,

    LAUNCH_REP rep=<i> ns_per_launch=<wall/launches> host_ns_per_launch=<issue/launches>
    LAUNCH ns_per_launch=<median> launches=<n> reps=<r> launches_per_s=<..> host_ns_per_launch=<median>
"""

import argparse
import contextlib
import statistics
import sys
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--launches", type=int, default=10000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--torch-profiler", action="store_true",
                   help="run inside torch.profiler.profile(activities=[CPU, CUDA])")
    args = p.parse_args()
    if args.launches < 1 or args.reps < 1 or args.warmup < 0:
        p.error("--launches and --reps must be >= 1, --warmup >= 0")
    if not torch.cuda.is_available():
        print("FAIL no CUDA device available", flush=True)
        return 1
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    x = torch.zeros(1, device=dev)
    y = torch.ones(1, device=dev)
    torch.cuda.synchronize()

    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        ctx = contextlib.nullcontext()

    wall, host = [], []
    with ctx:
        for _ in range(args.warmup):
            x.add_(y)
        torch.cuda.synchronize()
        for r in range(args.reps):
            t0 = time.perf_counter_ns()
            for _ in range(args.launches):
                x.add_(y)
            t1 = time.perf_counter_ns()
            torch.cuda.synchronize()
            t2 = time.perf_counter_ns()
            wall.append((t2 - t0) / args.launches)
            host.append((t1 - t0) / args.launches)
            print(f"LAUNCH_REP rep={r} ns_per_launch={wall[-1]:.1f} "
                  f"host_ns_per_launch={host[-1]:.1f}", flush=True)
    expected = float(args.warmup + args.reps * args.launches)
    if x.item() != expected:
        print(f"FAIL sum {x.item()} != {expected}", flush=True)
        return 1
    med = statistics.median(wall)
    print(f"LAUNCH ns_per_launch={med:.1f} launches={args.launches} reps={args.reps} "
          f"launches_per_s={1e9 / med:.0f} host_ns_per_launch={statistics.median(host):.1f}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
