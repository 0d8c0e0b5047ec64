#!/usr/bin/env bash
# GPU check of host stack sampling (docs/host-sampling.md; issue #33):
#  1. the CI test (tests/python/test_host_samples.py) with this machine's Python;
#  2. the findings corpus's input-pipeline programs (tests/gpu/pathologies:
#     input_python, input_dataloader), budgeted and full: the first finding must
#     be host-work and name the planted function (common.PyWork's loop);
#  3. what sampling costs a window: the launch-bound loop
#     (bench/always_on/train_loop.py) with --host-sample-hz 0 and 1000, in
#     interleaved rounds; each agent measures its windows' steps against the
#     others (RankMetadata window_step_ratio).
#   bash tests/gpu/run_host_sampling_checks.sh     (OUT=dir keeps logs and jobs)
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/aon-host-sampling}
BUILD=${BUILD:-build-gpu}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-300}
mkdir -p "$OUT"
if [ ! -x "$BUILD/bin/aon-host-busy" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > "$OUT/cmake.log" 2>&1 &&
    cmake --build "$BUILD" -j 16 > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
BIN=$PWD/$BUILD/bin
export PYTHONPATH=$PWD/$BUILD/lib/aon-python
status=0
echo "=== CI test with $(python3 --version) ($(cat /proc/sys/kernel/perf_event_paranoid) = perf_event_paranoid)"
python3 tests/python/test_host_samples.py "$BIN" > "$OUT/ci-test.log" 2>&1 || status=1
grep -E "^(test_|Ran|OK|FAILED)|Error" "$OUT/ci-test.log"

rows=()
for prog in input_python input_dataloader; do
  for mode in budgeted full; do
    job=$OUT/job-$prog-$mode
    rm -rf "$job"
    extra=()
    [ "$mode" = full ] && extra=(--mode full)
    timeout -k 10 240 "$BIN/aon-run" "${extra[@]}" --no-report -o "$job" \
      python3 tests/gpu/pathologies/$prog.py --steps "$STEPS" > "$OUT/$prog-$mode.log" 2>&1 ||
      { echo "$prog $mode: rc $?"; tail -5 "$OUT/$prog-$mode.log"; status=1; continue; }
    "$BIN/aon-report" "$job" --json "$job/report.json" > "$job/report.txt" 2>&1
    rows+=("$(python3 - "$job/report.json" "$prog" "$mode" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f = j["findings"][0] if j["findings"] else {"kind": "-", "evidence": "", "numbers": {}}
ev = f["evidence"]
named = "`PyWork." in ev
share = f["numbers"].get("top_frame_share", 0)
top = ev.split("ran `", 1)[1].split("`", 1)[0] if "ran `" in ev else "-"
ok = f["kind"] == "host-work" and named and ev.find("`PyWork.") == ev.find("`")
print("%-17s %-9s %-10s %7d %6.1f%% %-5s %s" % (sys.argv[2], sys.argv[3], f["kind"],
      f["numbers"].get("host_samples", 0), 100 * share, "PASS" if ok else "FAIL", top))
PY
)")
    grep -A6 "evidence" "$job/report.txt" | head -8
  done
done
echo
printf "%-17s %-9s %-10s %7s %7s %-5s %s\n" program mode finding samples top result "top function"
for r in "${rows[@]}"; do echo "$r"; [[ "$r" == *FAIL* ]] && status=1; done

echo
echo "=== cost: launch-bound loop, windows with and without sampling ($ROUNDS rounds, interleaved)"
for round in $(seq "$ROUNDS"); do
  for hz in 0 1000; do
    job=$OUT/job-cost-$hz-$round
    rm -rf "$job"
    timeout -k 10 200 "$BIN/aon-run" --host-sample-hz $hz --no-report -o "$job" \
      python3 bench/always_on/train_loop.py --steps 3000 --no-nvtx > "$OUT/cost-$hz-$round.log" 2>&1 || status=1
    python3 - "$job" "$hz" "$round" <<'PY'
import h5py, sys
with h5py.File(sys.argv[1] + "/rank-00000.h5", "r") as f:
    m = f["meta"].attrs
    hs = f["records/host_samples"].shape[0] if "records/host_samples" in f else 0
    get = lambda k: m[k] if k in m else float("nan")
    print("round %s hz %-5s window/other step %.3f  amortized %.3f %%  windows %s  samples %d" % (
        sys.argv[3], sys.argv[2], get("window_step_ratio"), 100 * get("amortized_cost"),
        get("windows"), hs))
PY
  done
done
echo "overall: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
