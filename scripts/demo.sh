#!/usr/bin/env bash
# One command from a fresh machine to a profiled job: installs the
# dependencies, builds AON, profiles a small MPI job with aon-run and shows the
# result. On a machine with NVIDIA GPUs the job is the CUDA+MPI+NCCL example;
# without a GPU it is the same pipeline on a synthetic workload whose GPU
# activity is fake and labeled as such in every file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
bash scripts/build.sh --no-tests

bin=build/bin
out="aon-demo-$(date +%Y%m%d-%H%M%S)"
mpirun_args=()
# Open MPI refuses to start as root unless told to.
if [[ $(id -u) -eq 0 ]]; then mpirun_args+=(--allow-run-as-root); fi

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi

echo
if ((gpus > 0)) && [[ -x $bin/aon-example-cuda ]]; then
  np=$((gpus < 2 ? gpus : 2))
  # NVLink multicast (NVLS) can take a host's GPUs out of service on some
  # machines; a demo does not need it. Kept off unless the caller chose.
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
  export TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
  export NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1}
  mpirun_args+=(-x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)
  echo "demo: $gpus GPU(s) found: profiling the CUDA+MPI+NCCL example on $np rank(s)"
  cmd=("$bin/aon-run" -o "$out" mpirun "${mpirun_args[@]}" -np "$np" "$bin/aon-example-cuda")
else
  if ((gpus > 0)); then
    echo "demo: $gpus GPU(s) found but $bin/aon-example-cuda was not built (no nvcc?)"
  fi
  echo "No GPU found: running the SAME pipeline on a SYNTHETIC workload (fake GPU activity, clearly labeled)"
  # NCCL played through AON's real plugin, and a planted straggler (rank 3 reaches
  # every all-reduce 10 ms late): the report's straggler, communication and bus
  # bandwidth sections have something to show.
  cmd=("$bin/aon-run" -o "$out" --source synthetic mpirun "${mpirun_args[@]}" -np 4 --oversubscribe
       "$bin/aon-synthetic-app" --nccl --straggler-ms 10)
fi
echo "demo: ${cmd[*]}"
echo
status=0
"${cmd[@]}" || status=$?

echo
if [[ ! -f $out/timeline.h5 ]]; then
  echo "demo: FAILED: no timeline in $out (aon-run exit status $status); see the messages above"
  exit $((status == 0 ? 1 : status))
fi
echo "demo: the result, summarized by aon-inspect:"
"$bin/aon-inspect" "$out/timeline.h5"
echo
echo "demo: job directory: $PWD/$out (one rank-NNNNN.h5 per rank, timeline.h5, trace.pftrace,"
echo "      and trace.json while the run has at most 500 k records)"
echo "demo: to see the timeline, open $PWD/$out/trace.pftrace"
echo "      at https://ui.perfetto.dev (\"Open trace file\"; copy the file to your own computer first"
echo "      if this machine has no browser, e.g. scp <this host>:$PWD/$out/trace.pftrace .)"
exit "$status"
