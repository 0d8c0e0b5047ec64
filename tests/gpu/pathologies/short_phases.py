#!/usr/bin/env python3
"""short_phases: about a second in all: three NVTX phases of different kinds.

Planted: no steps (no optimizer, no aon_step, no step-named range) and three
phases run once each, about --phase-s apiece, each calibrated beforehand (outside
any range) and closed by a synchronize so its range holds its GPU work:
  "gemm": bf16 matmuls of --n x --n, back to back: compute-bound;
  "copy": over --mb MB float32 buffers, a device-to-device copy and a streaming
          add per round: DRAM-bound, memory-bound;
  "tiny": one-thread-sized kernels (--elems elements) launched one after another
          from Python: the GPU mostly waits for launches, launch-bound.

A correct profiler states no step-based problem; its counters give each phase
its verdict: gemm compute-bound, copy memory-bound, tiny launch-bound
(expected_verdicts).

Truth (TRUTH line): gemm_s, copy_s, tiny_s = torch.cuda.Event time of each phase
(summed over --steps rounds of the three, default 1); run_s = wall from the
first phase's start to the last one's end; steps = 0 and step_ms = 0 (no steps).
"""
import time

import common


def main():
    p = common.parser(__doc__, steps=1)
    p.add_argument("--phase-s", type=float, default=0.3, help="length of each phase (s)")
    p.add_argument("--n", type=int, default=8192, help="matrix size of the gemm phase")
    p.add_argument("--mb", type=float, default=1024.0, help="MB (MiB) per buffer, copy phase")
    p.add_argument("--elems", type=int, default=1, help="elements per tiny kernel")
    args = p.parse_args()  # --steps: rounds of the three phases

    import torch
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    a = torch.randn(args.n, args.n, device=dev).to(torch.bfloat16)
    b = torch.randn(args.n, args.n, device=dev).mul_(args.n ** -0.5).to(torch.bfloat16)
    y = torch.empty(args.n, args.n, device=dev, dtype=torch.bfloat16)
    n = int(args.mb * 2 ** 20) // 4
    src = torch.rand(n, device=dev)
    dst = torch.empty(n, device=dev)
    out = torch.empty(n, device=dev)
    tiny = torch.zeros(args.elems, device=dev)

    def gemm_round():
        torch.mm(a, b, out=y)

    def copy_round():
        dst.copy_(src)
        torch.add(src, dst, out=out)

    def tiny_round():
        tiny.add_(1.0)

    def gpu_ms(fn, count):
        for _ in range(3):
            fn()
        timer = common.EventPairs(torch)
        timer.start()
        for _ in range(count):
            fn()
        timer.stop()
        return timer.ms()[0] / count

    def host_ms(fn, count):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(count):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3 / count

    # Calibration, outside every range: how many rounds make --phase-s.
    target_ms = args.phase_s * 1e3
    counts = {
        "gemm": max(1, round(target_ms / gpu_ms(gemm_round, 10))),
        "copy": max(1, round(target_ms / gpu_ms(copy_round, 10))),
        "tiny": max(1, round(target_ms / host_ms(tiny_round, 5000))),
    }
    rounds = {"gemm": gemm_round, "copy": copy_round, "tiny": tiny_round}
    torch.cuda.synchronize()

    phase_ms = {name: 0.0 for name in rounds}
    t0 = time.perf_counter()
    for _ in range(max(1, args.steps)):
        for name, fn in rounds.items():
            nvtx.range_push(name)
            timer = common.EventPairs(torch)
            timer.start()
            for _ in range(counts[name]):
                fn()
            timer.stop()
            torch.cuda.synchronize()
            nvtx.range_pop()
            phase_ms[name] += timer.ms()[0]
    run_s = time.perf_counter() - t0

    common.print_truth({
        "steps": 0,
        "warmup": 0,
        "run_s": run_s,
        "step_ms": 0.0,
        "rounds": max(1, args.steps),
        "gemm_s": phase_ms["gemm"] / 1e3,
        "copy_s": phase_ms["copy"] / 1e3,
        "tiny_s": phase_ms["tiny"] / 1e3,
        "launches": counts,
        "gemm_tflops": 2.0 * args.n ** 3 * counts["gemm"] * max(1, args.steps)
                       / (phase_ms["gemm"] / 1e3) / 1e12,
        "copy_gb_s": 5.0 * n * 4 * counts["copy"] * max(1, args.steps)
                     / (phase_ms["copy"] / 1e3) / 1e9,
        "expected_verdicts": {"gemm": "compute-bound", "copy": "memory-bound",
                              "tiny": "launch-bound"},
    })


if __name__ == "__main__":
    main()
