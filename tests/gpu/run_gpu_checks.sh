#!/usr/bin/env bash
# GPU checks for AON: run on a GPU host from the repository root.
#   bash tests/gpu/run_gpu_checks.sh        (OUT=dir keeps logs and job dirs)
# Builds the project, runs the CUDA+MPI+NCCL example and the PyTorch DDP script
# under aon-run on up to 2 GPUs, FAILS unless every rank's trace holds exactly
# what the programs say they did (tests/gpu/check_trace.py) and the merged
# timeline holds every rank, and times each program with and without AON; then
# scores the report's findings on the planted problems of tests/gpu/pathologies/
# (tests/gpu/score_findings.py, both modes, SCORE_VARIANTS of each program).
#   ONLY=capture   the capture checks alone;  ONLY=findings   the scorer alone
#   (SCORE_PROGRAMS=a,b: those programs of the corpus only)
#   (one device command may run 10 minutes: the two together take about 11).
set -uo pipefail
cd "$(dirname "$0")/../.."
# NVLink multicast can take shared GPUs out of service: keep it off everywhere.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/aon-gpu-checks}
BUILD=${BUILD:-build-gpu}
ITERS=${ITERS:-50}
STEPS=${STEPS:-40}
mkdir -p "$OUT"
rm -rf "$OUT"/job-*

log() { printf '\n=== %s\n' "$*"; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2-$1:.2f}')"; }

log "build ($BUILD)"
nvidia-smi -L
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS=OFF \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build "$BUILD" -j 16 > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
BIN=$PWD/$BUILD/bin
ONLY=${ONLY:-all}
SCORE_VARIANTS=${SCORE_VARIANTS:-0}

score_findings() {
  log "findings on the planted problems (variants $SCORE_VARIANTS, budgeted and full)"
  python3 tests/gpu/score_findings.py --bin "$BIN" --out "$OUT/score" --variants "$SCORE_VARIANTS" \
    --programs "${SCORE_PROGRAMS:-}" \
    --timeout 120 > "$OUT/check-findings.log" 2>&1
  local rc=$?
  sed -n '/^program /,$p' "$OUT/check-findings.log" | tee "$OUT/check-findings.txt"
  [ -f "$OUT/score/score.json" ] && cp "$OUT/score/score.json" "$OUT/score.json"
  return $rc
}
if [ "$ONLY" = findings ]; then
  score_findings; rc=$?
  echo "overall: $([ $rc = 0 ] && echo PASS || echo FAIL)"
  exit $rc
fi

NGPU=$(nvidia-smi -L | grep -c '^GPU')
NP=$(( NGPU < 2 ? NGPU : 2 ))
MPI=(mpirun --allow-run-as-root --bind-to none -np "$NP" -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST
     -x NVSHMEM_DISABLE_NVLS -x PYTHONUNBUFFERED)
status=0
declare -A T

log "CUDA example without AON"
t0=$(now); "${MPI[@]}" "$BIN/aon-example-cuda" --iterations "$ITERS" > "$OUT/cuda-plain.log" 2>&1 || status=1
T[cuda_plain]=$(secs "$t0" "$(now)"); tail -3 "$OUT/cuda-plain.log"

log "CUDA example under aon-run --nccl channels (per-channel GPU timing, calibrated)"
"$BIN/aon-run" --mode full --nccl channels -o "$OUT/job-cuda-channels" "${MPI[@]}" "$BIN/aon-example-cuda" \
  --iterations 10 > "$OUT/cuda-channels.log" 2>&1 || status=1
python3 tests/gpu/check_trace.py cuda "$OUT/cuda-channels.log" "$OUT/job-cuda-channels" --nccl-api \
  | sed 's/^\[cuda\]/[cuda-channels]/' | tee "$OUT/check-cuda-channels.txt"
grep -q "PASS" "$OUT/check-cuda-channels.txt" || status=1

log "CUDA example under aon-run --nccl proxy (network proxy events; 0 is expected over NVLink on one node)"
"$BIN/aon-run" --mode full --nccl proxy -o "$OUT/job-cuda-proxy" "${MPI[@]}" "$BIN/aon-example-cuda" \
  --iterations 3 > "$OUT/cuda-proxy.log" 2>&1 || status=1
python3 tests/gpu/check_trace.py cuda "$OUT/cuda-proxy.log" "$OUT/job-cuda-proxy" --nccl-api \
  | sed 's/^\[cuda\]/[cuda-proxy]/' | tee "$OUT/check-cuda-proxy.txt"
