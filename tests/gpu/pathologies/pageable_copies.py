#!/usr/bin/env python3
"""pageable_copies: a large host-to-device copy from pageable memory every step.

Planted: every step copies --mb MB from a PAGEABLE (not pinned) CPU tensor to
the GPU with non_blocking=True, which for pageable memory is not asynchronous:
the driver stages the data through its own pinned buffers while the host waits
in the call, at a fraction of pinned memory's bandwidth. The step then computes
on the copied data (bf16 matmuls of about --compute-ms, calibrated, and a tiny
torch.optim.SGD step). The fix is pinned memory (pin_memory=True / .pin_memory())
with a real asynchronous copy.

A correct profiler says first: pageable-copies, with what pinning would save per
step: pageable_saving_ms.

Truth (TRUTH line): copy_ms = median torch.cuda.Event time around the pageable
copy; copy_mb = its size; pinned_copy_ms = median Event time of the same copy
from a pinned copy of the same tensor, measured once after the last step (not
inside any step); pageable_saving_ms = copy_ms - pinned_copy_ms; gpu_busy_ms =
median Event time from before the copy to after the optimizer step;
idle_per_step_ms = median over the measured steps of (step wall - that step's GPU
busy time): the GPU's time with nothing at all to do (the copy counts as busy, so
this is near 0 here: the waste is the slow copy, not a gap). On an H200 host at
the defaults: copy 41 ms (6.5 GB/s), pinned 4.9 ms, saving 36 ms a step, idle
0.003 ms. NVTX: "step" > "copy", "compute".
"""
import common


def main():
    p = common.parser(__doc__, steps=150)
    p.add_argument("--mb", type=float, default=256.0, help="MB copied per step (MiB)")
    p.add_argument("--compute-ms", type=float, default=3.0, help="GPU compute per step (ms)")
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--pinned-reps", type=int, default=5,
                   help="copies from pinned memory timed after the run, for the saving")
    args = p.parse_args()

    import torch
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    n = max(args.dim, int(args.mb * 2 ** 20) // 4)
    gen = torch.Generator().manual_seed(args.seed)
    src = torch.rand(n, generator=gen)  # float32, pageable
    assert not src.is_pinned()
    dst = torch.empty(n, device=dev)
    x = torch.randn(args.rows, args.dim, device=dev).to(torch.bfloat16)
    model = common.MatmulModel(torch, dev, args.dim)
    model.calibrate(x, args.compute_ms)

    clock = common.StepClock()
    copies = common.EventPairs(torch)
    steps = common.EventPairs(torch)
    for _ in range(clock.warmup + args.steps):
        clock.begin()
        nvtx.range_push("step")
        nvtx.range_push("copy")
        steps.start()
        copies.start()
        dst.copy_(src, non_blocking=True)  # the planted copy: pageable source
        copies.stop()
        nvtx.range_pop()
        nvtx.range_push("compute")
        scale = dst[:args.dim].to(torch.bfloat16)
        model.train_step(x * scale)
        steps.stop()
        nvtx.range_pop()
        nvtx.range_pop()
        clock.end()

    copy_ms = copies.ms()
    busy = steps.ms()
    walls = clock.walls_ms()

    # Reference, after the last step: the same copy from pinned memory.
    pinned = src.pin_memory()
    reference = common.EventPairs(torch)
    dst.copy_(pinned, non_blocking=True)
    for _ in range(args.pinned_reps):
        reference.start()
        dst.copy_(pinned, non_blocking=True)
        reference.stop()
    pinned_ms = common.median(reference.ms())

    truth = clock.figures()
    copy_median = common.median(clock.measured(copy_ms))
    truth.update({
        "copy_ms": copy_median,
        "copy_mb": n * 4 / 2 ** 20,
        "copy_gb_s": n * 4 / (copy_median * 1e-3) / 1e9,
        "pinned_copy_ms": pinned_ms,
        "pageable_saving_ms": copy_median - pinned_ms,
        "gpu_busy_ms": common.median(clock.measured(busy)),
        "idle_per_step_ms": common.median(clock.measured(w - b for w, b in zip(walls, busy))),
        "matmul_reps": model.reps,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
