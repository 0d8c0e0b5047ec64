#!/usr/bin/env python3
"""input_python: an input pipeline in plain Python starves the GPU.

Planted: every step the host first prepares the batch in pure Python: it builds
the batch's row indices (--batch of them, from the seed) and runs --work-ms of
Python CPU work (an integer loop that runs until that time has passed, not a
sleep), then writes the indices into pinned memory (a ring of two pinned
buffers), copies them to the GPU asynchronously and launches a small model step:
an embedding lookup and bf16 matmuls whose GPU time is about --gpu-ms
(calibrated), then a tiny torch.optim.SGD step. The GPU idles while the host prepares data:
most of every step.

A correct profiler says first: host-work (GPU gaps while the launching thread ran
code outside any CUDA call), about idle_per_step_ms per step; nothing about
launches, syncs or copies.

Truth (TRUTH line): host_work_ms = median perf_counter time of the "data" phase
(index list, Python work, write into pinned memory); gpu_busy_ms = median
torch.cuda.Event time from before the H2D copy to after the optimizer step,
read after the run; idle_per_step_ms = median over the measured steps of (step
wall - that step's GPU busy time). NVTX: "step" > "data", "compute".
"""
import time

import common


def main():
    p = common.parser(__doc__, steps=300)
    p.add_argument("--work-ms", type=float, default=8.0, help="Python work per step (ms)")
    p.add_argument("--gpu-ms", type=float, default=1.0, help="GPU time of the model step (ms)")
    p.add_argument("--batch", type=int, default=4096, help="rows per batch")
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--vocab", type=int, default=8192, help="rows of the embedding table")
    args = p.parse_args()

    import torch
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    table = torch.randn(args.vocab, args.dim, device=dev).to(torch.bfloat16)
    model = common.MatmulModel(torch, dev, args.dim)
    first = torch.tensor(common.lcg_ints(args.seed, args.batch, args.vocab), device=dev)
    model.calibrate(table[first], args.gpu_ms)
    work = common.PyWork()

    ring = [torch.empty(args.batch, dtype=torch.int64).pin_memory() for _ in range(2)]
    copied = [None, None]  # the event after each buffer's last H2D copy
    clock = common.StepClock()
    gpu = common.EventPairs(torch)
    host_ms = []
    for i in range(clock.warmup + args.steps):
        clock.begin()
        nvtx.range_push("step")
        nvtx.range_push("data")
        t0 = time.perf_counter()
        ids = common.lcg_ints(args.seed * 1000003 + i + 1, args.batch, args.vocab)
        work.run(args.work_ms, seed=i)
        buf = ring[i % 2]
        done = copied[i % 2]
        if done is not None and not done.query():  # its copy two steps ago: long done
            done.synchronize()
        buf.copy_(torch.tensor(ids, dtype=torch.int64))
        host_ms.append((time.perf_counter() - t0) * 1e3)
        nvtx.range_pop()
        nvtx.range_push("compute")
        gpu.start()
        idx = buf.to(dev, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        copied[i % 2] = ev
        model.train_step(table[idx])
        gpu.stop()
        nvtx.range_pop()
        nvtx.range_pop()
        clock.end()

    truth = clock.figures()
    truth.update(common.pipeline_figures(clock, host_ms, gpu.ms()))
    truth.update({
        "work_ms_asked": args.work_ms,
        "matmul_reps": model.reps,
        "batch": args.batch,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