grep -q "PASS" "$OUT/check-cuda-proxy.txt" || status=1
python3 - "$OUT/job-cuda-proxy" <<'PY' | tee -a "$OUT/check-cuda-proxy.txt"
import glob, sys, h5py
for path in sorted(glob.glob(sys.argv[1] + "/rank-*.h5")):
    with h5py.File(path, "r") as f:
        n = f["records/nccl"][:]
        rank = int(f["meta"].attrs["rank"])
    print(f"[cuda-proxy] rank {rank}: proxy ops {int((n['event_type'] == 12).sum())}, "
          f"proxy steps {int((n['event_type'] == 13).sum())} (rank file)")
PY

log "CUDA example under aon-run"
t0=$(now); "$BIN/aon-run" --mode full -o "$OUT/job-cuda" "${MPI[@]}" "$BIN/aon-example-cuda" --iterations "$ITERS" \
  > "$OUT/cuda-aon.log" 2>&1 || status=1
T[cuda_aon]=$(secs "$t0" "$(now)"); tail -15 "$OUT/cuda-aon.log"
python3 tests/gpu/check_trace.py cuda "$OUT/cuda-aon.log" "$OUT/job-cuda" --nccl-api | tee "$OUT/check-cuda.txt" || status=1

log "capture windows (budgeted mode, the default) on the CUDA example vs a full run of it"
"$BIN/aon-run" --mode full --no-merge -o "$OUT/job-cuda-steps-full" "${MPI[@]}" "$BIN/aon-example-cuda" \
  --iterations 120 > "$OUT/cuda-steps-full.log" 2>&1 || status=1
"$BIN/aon-run" --capture-period 16 -o "$OUT/job-cuda-windows" "${MPI[@]}" "$BIN/aon-example-cuda" \
  --iterations 120 > "$OUT/cuda-windows.log" 2>&1 || status=1
python3 tests/gpu/check_windows.py "$OUT/job-cuda-steps-full" "$OUT/job-cuda-windows" \
  | tee "$OUT/check-windows.txt"
grep -q "PASS" "$OUT/check-windows.txt" || status=1
"$BIN/aon-report" "$OUT/job-cuda-windows/timeline.h5" 2>&1 | head -8 | sed 's/^/[windows-report] /' \
  | tee -a "$OUT/check-windows.txt"

log "flight mode with CUPTI: windows as in budgeted mode, dumped when the job fails"
"$BIN/aon-run" --mode flight --window 600 --capture-period 16 -o "$OUT/job-cuda-flight" "${MPI[@]}" \
  sh -c "$BIN/aon-example-cuda --iterations 120; sleep 1; exit 7" > "$OUT/cuda-flight.log" 2>&1
flight_rc=$?
python3 tests/gpu/check_windows.py "$OUT/job-cuda-steps-full" "$OUT/job-cuda-flight" \
  | sed 's/^\[windows\]/[flight]/' | tee "$OUT/check-flight.txt"
if [[ $flight_rc -ne 7 ]] || ! grep -q "flight recorder: the job failed" "$OUT/cuda-flight.log"; then
  echo "[flight] FAIL: aon-run exit $flight_rc (want the job's 7) or no dump on failure" | tee -a "$OUT/check-flight.txt"
fi
grep -q "PASS" "$OUT/check-flight.txt" && ! grep -q "FAIL" "$OUT/check-flight.txt" || status=1

log "PyTorch DDP without AON"
t0=$(now); "${MPI[@]}" python3 examples/pytorch_ddp.py --steps "$STEPS" > "$OUT/ddp-plain.log" 2>&1 || status=1
T[ddp_plain]=$(secs "$t0" "$(now)"); grep -E "AON_STEP_TIME|Error|error" "$OUT/ddp-plain.log" | head -5

log "PyTorch DDP under aon-run"
t0=$(now); "$BIN/aon-run" --mode full -o "$OUT/job-ddp" "${MPI[@]}" python3 examples/pytorch_ddp.py --steps "$STEPS" \
  > "$OUT/ddp-aon.log" 2>&1 || status=1
T[ddp_aon]=$(secs "$t0" "$(now)"); tail -12 "$OUT/ddp-aon.log"
python3 tests/gpu/check_trace.py ddp "$OUT/ddp-aon.log" "$OUT/job-ddp" | tee "$OUT/check-ddp.txt" || status=1

