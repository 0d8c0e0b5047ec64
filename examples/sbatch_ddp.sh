#!/bin/bash
# AON example: the PyTorch DDP example as a Slurm batch job, profiled by AON's
# SPANK plugin (slurm/README.md): `#SBATCH --aon` below turns profiling on for every
# srun step of this script, with no change to the srun line.
#
#   sbatch examples/sbatch_ddp.sh            (from the repository root)
#
# When the srun step ends, srun merges its traces and prints where they are:
#   aon: step <job>.0 profiled: <dir>/aon-<job>.0/timeline.h5, .../trace.json, .../report.html
# (<dir> = the submit directory, or the cluster's output_root; --aon-output=DIR to choose).
#
# Without the plugin on the cluster, drop the #SBATCH --aon line and put aon-run in
# front of srun instead:  aon-run srun --mpi=pmix python3 examples/pytorch_ddp.py
#
#SBATCH --job-name=aon-ddp
#SBATCH --aon
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2              # one task per GPU
#SBATCH --gpus-per-node=2
#SBATCH --cpus-per-task=8
#SBATCH --time=00:10:00
#SBATCH --output=aon-ddp-%j.out

set -euo pipefail

# NVLink multicast (NVLS) stays off on these machines (examples/README.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# torch.distributed rendezvous: the job's first node (pytorch_ddp.py falls back to
# 127.0.0.1, which is right only for one node).
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR
export MASTER_PORT=${MASTER_PORT:-29512}

# Profiled because of `#SBATCH --aon` (per step options work too, e.g.
# `srun --aon=light ...`, `srun --aon-nccl=off ...`, `srun --aon=off ...`).
srun --mpi=pmix python3 examples/pytorch_ddp.py --steps 30
