#!/usr/bin/env bash
# AON's always-on cost on a launch-bound PyTorch training loop, one GPU.
#   BIN=build-gpu/bin ROUNDS=5 STEPS=1500 OUT=dir bash bench/run_always_on.sh
#   DEADLINE=S: start no new run after S seconds (a device call's time limit);
#   the table then says how many rounds each configuration got.
#   WORKLOAD=cuda: the C++ example (examples/cuda_mpi_nccl, one rank under
#   mpirun, STEPS iterations) instead of the PyTorch loop; its figure is the
#   mean time per iteration it prints (its NVTX "iteration <i>" ranges are the
#   steps); torchprof does not apply.
#
# Runs bench/always_on/train_loop.py in every configuration, ROUNDS interleaved
# rounds (the order rotated each round, so drift hits every configuration alike):
#   plain       the loop alone
#   budgeted    aon-run (the default: budgeted capture windows, 1 % budget)
#   loaded      aon-run --step-source api: the agent, NVTX and NCCL in place,
#               but no step is ever marked, so no capture window opens
#   loaded-off  the same with --counters off: no NVML GPM reading in the
#               collector (loaded against loaded-off: what the GPM tier costs)
#   budgeted-gpm  the same with --counters gpm: no PM sampling in the windows
#               (budgeted against budgeted-gpm: what PM sampling adds)
#   full        aon-run --mode full (CUPTI all the time, the previous default;
#               PM sampling all the time too)
#   full-gpm    aon-run --mode full --counters gpm
#   full-kern   aon-run --mode full --kinds kernels
#   torchprof   torch.profiler.profile(activities=[CPU, CUDA]) around the loop
# Each run's figure is the median of its step times (after the warm-up steps);
# ratios are per round against that round's plain run, then the median and the
# range over rounds. For budgeted runs the agent's own in-process measurements
# are read from the rank file: windows, captured steps, period, median step in /
# out of windows, and the amortized cost it estimated. Prints a Markdown table.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
BIN=${BIN:-build-gpu/bin}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-1500}
WARMUP=${WARMUP:-50}
CONFIGS=${CONFIGS:-plain budgeted loaded full full-kern torchprof}
DEADLINE=${DEADLINE:-0}
START=$(date +%s)
OUT=${OUT:-$(mktemp -d /tmp/aon-always-on.XXXXXX)}
mkdir -p "$OUT"
WORKLOAD=${WORKLOAD:-torch}
LOOP=(python3 bench/always_on/train_loop.py --steps "$STEPS" --warmup "$WARMUP")
if [[ $WORKLOAD == cuda ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  LOOP=(mpirun --allow-run-as-root --bind-to none -np 1 -x NCCL_NVLS_ENABLE "$BIN/aon-example-cuda"
        --iterations "$STEPS")
fi
AON=("$BIN/aon-run" --no-merge --no-report)
: > "$OUT/runs.txt"

run() {  # config round
  local c=$1 r=$2 log="$OUT/$1-$2.log" job="$OUT/job-$1-$2"
  case $c in
    plain) "${LOOP[@]}" ;;
    budgeted) "${AON[@]}" -o "$job" "${LOOP[@]}" ;;
    budgeted-gpm) "${AON[@]}" -o "$job" --counters gpm "${LOOP[@]}" ;;
    full-gpm) "${AON[@]}" -o "$job" --mode full --counters gpm "${LOOP[@]}" ;;
    loaded) "${AON[@]}" -o "$job" --step-source api "${LOOP[@]}" ;;
    loaded-off) "${AON[@]}" -o "$job" --step-source api --counters off "${LOOP[@]}" ;;
    full) "${AON[@]}" -o "$job" --mode full "${LOOP[@]}" ;;
    full-kern) "${AON[@]}" -o "$job" --mode full --kinds kernels "${LOOP[@]}" ;;
    torchprof) "${LOOP[@]}" --torch-profiler ;;
  esac > "$log" 2>&1
  local med
  if [[ $WORKLOAD == cuda ]]; then
    med=$(sed -n 's/^aon-example-cuda: .* iterations in .*(\([0-9.]*\) ms\/iteration).*/\1/p' "$log")
  else
    med=$(sed -n 's/^TRAIN .*median_ms=\([0-9.]*\).*/\1/p' "$log")
  fi
  if [ -z "$med" ]; then echo "run $c round $r FAILED:"; tail -5 "$log"; return 1; fi
  echo "$c $r $med $job" >> "$OUT/runs.txt"
}

read -r -a configs <<< "$CONFIGS"
for ((r = 0; r < ROUNDS; ++r)); do
  n=${#configs[@]}
  for ((i = 0; i < n; ++i)); do
    if ((DEADLINE > 0 && $(date +%s) - START > DEADLINE)); then
      echo "deadline: stopped before round $r, run $i"
      break 2
    fi
    run "${configs[$(((i + r) % n))]}" "$r"
  done
done

python3 - "$OUT/runs.txt" <<'PY' | tee "$OUT/always-on.md"
import glob, statistics, sys
import h5py
runs = {}
for line in open(sys.argv[1]):
    c, r, med, job = line.split()
    runs.setdefault(c, {})[int(r)] = (float(med), job)
plain = runs.get("plain", {})
print("| configuration | median step ms | vs plain (median over rounds) | range | rounds |")
print("|---|---:|---:|---:|---:|")
for c, by_round in runs.items():
    ratios = [m / plain[r][0] for r, (m, _) in by_round.items() if r in plain]
    meds = [m for m, _ in by_round.values()]
    rng = f"{min(ratios):.4f}..{max(ratios):.4f}" if ratios else "-"
    print(f"| {c} | {statistics.median(meds):.3f} | {statistics.median(ratios):.4f} | {rng} | "
          f"{len(meds)} |")
print()
print("Budgeted runs, as the agent measured itself (rank 0):")
print()
print("| config | round | steps | captured | windows | period | in-window / outside | amortized cost | PM samples |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for c in ("budgeted", "budgeted-gpm"):
    for r, (m, job) in sorted(runs.get(c, {}).items()):
        for path in sorted(glob.glob(job + "/rank-*.h5"))[:1]:
            f = h5py.File(path, "r")
            a = f["meta"].attrs
            pm = 0
            if "records/counters" in f:
                rows = f["records/counters"][:]
                pm = int((rows["source"] == 2).sum()) // 5
            print(f"| {c} | {r} | {int(a['steps'])} | {int(a['captured_steps'])} | {int(a['windows'])} | "
                  f"{int(a['capture_period'])} | {float(a['window_step_ratio']):.2f} | "
                  f"{100 * float(a['amortized_cost']):.3f} % | {pm} |")
PY
