#!/usr/bin/env python3
"""compute_bound: large bf16 matmuls keep the GPU busy; nothing is wrong.

Planted: nothing. Every step is one NVTX phase "gemm" of --reps bf16 matmuls of
--n x --n (tensor cores near peak), then a tiny torch.optim.SGD step on a
parameter that reads the product. The host never lets the GPU run dry and never
runs far ahead: it closes each step's range by waiting on an event recorded
before the step's last matmul, so that matmul and the SGD step are still queued
while the host starts the next step.

A correct profiler finds no idle, launch or memory problem: its first finding,
if any, claims only a small share of the step and is none of launch-bound,
host-work or phase-bottleneck about "gemm" (whose verdict is compute-bound).

Truth (TRUTH line): gemm_s = sum over all steps (warm-up included) of the
torch.cuda.Event time around the step's matmuls and SGD step; tflops = the
matmuls' 2 n^3 flops each / gemm_s; gemm_range_s = the host wall of the "gemm"
ranges. NVTX: "step" > "gemm".
"""
import time

import common


def main():
    p = common.parser(__doc__, steps=300)
    p.add_argument("--n", type=int, default=8192, help="matrix size")
    p.add_argument("--reps", type=int, default=4, help="matmuls per step")
    args = p.parse_args()

    import torch
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    a = torch.randn(args.n, args.n, device=dev).to(torch.bfloat16)
    b = torch.randn(args.n, args.n, device=dev).mul_(args.n ** -0.5).to(torch.bfloat16)
    y = torch.empty(args.n, args.n, device=dev, dtype=torch.bfloat16)
    w = torch.nn.Parameter(torch.full((64,), 0.5, device=dev))
    opt = torch.optim.SGD([w], lr=1e-3)
    torch.mm(a, b, out=y)  # cuBLAS start-up, outside the steps
    torch.cuda.synchronize()

    clock = common.StepClock()
    gm = common.EventPairs(torch)
    ranges = []
    for _ in range(clock.warmup + args.steps):
        clock.begin()
        nvtx.range_push("step")
        r0 = time.perf_counter()
        nvtx.range_push("gemm")
        gm.start()
        before_last = torch.cuda.Event()
        for k in range(args.reps):
            if k == args.reps - 1:
                before_last.record()
            torch.mm(a, b, out=y)
        loss = (y[0, :64].float() * w).square().sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        gm.stop()
        before_last.synchronize()  # the last matmul and the SGD step are still queued
        nvtx.range_pop()
        ranges.append(time.perf_counter() - r0)
        nvtx.range_pop()
        clock.end()

    gm_ms = gm.ms()
    gemm_s = sum(gm_ms) / 1e3
    flops = 2.0 * args.n ** 3 * args.reps * len(gm_ms)
    truth = clock.figures()
    truth.update({
        "gemm_s": gemm_s,
        "tflops": flops / gemm_s / 1e12,
        "gemm_range_s": sum(ranges),
        "gemm_ms_per_step": common.median(clock.measured(gm_ms)),
        "n": args.n,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
