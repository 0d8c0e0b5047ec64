#!/usr/bin/env bash
# GPU check of AON's PyTorch attribution (issue #31): every kernel's operator
# and module against torch.profiler's, on models of different kinds, in full
# and budgeted mode; then what each part of a capture window costs.
#   bash tests/gpu/run_torch_checks.sh          (OUT=dir keeps logs, jobs and traces)
#   PROGRAMS="cnn rnn:fused"  the programs to check (model[:variant[:variant]])
#   PARTS=0                   leave out the window-cost measurement
#   DEADLINE=560              seconds: programs not started by then are skipped (said)
#   LIMIT=150                 seconds any one run may take (a run past it is killed, said;
#                             at least 300 for torch.compile programs)
#   PARTS_STEPS=1000          steps of the window-cost measurement
# Progress goes to stdout and to $OUT/progress.txt as it happens.
# Each program runs three times, separately (one CUPTI client at a time): under
# torch.profiler over the whole run, under `aon-run --mode full`, and under
# `aon-run --capture-period 8` (the default budgeted mode with windows every 8
# steps, so a short run has several). tests/gpu/check_torch_ops.py compares
# every step (full) or every captured step (budgeted). A table comes last.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/aon-torch-checks}
BUILD=${BUILD:-build-gpu}
STEPS=${STEPS:-20}
PARTS=${PARTS:-1}
DEADLINE=${DEADLINE:-560}
LIMIT=${LIMIT:-150}
PARTS_STEPS=${PARTS_STEPS:-1000}
PROGRAMS=${PROGRAMS:-"cnn rnn transformer transformer:checkpoint transformer:fused cnn:fused"}
mkdir -p "$OUT"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
say() { echo "$*" | tee -a "$OUT/progress.txt"; }
# run LOG CMD...: CMD with its output in LOG, killed after LIMIT seconds.
run() {
  local log=$1; shift
  local t0=$(date +%s) rc
  timeout -k 10 "${limit:-$LIMIT}" "$@" > "$log" 2>&1; rc=$?
  say "    $(basename "$log"): rc $rc in $(( $(date +%s) - t0 )) s$([ $rc = 124 ] && echo " (killed at ${limit:-$LIMIT} s)")"
  [ $rc = 0 ] || tail -5 "$log" | tee -a "$OUT/progress.txt"
  return $rc
}
: > "$OUT/progress.txt"

say "=== build ($BUILD)"
nvidia-smi -L
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS=OFF \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build "$BUILD" -j 16 > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
grep "operator observer" "$OUT/cmake.log" | tee -a "$OUT/progress.txt"
BIN=$PWD/$BUILD/bin
export PYTHONPATH=$PWD/$BUILD/lib/aon-python
status=0

if [ "$PARTS" = 1 ]; then
  say "=== window parts ($(elapsed) s)"
  run "$OUT/parts.log" "$BIN/aon-run" --capture-period 16 --no-report -o "$OUT/job-parts" \
    python3 bench/always_on/window_parts.py --steps "$PARTS_STEPS" || status=1
  grep -E "^(config|cupti|kernels|runtime|dispatch|ops|modules|both|base|FAIL)" "$OUT/parts.log" | tee "$OUT/parts.txt"
fi

rows=()
for prog in $PROGRAMS; do
  if [ "$(elapsed)" -gt "$DEADLINE" ]; then
    say "=== $prog: skipped (deadline ${DEADLINE} s)"; rows+=("$prog skipped"); status=1; continue
  fi
  IFS=: read -r model v1 v2 <<< "$prog"
  flags=()
  for v in $v1 $v2; do flags+=("--$v"); done
  check=()
  [[ " ${flags[*]} " == *" --checkpoint "* ]] && check+=(--checkpoint)
  # torch.compile: each of the three runs compiles afresh (Inductor's on-disk
  # caches would let a later run skip the autotuning the first one did, so the
  # runs' first steps would differ by the cache, not by the profiler), and
  # compiling under torch.profiler takes minutes.
  unset TORCHINDUCTOR_FORCE_DISABLE_CACHES
  limit=$LIMIT
  if [[ " ${flags[*]} " == *" --compile "* ]]; then
    export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
    limit=$(( LIMIT > 300 ? LIMIT : 300 ))
  fi
  tag=${prog//:/-}
  say "=== $prog ($(elapsed) s)"
  run "$OUT/$tag-torch.log" python3 tests/gpu/torch_models.py --model "$model" "${flags[@]}" \
    --steps "$STEPS" --torch-profiler "$OUT/$tag.trace.json" || status=1
  for mode in full budgeted; do
    extra=(--mode full)
    [ "$mode" = budgeted ] && extra=(--capture-period 8)
    rm -rf "$OUT/job-$tag-$mode"
    run "$OUT/$tag-$mode.log" "$BIN/aon-run" "${extra[@]}" --no-report -o "$OUT/job-$tag-$mode" \
      python3 tests/gpu/torch_models.py --model "$model" "${flags[@]}" --steps "$STEPS" || status=1
    python3 tests/gpu/check_torch_ops.py --aon "$OUT/job-$tag-$mode" --torch "$OUT/$tag.trace.json" \
      --model "$model" "${check[@]}" --steps "$STEPS" --mode "$mode" --label "$tag/$mode" \
      --json "$OUT/$tag-$mode.json" > "$OUT/$tag-$mode.check" 2>&1 || status=1
    tee -a "$OUT/progress.txt" < "$OUT/$tag-$mode.check"
  done
done

echo
echo "=== attribution against torch.profiler ($(elapsed) s)"
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
print("%-28s %-9s %6s %8s %16s %16s %8s" % ("program", "mode", "steps", "kernels", "operator",
                                            "module (fwd)", "result"))
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-full.json")) +
              glob.glob(os.path.join(sys.argv[1], "*-budgeted.json"))):
    j = json.load(open(f))
    pct = lambda a, b: "%d/%d %.2f%%" % (a, b, 100.0 * a / b) if b else "-"
    print("%-28s %-9s %6d %8d %16s %16s %8s" % (j["label"].split("/")[0], j["mode"], j["steps"],
          j["kernels"], pct(j["op_agree"], j["kernels"]),
          pct(j["module_agree"], j["forward_in_module"]), "PASS" if j["pass"] else "FAIL"))
EOF
[ -f "$OUT/parts.txt" ] && { echo; echo "=== window parts (in-process, ratio to ordinary steps)"; cat "$OUT/parts.txt"; }
echo "overall: $([ $status = 0 ] && echo PASS || echo FAIL) ($(elapsed) s)"
exit $status
