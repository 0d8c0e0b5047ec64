#!/usr/bin/env bash
# AON's always-on overhead on a GPU host, as ratios measured in one run.
#   bash bench/run_overhead.sh                  (from anywhere; OUT=dir keeps the numbers)
#   SKIP_BUILD=1 BUILD=build-gpu ROUNDS=3 bash bench/run_overhead.sh
#
# Builds the project (Release, into $BUILD, default build-gpu), then runs ONE
# interleaved sequence of rounds; every round runs each configuration of each
# benchmark once (order rotated per round), so drift hits all alike, and the
# median over the rounds is kept:
#   launch  bin/aon-bench-launch: empty kernel launched back to back on one stream
#           (ns per launch; median of REPS repetitions of LAUNCHES in each process)
#   pylaunch bench/launch/launch_loop.py: in-place add of 1-element CUDA tensors (ns/op)
#   ddp     examples/pytorch_ddp.py on up to 2 GPUs (mpirun): median step ms of rank 0
#           over DDP_STEPS steps, the first DDP_SKIP left out
# Configurations:
#   plain      nothing attached
#   floor      CUDA_INJECTION64_PATH=lib/libaon_bench_cupti_floor.so: CUPTI set up as AON's
#              agent does by default, every record discarded (the cost of CUPTI itself)
#   aon        aon-run --no-merge --no-report -o <tmp> $AON_ARGS (default kinds, capture only)
#   aon-nccl-off  as aon with --nccl off (ddp only; not run by default)
#   torchprof  torch.profiler.profile(activities=[CPU, CUDA]) around the loop (python only)
# Prints a table: median, ratio vs plain, ratio vs floor, spread over rounds; writes
# it and the raw numbers to $OUT/overhead.txt (logs in $OUT/overhead-logs) when OUT
# is set. Targets: aon <= 1.05 x floor on the launch loop, <= 1.01 x plain per DDP step
# (a missed target is reported, not an error). Exit status 1 when any run fails (non-zero
# exit, missing output, the floor or AON not loaded): the failing configuration is
# dropped from later rounds and the log tail printed. Stops starting rounds once
# MAX_SECONDS (default 420, build included) would be exceeded; about 5 minutes on 2 x H200.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
BUILD=${BUILD:-build-gpu}
SKIP_BUILD=${SKIP_BUILD:-0}
ROUNDS=${ROUNDS:-5}              # rounds of the C++ launch loop
PY_ROUNDS=${PY_ROUNDS:-3}        # ... of the python loop and of DDP (the first rounds)
DDP_ROUNDS=${DDP_ROUNDS:-3}
LAUNCHES=${LAUNCHES:-50000}
REPS=${REPS:-5}
WARMUP=${WARMUP:-5000}
PY_LAUNCHES=${PY_LAUNCHES:-10000}
PY_REPS=${PY_REPS:-5}
PY_WARMUP=${PY_WARMUP:-1000}
DDP_STEPS=${DDP_STEPS:-200}
DDP_SKIP=${DDP_SKIP:-20}
AON_ARGS=${AON_ARGS:-}
LAUNCH_CONFIGS=${LAUNCH_CONFIGS:-plain floor aon}
PY_CONFIGS=${PY_CONFIGS:-plain floor aon torchprof}
DDP_CONFIGS=${DDP_CONFIGS:-plain floor aon torchprof}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
MAX_SECONDS=${MAX_SECONDS:-420}
START=$SECONDS

WORK=$(mktemp -d /tmp/aon-overhead.XXXXXX)
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  LOGS=$OUT/overhead-logs
  RESULT=$OUT/overhead.txt
else
  LOGS=$WORK/logs
  RESULT=$WORK/overhead.txt
fi
rm -rf "$LOGS"
mkdir -p "$LOGS"
RAW=$WORK/raw.txt
: > "$RAW"
status=0

say() { printf '\n=== %s (t=%ds)\n' "$*" "$((SECONDS - START))"; }

# ---- build ----------------------------------------------------------------------------
if [ "$SKIP_BUILD" != 1 ]; then
  say "build ($BUILD, Release)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > "$LOGS/cmake.log" 2>&1 \
    || { tail -30 "$LOGS/cmake.log"; echo "FAIL cmake"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" > "$LOGS/build.log" 2>&1 \
    || { grep -E "error|FAILED" "$LOGS/build.log" | head -30; echo "FAIL build"; exit 1; }
fi
BIN=$PWD/$BUILD/bin
FLOOR=$PWD/$BUILD/lib/libaon_bench_cupti_floor.so
for f in "$BIN/aon-run" "$BIN/aon-bench-launch" "$PWD/$BUILD/lib/libaon_agent.so" "$FLOOR"; do
  [ -e "$f" ] || { echo "FAIL missing $f (build $BUILD first, or drop SKIP_BUILD)"; exit 1; }
done