log "PyTorch DDP under aon-run torchrun (torchrun's own process must not leave a rank file)"
"$BIN/aon-run" --mode full -o "$OUT/job-torchrun" torchrun --standalone --nproc-per-node="$NP" examples/pytorch_ddp.py \
  --steps 10 > "$OUT/torchrun-aon.log" 2>&1 || status=1
tail -4 "$OUT/torchrun-aon.log"
python3 tests/gpu/check_trace.py ddp "$OUT/torchrun-aon.log" "$OUT/job-torchrun" | tee "$OUT/check-torchrun.txt" || status=1
extra=$(ls "$OUT/job-torchrun" | grep -c '\.pid' || true)
echo "[torchrun] extra per-process files: $extra" | tee -a "$OUT/check-torchrun.txt"
[ "$extra" = 0 ] || { echo "[torchrun] FAIL launcher process wrote a trace" | tee -a "$OUT/check-torchrun.txt"; status=1; }

log "CUPTI already taken by another tool"
nvcc -O2 -arch=sm_90 -o "$OUT/cupti_busy" tests/gpu/cupti_busy.cu -lcupti > "$OUT/busy-build.log" 2>&1 || cat "$OUT/busy-build.log"
"$BIN/aon-run" --mode full --no-merge -o "$OUT/job-busy" "$OUT/cupti_busy" > "$OUT/busy.log" 2>&1
busy_rc=$?
cat "$OUT/busy.log"
busy_ok=$(python3 - "$OUT/job-busy" <<'PY'
import glob, sys, h5py
files = glob.glob(sys.argv[1] + "/rank-*.h5")
if not files:
    print("FAIL no rank file"); sys.exit()
f = h5py.File(files[0], "r")
notes = f["meta"].attrs["notes"]
notes = notes.decode() if isinstance(notes, bytes) else notes
ok = "already in use" in notes and len(f["records/kernels"]) == 0
print(("PASS" if ok else "FAIL") + f" notes={notes!r} kernels={len(f['records/kernels'])}")
PY
)
echo "[busy] app exit $busy_rc, trace: $busy_ok" | tee "$OUT/check-busy.txt"
[ "$busy_rc" = 0 ] && [[ "$busy_ok" == PASS* ]] || status=1

log "CUPTI facts behind the CUDA-graph attribution of NCCL operations (tests/gpu/graph_probe.cu)"
nvcc -O2 -arch=sm_90 -o "$OUT/graph_probe" tests/gpu/graph_probe.cu -lcupti -lcuda > "$OUT/probe-build.log" 2>&1 \
  || cat "$OUT/probe-build.log"
"$OUT/graph_probe" > "$OUT/graph-probe.log" 2>&1
grep -E "^(FACT|graph_probe)" "$OUT/graph-probe.log" | sed 's/^/[graph-probe] /' | tee "$OUT/check-graph-probe.txt"
grep -q "graph_probe: PASS" "$OUT/graph-probe.log" || { echo "[graph-probe] FAIL (see $OUT/graph-probe.log)" | tee -a "$OUT/check-graph-probe.txt"; status=1; }

log "GPU counters: NVML GPM read by the collector; planted phases get their verdicts (tests/gpu/counters_phases.cu)"
nvcc -O2 -arch=sm_90 -o "$OUT/counters_phases" tests/gpu/counters_phases.cu -lcublas > "$OUT/counters-build.log" 2>&1 \
  || cat "$OUT/counters-build.log"
"$BIN/aon-run" -o "$OUT/job-counters" "$OUT/counters_phases" --seconds 3 > "$OUT/counters.log" 2>&1 || status=1
"$BIN/aon-report" --json "$OUT/counters-report.json" --no-html "$OUT/job-counters" > "$OUT/counters-report.txt" 2>&1
ncu_csv=""
if command -v ncu > /dev/null; then
  # The same kernels one by one: two GEMMs and two stream adds (ncu replays each).
  timeout 240 ncu --csv --nvtx --nvtx-include "phase:compute/" --nvtx-include "phase:memory/" \
    --launch-skip 2 --launch-count 4 \
    --metrics dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
    "$OUT/counters_phases" --seconds 1 > "$OUT/counters-ncu.csv" 2> "$OUT/counters-ncu.err" && ncu_csv="$OUT/counters-ncu.csv"
