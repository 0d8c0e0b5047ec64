#!/usr/bin/env python3
"""item_sync: loss.item() every step drains the GPU, then the host works alone.

Planted: every step launches about --gpu-ms of GPU work (bf16 matmuls,
calibrated at start-up; then a loss, backward and a tiny torch.optim.SGD step),
calls loss.item() (cudaMemcpyAsync + cudaStreamSynchronize: the host waits for
the GPU to finish everything queued) and only then runs --work-ms of host Python
work (an integer loop that runs until that time has passed, not a sleep) before
it launches the next step. Nothing is queued while the host works: the GPU idles from the sync's
return to the next launch.

A correct profiler says first: idle-host-sync (GPU gaps that a blocking
synchronization call left: .item()), about sync_idle_ms per step.

Truth (TRUTH line): sync_idle_ms = median host time (perf_counter) from .item()
returning to the next step's first launch; gpu_busy_ms = median
torch.cuda.Event time from before the first matmul to after the optimizer step,
read after the run; idle_per_step_ms = median over the measured steps of (step
wall - that step's GPU busy time). NVTX: "step" > "compute", "sync", "host".
"""
import time

import common


def main():
    p = common.parser(__doc__, steps=300)
    p.add_argument("--gpu-ms", type=float, default=4.0, help="GPU work per step (ms)")
    p.add_argument("--work-ms", type=float, default=3.0, help="host work after .item() (ms)")
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--dim", type=int, default=4096)
    args = p.parse_args()

    import torch
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    x = torch.randn(args.rows, args.dim, device=dev).to(torch.bfloat16)
    model = common.MatmulModel(torch, dev, args.dim)
    model.calibrate(x, args.gpu_ms)
    work = common.PyWork()

    clock = common.StepClock()
    gpu = common.EventPairs(torch)
    launch_at, returned_at, host_ms = [], [], []
    losses = 0.0
    for i in range(clock.warmup + args.steps):
        clock.begin()
        nvtx.range_push("step")
        nvtx.range_push("compute")
        launch_at.append(time.perf_counter())  # just before the step's first launch
        gpu.start()
        loss = model.train_step(x)
        gpu.stop()
        nvtx.range_pop()
        nvtx.range_push("sync")
        losses += loss.item()  # the planted sync
        returned_at.append(time.perf_counter())
        nvtx.range_pop()
        nvtx.range_push("host")
        t0 = time.perf_counter()
        work.run(args.work_ms, seed=i)
        host_ms.append((time.perf_counter() - t0) * 1e3)
        nvtx.range_pop()
        nvtx.range_pop()
        clock.end()

    busy = gpu.ms()
    walls = clock.walls_ms()
    # From step i's .item() returning to step i + 1's first launch, both measured.
    idle = [launch_at[i + 1] - returned_at[i] for i in range(clock.warmup, len(launch_at) - 1)]
    truth = clock.figures()
    truth.update({
        "sync_idle_ms": common.median(s * 1e3 for s in idle),
        "gpu_busy_ms": common.median(clock.measured(busy)),
        "idle_per_step_ms": common.median(clock.measured(w - b for w, b in zip(walls, busy))),
        "host_work_ms": common.median(clock.measured(host_ms)),
        "matmul_reps": model.reps,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