nvidia-smi -L
NGPU=$(nvidia-smi -L | grep -c '^GPU')
[ "$NGPU" -ge 1 ] || { echo "FAIL no GPU"; exit 1; }
NP=$(( NGPU < 2 ? NGPU : 2 ))
MPI=(mpirun --allow-run-as-root --bind-to none -np "$NP" -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST
     -x NVSHMEM_DISABLE_NVLS -x PYTHONUNBUFFERED)

# ---- one run --------------------------------------------------------------------------
declare -A FAILED
port=29600

# run_one BENCH CONFIG ROUND: runs it, checks it, appends "bench config round value" to RAW.
run_one() {
  local bench=$1 cfg=$2 round=$3
  local log="$LOGS/$bench-$cfg-$round.log" job="$WORK/job-$bench-$cfg-$round"
  local -a app pre=() post=()
  local nproc=1
  port=$((port + 1))
  case $bench in
    launch) app=("$BIN/aon-bench-launch" --launches "$LAUNCHES" --reps "$REPS" --warmup "$WARMUP") ;;
    pylaunch) app=(python3 bench/launch/launch_loop.py --launches "$PY_LAUNCHES" --reps "$PY_REPS"
                   --warmup "$PY_WARMUP") ;;
    ddp) app=(python3 examples/pytorch_ddp.py --steps "$DDP_STEPS"); nproc=$NP ;;
  esac
  [ "$cfg" = torchprof ] && app+=(--torch-profiler)
  local -a mpi=()
  [ "$bench" = ddp ] && mpi=("${MPI[@]}" -x "MASTER_PORT=$port")
  case $cfg in
    plain|torchprof) ;;
    floor)
      if [ "$bench" = ddp ]; then mpi+=(-x "CUDA_INJECTION64_PATH=$FLOOR")
      else pre=(env "CUDA_INJECTION64_PATH=$FLOOR"); fi ;;
    aon) rm -rf "$job"; pre=("$BIN/aon-run" --no-merge --no-report -o "$job" $AON_ARGS) ;;
    aon-nccl-off) rm -rf "$job"; pre=("$BIN/aon-run" --no-merge --no-report --nccl off -o "$job" $AON_ARGS) ;;
    *) echo "FAIL unknown configuration $cfg"; FAILED[$bench/$cfg]=1; status=1; return ;;
  esac
  local t0=$SECONDS rc
  timeout -k 10 "$RUN_TIMEOUT" "${pre[@]}" "${mpi[@]}" "${app[@]}" > "$log" 2>&1
  rc=$?
  local why="" value=""
  if [ "$rc" != 0 ]; then
    why="exit status $rc$([ "$rc" = 124 ] && echo " (timed out after ${RUN_TIMEOUT}s)")"
  elif [ "$bench" = ddp ]; then
    [ "$(grep -c AON_EXAMPLE_OK "$log")" = "$nproc" ] || why="not every rank printed AON_EXAMPLE_OK"
    value=$(python3 - "$log" "$DDP_SKIP" <<'PY'
import re, statistics, sys
t = [float(m.group(2)) for m in re.finditer(r"step (\d+) loss \S+ time ([\d.]+) ms", open(sys.argv[1], errors="replace").read())]
t = t[int(sys.argv[2]):]
print(f"{statistics.median(t):.4f}" if t else "")
PY
)
  else
    value=$(grep -o 'LAUNCH ns_per_launch=[0-9.]*' "$log" | tail -1 | sed 's/.*=//')
  fi
  [ -z "$why" ] && [ -z "$value" ] && why="no measurement in the log"
  if [ -z "$why" ] && [ "$cfg" = floor ]; then
    local loaded
    loaded=$(grep -c '^AON_FLOOR pid=.* records=[1-9]' "$log")
    [ "$loaded" -ge "$nproc" ] || why="floor library not loaded in every process ($loaded AON_FLOOR lines with records)"
  fi
  local extra=""
  if [ -z "$why" ] && [[ $cfg == aon* ]]; then
    local files
    files=$(find "$job" -name '*.h5' 2>/dev/null | wc -l)
    if [ "$files" -lt "$nproc" ]; then
      why="AON wrote $files trace files, expected $nproc"
    else
      # Dropped records make the AON figure optimistic: say so.
      extra=$(python3 - "$job" <<'PY' 2>/dev/null
import glob, sys
try:
    import h5py
except ImportError:
    sys.exit()
total = 0
for path in glob.glob(sys.argv[1] + "/**/*.h5", recursive=True):
    with h5py.File(path, "r") as f:
        if "meta" in f:
            total += sum(int(v) for k, v in f["meta"].attrs.items() if k.startswith("dropped"))
print(f"dropped={total}")
PY
)
    fi
  fi
  [[ $cfg == aon* ]] && rm -rf "$job"
  if [ -n "$why" ]; then
    echo "FAIL $bench/$cfg round $round: $why; log $log:"
    tail -25 "$log" | sed 's/^/    /'
    FAILED[$bench/$cfg]=1
    status=1
    return
  fi
  echo "$bench $cfg $round $value $((SECONDS - t0))s $extra" >> "$RAW"
  printf '  %-9s %-13s round %d: %10s %s  (%ds) %s\n' "$bench" "$cfg" "$round" "$value" \
    "$(case $bench in ddp) echo ms/step;; pylaunch) echo ns/op;; *) echo ns/launch;; esac)" "$((SECONDS - t0))" "$extra"
}