fi
python3 tests/gpu/check_counters.py "$OUT/job-counters" "$OUT/counters-report.json" $ncu_csv \
  | tee "$OUT/check-counters.txt"
grep -q "\[counters\] PASS" "$OUT/check-counters.txt" || status=1

log "PM sampling in capture windows: per-kernel figures against ncu (tests/gpu/check_pm_sampling.py)"
PM_US=${PM_US:-100}
"$BIN/aon-run" -o "$OUT/job-pm" --mode full --counters-sample-interval "$PM_US" \
  "$OUT/counters_phases" --seconds 2 > "$OUT/pm.log" 2>&1 || status=1
"$BIN/aon-report" --json "$OUT/pm-report.json" --no-html "$OUT/job-pm" > "$OUT/pm-report.txt" 2>&1
pm_ncu=""
if command -v ncu > /dev/null; then
  for metrics in dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.avg.pct_of_peak_sustained_elapsed \
                 dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed; do
    timeout 240 ncu --csv --nvtx --nvtx-include "phase:compute/" --nvtx-include "phase:memory/" \
      --launch-skip 2 --launch-count 6 --metrics "$metrics" \
      "$OUT/counters_phases" --seconds 1 > "$OUT/pm-ncu.csv" 2> "$OUT/pm-ncu.err" && { pm_ncu="$OUT/pm-ncu.csv"; break; }
  done
fi
python3 tests/gpu/check_pm_sampling.py "$OUT/job-pm" "$OUT/pm-report.json" "$PM_US" $pm_ncu \
  | tee "$OUT/check-pm-sampling.txt"
python3 - "$OUT/job-pm" <<'PY' | tee -a "$OUT/check-pm-sampling.txt"
import glob, sys, h5py
for path in sorted(glob.glob(sys.argv[1] + "/rank-*.h5")):
    notes = h5py.File(path, "r")["meta"].attrs.get("notes", "")
    notes = notes.decode() if isinstance(notes, bytes) else str(notes)
    for n in notes.split("\n"):
        if "counters" in n or "PM" in n:
            print("[pm-sampling] note:", n)
PY
grep -q "\[pm-sampling\] PASS" "$OUT/check-pm-sampling.txt" || status=1

log "clock sync of the mpirun jobs (PMIx rendezvous inside the agent)"
python3 - "$OUT" <<'PY' | tee "$OUT/check-clock.txt"
import glob, sys, h5py
for job in ("job-cuda", "job-ddp"):
    for path in sorted(glob.glob(f"{sys.argv[1]}/{job}/rank-*.h5")):
        a = h5py.File(path, "r")["meta"].attrs
        print(f"[clock] {job} rank {int(a['rank'])}: synchronized={int(a['clock_synchronized'])} "
              f"offset_ns={int(a['clock_offset_ns'])} drift_ppm={float(a['clock_drift_ppm']):.3f} "
              f"bound_ns={int(a['clock_error_bound_ns'])}")
PY

step_ms() { grep -h AON_STEP_TIME "$1" | sed 's/.*mean_ms=//' | python3 -c "import sys; v=[float(x) for x in sys.stdin if x.strip()]; print(f'{sum(v)/len(v):.2f}' if v else 'n/a')"; }

if [ "$ONLY" != capture ]; then score_findings || status=1; fi

log "summary"
printf '%-28s %10s %10s\n' "what" "plain" "aon-run"
printf '%-28s %10s %10s\n' "cuda example wall (s)" "${T[cuda_plain]}" "${T[cuda_aon]}"
printf '%-28s %10s %10s\n' "ddp wall (s)" "${T[ddp_plain]}" "${T[ddp_aon]}"
printf '%-28s %10s %10s\n' "ddp mean step (ms)" "$(step_ms "$OUT/ddp-plain.log")" "$(step_ms "$OUT/ddp-aon.log")"
for j in job-cuda job-ddp; do
  [ -d "$OUT/$j" ] && ls -l "$OUT/$j" | awk -v j="$j" 'NR>1 {printf "%-28s %10s %s\n", j, $5, $9}'
done
grep -h -E "PASS|FAIL|\[clock\]|\[windows\] rank|\[flight\] rank|\[windows-report\]" "$OUT"/check-*.txt | grep -v "^program "
[ -f "$OUT/check-findings.txt" ] && grep -E "^score:" "$OUT/check-findings.txt"
echo "overall: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
