#!/bin/bash
# AON example: the PyTorch DDP example as a Slurm batch job, profiled by AON.
#
#   sbatch examples/sbatch_ddp.sh            (from the repository root; aon-run on PATH)
#
# When the job ends, aon-run merges the traces into ./aon-<job id>/ (timeline.h5,
# trace.json for https://ui.perfetto.dev). `aon-report` (its summary) is planned too.
#
# PLANNED, NOT YET AVAILABLE: the SPANK plugin (slurm/, `aon.so`) will make profiling one
# line, with no change to the srun command:
#
#     #SBATCH --aon                      <- planned: turns AON on for every step of the job
#     srun --mpi=pmix python3 examples/pytorch_ddp.py
#
# Until the plugin exists, the working way is to put `aon-run` in front of srun, as below.
#
#SBATCH --job-name=aon-ddp
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2              # one task per GPU
#SBATCH --gpus-per-node=2
#SBATCH --cpus-per-task=8
#SBATCH --time=00:10:00
#SBATCH --output=aon-ddp-%j.out

set -euo pipefail

# NVLink multicast (NVLS) stays off on these machines (GPU.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# torch.distributed rendezvous: the job's first node (pytorch_ddp.py falls back to
# 127.0.0.1, which is right only for one node).
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR
export MASTER_PORT=${MASTER_PORT:-29512}

# Working today: aon-run wraps the launcher (-o DIR picks the job directory).
aon-run srun --mpi=pmix python3 examples/pytorch_ddp.py --steps 30

# Planned equivalent once the SPANK plugin is installed (with `#SBATCH --aon` above,
# or per step):
#   srun --aon --mpi=pmix python3 examples/pytorch_ddp.py --steps 30