# run_bench BENCH ROUND CONFIGS...: every configuration once, order rotated by round.
run_bench() {
  local bench=$1 round=$2
  shift 2
  local -a cfgs=("$@")
  local n=${#cfgs[@]} i
  for ((i = 0; i < n; i++)); do
    local cfg=${cfgs[$(((i + round - 1) % n))]}
    [ -n "${FAILED[$bench/$cfg]:-}" ] && continue
    run_one "$bench" "$cfg" "$round"
  done
}

# ---- the interleaved sequence -----------------------------------------------------------
say "measure: $ROUNDS rounds (python and DDP in the first $PY_ROUNDS / $DDP_ROUNDS), $NP GPU(s) for DDP"
last_round=0
for ((round = 1; round <= ROUNDS; round++)); do
  t_round=$SECONDS
  say "round $round"
  run_bench launch "$round" $LAUNCH_CONFIGS
  [ "$round" -le "$PY_ROUNDS" ] && run_bench pylaunch "$round" $PY_CONFIGS
  [ "$round" -le "$DDP_ROUNDS" ] && run_bench ddp "$round" $DDP_CONFIGS
  last_round=$((SECONDS - t_round))
  if ((round < ROUNDS && SECONDS - START + last_round > MAX_SECONDS)); then
    echo "stopping after round $round: another round would pass MAX_SECONDS=$MAX_SECONDS"
    break
  fi
done

# ---- table ------------------------------------------------------------------------------
say "results"
python3 - "$RAW" "$RESULT" "$NP" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  "LAUNCHES=$LAUNCHES REPS=$REPS PY_LAUNCHES=$PY_LAUNCHES PY_REPS=$PY_REPS DDP_STEPS=$DDP_STEPS DDP_SKIP=$DDP_SKIP AON_ARGS='$AON_ARGS'" \
  "${!FAILED[@]}" <<'PY'
import statistics, sys
raw, result, np_, gpu, params, failed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
runs = {}
order = []
for line in open(raw):
    bench, cfg, rnd, value = line.split()[:4]
    if (bench, cfg) not in runs:
        order.append((bench, cfg))
    runs.setdefault((bench, cfg), []).append(float(value))
med = {k: statistics.median(v) for k, v in runs.items()}
unit = {"launch": "ns/launch", "pylaunch": "ns/op", "ddp": "ms/step"}
names = {"launch": "C++ empty-kernel launch loop", "pylaunch": "PyTorch launch loop (1 GPU)",
         "ddp": f"PyTorch DDP step ({np_} GPUs)"}
lines = [f"AON overhead, {gpu}; medians over interleaved rounds; {params}", "",
         "| benchmark | config | median | unit | vs plain | vs floor | rounds | spread |",
         "|---|---|---:|---|---:|---:|---:|---:|"]
for bench in ("launch", "pylaunch", "ddp"):
    for (b, cfg) in [k for k in order if k[0] == bench]:
        m = med[(b, cfg)]
        vp = f"{m / med[(b, 'plain')]:.3f}" if (b, "plain") in med else "n/a"
        vf = f"{m / med[(b, 'floor')]:.3f}" if (b, "floor") in med else "n/a"
        v = runs[(b, cfg)]
        spread = (max(v) - min(v)) / m if m else 0.0
        lines.append(f"| {bench} | {cfg} | {m:.4g} | {unit[bench]} | {vp} | {vf} | {len(v)} | {spread:.1%} |")
lines.append("")
lines.append("spread = (max - min) / median over the rounds: ratios closer to 1 than that are noise.")
def target(label, num, den, limit):
    if num in med and den in med:
        r = med[num] / med[den]
        lines.append(f"target {label}: {r:.3f} <= {limit:.2f}: {'MET' if r <= limit else 'MISSED'}")
    else:
        lines.append(f"target {label}: not measured")
target("C++ launch loop, aon / floor", ("launch", "aon"), ("launch", "floor"), 1.05)
target("PyTorch launch loop, aon / floor", ("pylaunch", "aon"), ("pylaunch", "floor"), 1.05)
target("DDP step, aon / plain", ("ddp", "aon"), ("ddp", "plain"), 1.01)
for f in failed:
    lines.append(f"FAILED: {f} (see its log)")
text = "\n".join(lines)
print(text)
with open(result, "w") as out:
    out.write(text + "\n\nraw: benchmark config round value seconds [AON dropped records]\n")
    out.write(open(raw).read())
PY
[ $? = 0 ] || status=1
echo
echo "numbers: $RESULT; logs: $LOGS"
[ -d "$WORK" ] && rm -rf "$WORK"/job-*
echo "overall: $([ $status = 0 ] && echo OK || echo FAIL)"
exit $status
