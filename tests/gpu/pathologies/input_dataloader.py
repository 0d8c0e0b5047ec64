#!/usr/bin/env python3
"""input_dataloader: a slow Dataset transform in the main process starves the GPU.

Planted: the same cause as input_python.py, through a real
torch.utils.data.DataLoader(num_workers=0, pin_memory=True): its synthetic
Dataset's __getitem__ builds one sample's --tokens token ids from the seed and
runs --transform-us of pure-Python work (an integer loop that runs until that
time has passed, not a sleep), so every batch of --batch samples costs the main
thread about batch x transform-us before the step can launch anything. The step then copies
the pinned batch to the GPU (non_blocking) and runs an embedding lookup and
bf16 matmuls of about --gpu-ms GPU time (calibrated), then a tiny
torch.optim.SGD step.

A correct profiler says first: host-work (GPU gaps while the launching thread ran
code outside any CUDA call: the DataLoader's next()), about idle_per_step_ms per
step.

Truth (TRUTH line): host_work_ms = median perf_counter time spent in next() on
the DataLoader's iterator per step; gpu_busy_ms = median torch.cuda.Event time
from before the H2D copy to after the optimizer step, read after the run;
idle_per_step_ms = median over the measured steps of (step wall - that step's
GPU busy time). NVTX: "step" > "data", "compute".
"""
import time

import common


def main():
    p = common.parser(__doc__, steps=300)
    p.add_argument("--transform-us", type=float, default=30.0,
                   help="Python work per sample (microseconds)")
    p.add_argument("--batch", type=int, default=256, help="samples per batch")
    p.add_argument("--tokens", type=int, default=16, help="token ids per sample")
    p.add_argument("--gpu-ms", type=float, default=1.0, help="GPU time of the model step (ms)")
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--vocab", type=int, default=8192)
    args = p.parse_args()

    import torch
    from torch.utils.data import DataLoader, Dataset
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    work = common.PyWork()

    class SlowDataset(Dataset):
        """Sample i: --tokens ids from (seed, i), after --transform-us of Python work."""

        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            ids = common.lcg_ints(args.seed * 1000003 + i, args.tokens, args.vocab)
            work.run(args.transform_us / 1e3, seed=i)
            return torch.tensor(ids, dtype=torch.int64)

    clock = common.StepClock()
    total = clock.warmup + args.steps
    loader = DataLoader(SlowDataset(total * args.batch), batch_size=args.batch, shuffle=False,
                        num_workers=0, pin_memory=True, drop_last=True)
    table = torch.randn(args.vocab, args.dim, device=dev).to(torch.bfloat16)
    model = common.MatmulModel(torch, dev, args.dim)
    rows = common.lcg_ints(args.seed, args.batch * args.tokens, args.vocab)
    rows = torch.tensor(rows, device=dev)
    model.calibrate(table[rows], args.gpu_ms)

    batches = iter(loader)
    gpu = common.EventPairs(torch)
    host_ms = []
    for _ in range(total):
        clock.begin()
        nvtx.range_push("step")
        nvtx.range_push("data")
        t0 = time.perf_counter()
        batch = next(batches)
        host_ms.append((time.perf_counter() - t0) * 1e3)
        nvtx.range_pop()
        nvtx.range_push("compute")
        gpu.start()
        ids = batch.to(dev, non_blocking=True)
        model.train_step(table[ids].reshape(-1, args.dim))
        gpu.stop()
        nvtx.range_pop()
        nvtx.range_pop()
        clock.end()

    truth = clock.figures()
    truth.update(common.pipeline_figures(clock, host_ms, gpu.ms()))
    truth.update({
        "transform_us_asked": args.transform_us,
        "batch": args.batch,
        "matmul_reps": model.reps,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
