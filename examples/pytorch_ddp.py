#!/usr/bin/env python3
"""AON example: a small PyTorch DistributedDataParallel job, one process per GPU.

    mpirun -np 2 python3 examples/pytorch_ddp.py [--steps 30] [--batch 256]
    torchrun --nproc-per-node 2 examples/pytorch_ddp.py
    srun --mpi=pmix -n 2 python3 examples/pytorch_ddp.py
    aon-run mpirun -np 2 python3 examples/pytorch_ddp.py          (profiled)

A few Linear+ReLU layers trained on synthetic data generated on the GPU, NCCL backend.
Every step is one NVTX range "step <i>" (default domain) holding the ranges "forward",
"backward" and "optimizer"; with --sleep-rank R --sleep-ms MS, rank R also sleeps MS
milliseconds in every step inside an NVTX range "straggler_sleep" (a planted straggler
that the report must find). With --torch-profiler the steps run inside
torch.profiler.profile(activities=[CPU, CUDA]) and nothing is exported (the comparison
point of bench/run_overhead.sh).

Output: rank 0 prints one line per step; at the end every rank prints

    AON_STEP_TIME rank=<R> mean_ms=<mean step time, steps after the first 3 warm-up steps>
    AON_EXPECT rank=<R> steps=<N> nvtx_step_ranges=<N>
    AON_EXAMPLE_OK rank=<R>

and exits 0; on a failed check it prints a line starting with FAIL and exits 1.
"""

import os

# NVLink multicast must stay off (it can take the host's GPUs out of service: examples/README.md).
# Defaults only; the launch environment wins. Set before torch/NCCL read them.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

WARMUP_STEPS = 3


def env_int(names, default):
    """First of the environment variables `names` that holds an integer, else default."""
    for name in names:
        value = os.environ.get(name)
        if value is None or value == "":
            continue
        try:
            return int(value)
        except ValueError:
            raise SystemExit(f"FAIL bad integer in ${name}: {value!r}")
    return default


def identity():
    """(rank, world_size, local_rank) from Open MPI, torchrun, or Slurm/PMIx."""
    rank = env_int(["OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID", "PMIX_RANK"], 0)
    world = env_int(["OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS"], 1)
    local = env_int(["OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID"], rank)
    if not (0 <= rank < world):
        raise SystemExit(f"FAIL rank {rank} outside world size {world}")
    return rank, world, local


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30, help="training steps (default 30)")
    p.add_argument("--batch", type=int, default=256, help="batch per rank (default 256)")
    p.add_argument("--features", type=int, default=1024, help="input/output width (default 1024)")
    p.add_argument("--hidden", type=int, default=4096, help="hidden width (default 4096)")
    p.add_argument("--layers", type=int, default=4, help="Linear layers, >= 2 (default 4)")
    p.add_argument("--sleep-rank", type=int, default=-1,
                   help="rank that sleeps in every step (planted straggler; default none)")
    p.add_argument("--sleep-ms", type=float, default=0.0,
                   help="milliseconds the --sleep-rank rank sleeps per step (default 0)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--torch-profiler", action="store_true",
                   help="run the steps inside torch.profiler.profile(activities=[CPU, CUDA]); "
                        "nothing is exported (overhead comparison)")
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be >= 1")
    if args.batch < 1 or args.features < 1 or args.hidden < 1:
        p.error("--batch, --features and --hidden must be >= 1")
    if args.layers < 2:
        p.error("--layers must be >= 2")
    if args.sleep_ms < 0:
        p.error("--sleep-ms must be >= 0")
    return args


def make_model(features, hidden, layers):
    mods = [nn.Linear(features, hidden), nn.ReLU()]
    for _ in range(layers - 2):
        mods += [nn.Linear(hidden, hidden), nn.ReLU()]
    mods.append(nn.Linear(hidden, features))
    return nn.Sequential(*mods)


def fail(rank, message):
    print(f"FAIL rank={rank}: {message}", flush=True)
    sys.exit(1)


def main():
    args = parse_args()
    rank, world, local = identity()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")

    if not torch.cuda.is_available():
        fail(rank, "no CUDA device available")
    ndev = torch.cuda.device_count()
    device = torch.device("cuda", local % ndev)
    torch.cuda.set_device(device)

    dist.init_process_group(backend="nccl", init_method="env://", rank=rank,
                            world_size=world, device_id=device)

    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP broadcasts anyway)
    model = make_model(args.features, args.hidden, args.layers).to(device)
    ddp = DDP(model, device_ids=[device.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.MSELoss()
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed + 1000 * rank)  # each rank its own data shard

    straggler = rank == args.sleep_rank and args.sleep_ms > 0
    if rank == 0:
        nparams = sum(p.numel() for p in model.parameters())
        print(f"pytorch_ddp: {world} ranks, {args.steps} steps, batch {args.batch}, "
              f"{nparams / 1e6:.1f}M parameters, torch {torch.__version__}"
              + (f", straggler rank {args.sleep_rank} sleeps {args.sleep_ms} ms/step"
                 if args.sleep_rank >= 0 and args.sleep_ms > 0 else ""), flush=True)

    step_ms = []
    steps_done = 0  # counted as we go, like the NVTX step ranges
    nvtx_step_ranges = 0
    last_loss = float("nan")
    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        profiler = contextlib.nullcontext()
    profiler.__enter__()
    for i in range(args.steps):
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push(f"step {i}")
        nvtx_step_ranges += 1

        if straggler:
            torch.cuda.nvtx.range_push("straggler_sleep")
            time.sleep(args.sleep_ms / 1000.0)
            torch.cuda.nvtx.range_pop()

        x = torch.randn(args.batch, args.features, device=device, generator=gen)
        y = torch.randn(args.batch, args.features, device=device, generator=gen)

        torch.cuda.nvtx.range_push("forward")
        loss = loss_fn(ddp(x), y)
        torch.cuda.nvtx.range_pop()

        torch.cuda.nvtx.range_push("backward")
        loss.backward()  # DDP all-reduces the gradients (NCCL) during backward
        torch.cuda.nvtx.range_pop()

        torch.cuda.nvtx.range_push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()

        last_loss = loss.item()  # waits for this step's GPU work
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()  # step
        ms = (time.perf_counter() - t0) * 1000.0
        step_ms.append(ms)
        steps_done += 1
        if rank == 0:
            print(f"step {i} loss {last_loss:.5f} time {ms:.2f} ms", flush=True)
        if not math.isfinite(last_loss):
            fail(rank, f"loss is {last_loss} at step {i}")
    profiler.__exit__(None, None, None)

    # DDP keeps the replicas identical: check it (sum and sum of squares of all weights).
    with torch.no_grad():
        flat = torch.cat([p.detach().double().flatten() for p in model.parameters()])
        mine = torch.stack([flat.sum(), (flat * flat).sum()])
        lo = mine.clone()
        hi = mine.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        spread = (hi - lo).abs().max().item()
        scale = max(1.0, mine.abs().max().item())
    if not spread <= 1e-9 * scale:
        fail(rank, f"model replicas differ across ranks (spread {spread:g})")

    measured = step_ms[WARMUP_STEPS:] if len(step_ms) > WARMUP_STEPS else step_ms
    mean_ms = sum(measured) / len(measured)

    dist.barrier()
    dist.destroy_process_group()

    print(f"AON_STEP_TIME rank={rank} mean_ms={mean_ms:.3f}", flush=True)
    print(f"AON_EXPECT rank={rank} steps={steps_done} nvtx_step_ranges={nvtx_step_ranges}",
          flush=True)
    print(f"AON_EXAMPLE_OK rank={rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
