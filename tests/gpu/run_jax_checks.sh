#!/usr/bin/env bash
# GPU check of AON's JAX support (issue #32; docs/jax.md): steps from JAX's
# StepTraceAnnotation and each kernel's HLO instruction, against JAX's own
# profiler, for every step (--mode full) and every captured step (budgeted).
#   bash tests/gpu/run_jax_checks.sh        (OUT=dir keeps logs and jobs)
#   MODELS="mlp conv"  STEPS=30  LIMIT=180 (seconds a run may take)
# Each model runs three times, separately (one CUPTI client at a time): under
# jax.profiler.trace, under `aon-run --mode full` and under `aon-run
# --capture-period 8`; tests/gpu/check_jax.py compares; a table comes last,
# then the report's JAX block of the budgeted run.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT=${OUT:-/tmp/aon-jax-checks}
BUILD=${BUILD:-build-gpu}
STEPS=${STEPS:-30}
LIMIT=${LIMIT:-180}
MODELS=${MODELS:-"mlp conv"}
mkdir -p "$OUT"
if [ ! -x "$BUILD/bin/aon-run" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > "$OUT/cmake.log" 2>&1 &&
    cmake --build "$BUILD" -j 16 > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
BIN=$PWD/$BUILD/bin
export PYTHONPATH=$PWD/$BUILD/lib/aon-python
status=0
for model in $MODELS; do
  rm -rf "$OUT/$model-prof" "$OUT/job-$model-full" "$OUT/job-$model-budgeted"
  timeout -k 10 "$LIMIT" python3 tests/gpu/jax_models.py --model "$model" --steps "$STEPS" \
    --profile "$OUT/$model-prof" > "$OUT/$model-prof.log" 2>&1 || { echo "$model profile: rc $?"; tail -5 "$OUT/$model-prof.log"; status=1; continue; }
  for mode in full budgeted; do
    extra=(--mode full)
    [ "$mode" = budgeted ] && extra=(--capture-period 8)
    timeout -k 10 "$LIMIT" "$BIN/aon-run" "${extra[@]}" --no-report -o "$OUT/job-$model-$mode" \
      python3 tests/gpu/jax_models.py --model "$model" --steps "$STEPS" > "$OUT/$model-$mode.log" 2>&1 ||
      { echo "$model $mode: rc $?"; tail -5 "$OUT/$model-$mode.log"; status=1; }
    python3 tests/gpu/check_jax.py --aon "$OUT/job-$model-$mode" --jax "$OUT/$model-prof" \
      --steps "$STEPS" --mode "$mode" --label "$model/$mode" --json "$OUT/$model-$mode.json" \
      > "$OUT/$model-$mode.check" 2>&1 || status=1
    cat "$OUT/$model-$mode.check"
  done
done
echo
python3 - "$OUT" <<'PY'
import glob, json, os, sys
print("%-16s %-9s %6s %10s %22s %6s" % ("model", "mode", "steps", "AON steps", "hlo_op agrees", "result"))
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    j = json.load(open(f))
    pct = "%d/%d %.2f%%" % (j["agree"], j["kernels"], 100.0 * j["agree"] / j["kernels"]) if j["kernels"] else "-"
    print("%-16s %-9s %6d %10d %22s %6s" % (j["label"].split("/")[0], j["mode"], j["steps"],
                                             j["aon_steps"], pct, "PASS" if j["pass"] else "FAIL"))
PY
for model in $MODELS; do
  [ -d "$OUT/job-$model-budgeted" ] && "$BIN/aon-report" "$OUT/job-$model-budgeted" 2>/dev/null |
    sed -n '/cost this job/,/CUPTI traced/p;/JAX \/ XLA/,/^$/p'
done
echo "overall: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
