#!/usr/bin/env python3
"""memory_bound: most of every step is a DRAM-bound elementwise phase.

Planted: every step has two NVTX phases. "elementwise" computes t = a * b + c
over --mb MB float32 tensors --reps times (two streaming kernels per rep,
torch.mul and an in-place add: DRAM bandwidth, no reuse); "gemm" is short: --gemms
bf16 matmuls of --gemm-n, then a tiny torch.optim.SGD step. The GPU never runs
dry: each phase's host range is closed when the GPU finishes its work, by waiting
on an event while the next work is already queued (the gemm phase's matmuls are
queued before the host waits for the elementwise work; the gemm range waits for
the event before its last matmul), so the ranges line up with the GPU work
within about one matmul.

A correct profiler says first: phase-bottleneck: phase "elementwise" is
memory-bound, for about elementwise_s of the run.

Truth (TRUTH line): elementwise_s = sum over all steps (warm-up included: the
profiler sees them too) of the torch.cuda.Event time from the first to the last
elementwise kernel of the step; elementwise_gb_s = the bytes those kernels move
(3 tensors each: 6 x mb per rep) / elementwise_s; gemm_s likewise for the gemm
phase (matmuls + the SGD step); elementwise_range_s / gemm_range_s = the host
wall of the NVTX ranges, for comparison. NVTX: "step" > "elementwise", "gemm".
"""
import time

import common


def main():
    p = common.parser(__doc__, steps=200)
    p.add_argument("--mb", type=float, default=1024.0, help="MB (MiB) per tensor")
    p.add_argument("--reps", type=int, default=6, help="t = a * b + c per step")
    p.add_argument("--gemm-n", type=int, default=4096)
    p.add_argument("--gemms", type=int, default=4, help="matmuls per step")
    args = p.parse_args()

    import torch
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    n = int(args.mb * 2 ** 20) // 4
    a, b, c = (torch.rand(n, device=dev) for _ in range(3))
    t = torch.empty(n, device=dev)
    m1 = torch.randn(args.gemm_n, args.gemm_n, device=dev).to(torch.bfloat16)
    m2 = torch.randn(args.gemm_n, args.gemm_n, device=dev).mul_(args.gemm_n ** -0.5).to(
        torch.bfloat16)
    y = torch.empty(args.gemm_n, args.gemm_n, device=dev, dtype=torch.bfloat16)
    w = torch.nn.Parameter(torch.full((64,), 0.5, device=dev))
    opt = torch.optim.SGD([w], lr=1e-3)
    torch.cuda.synchronize()

    clock = common.StepClock()
    ew = common.EventPairs(torch)
    gm = common.EventPairs(torch)
    ew_range, gm_range = [], []
    for _ in range(clock.warmup + args.steps):
        clock.begin()
        nvtx.range_push("step")
        r0 = time.perf_counter()
        nvtx.range_push("elementwise")
        ew.start()
        for _ in range(args.reps):
            torch.mul(a, b, out=t)
            t.add_(c)
        ew_done = ew.stop()
        # Queue the gemm phase now, so the GPU has work while the host waits for
        # the elementwise kernels to finish (and the range ends with them).
        gm.start()
        before_last = torch.cuda.Event()
        for k in range(args.gemms):
            if k == args.gemms - 1:
                before_last.record()
            torch.mm(m1, m2, out=y)
        ew_done.synchronize()
        nvtx.range_pop()
        r1 = time.perf_counter()
        nvtx.range_push("gemm")
        loss = (y[0, :64].float() * w).square().sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        gm.stop()
        before_last.synchronize()  # the last matmul and the SGD step are still queued
        nvtx.range_pop()
        r2 = time.perf_counter()
        nvtx.range_pop()
        clock.end()
        ew_range.append(r1 - r0)
        gm_range.append(r2 - r1)

    ew_ms = ew.ms()
    gm_ms = gm.ms()
    ew_s = sum(ew_ms) / 1e3
    moved = 6.0 * n * 4 * args.reps * len(ew_ms)
    truth = clock.figures()
    truth.update({
        "elementwise_s": ew_s,
        "elementwise_gb_s": moved / ew_s / 1e9,
        "gemm_s": sum(gm_ms) / 1e3,
        "elementwise_range_s": sum(ew_range),
        "gemm_range_s": sum(gm_range),
        "elementwise_ms_per_step": common.median(clock.measured(ew_ms)),
        "mb": n * 4 / 2 ** 20,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
