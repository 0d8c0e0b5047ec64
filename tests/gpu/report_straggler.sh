#!/usr/bin/env bash
# GPU check of aon-report: a PyTorch DDP job on 2 GPUs where rank 1 sleeps 20 ms in
# every step (a planted straggler) must be reported with rank 1 as the straggler.
#   bash tests/gpu/report_straggler.sh [BUILD_DIR]     (default build-gpu; OUT=dir keeps the job)
# Prints aon-run's output (which ends with aon-report's terminal summary), then the
# summary again from aon-report itself, and FAILS unless the top straggler finding
# (and the first finding overall, reported as a warning if not) names rank 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
BUILD=${1:-${BUILD:-build-gpu}}
OUT=${OUT:-/tmp/aon-report-straggler}
BIN=$PWD/$BUILD/bin
for p in aon-run aon-merge aon-report; do
  [ -x "$BIN/$p" ] || { echo "FAIL: $BIN/$p is missing (build $BUILD first)"; exit 1; }
done
mkdir -p "$OUT"
rm -rf "$OUT/job"
MPI=(mpirun --allow-run-as-root --bind-to none -np 2 -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST
     -x NVSHMEM_DISABLE_NVLS -x PYTHONUNBUFFERED)

echo "=== aon-run (DDP, 30 steps, rank 1 sleeps 20 ms per step)"
"$BIN/aon-run" -o "$OUT/job" "${MPI[@]}" python3 examples/pytorch_ddp.py --steps 30 --sleep-rank 1 --sleep-ms 20 \
  > "$OUT/run.log" 2>&1
rc=$?
tail -60 "$OUT/run.log"
[ "$rc" = 0 ] || { echo "FAIL: aon-run exited with $rc"; exit 1; }

echo
echo "=== aon-report $OUT/job"
"$BIN/aon-report" "$OUT/job" --json "$OUT/report.json" || { echo "FAIL: aon-report failed"; exit 1; }

python3 - "$OUT/report.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
findings = d["findings"]
print(f"\ncollectives: {d['collectives']} ({d['communication_source']}), steps: {d['steps']}")
stragglers = [f for f in findings if f["kind"] == "straggler"]
if not stragglers:
    print("FAIL: no straggler finding"); sys.exit(1)
top = stragglers[0]
if top["rank"] != 1:
    print(f"FAIL: the top straggler finding names rank {top['rank']}, not 1: {top['action']}"); sys.exit(1)
print(f"OK: top straggler finding names rank 1: {top['action']} | evidence: {top['evidence']}")
if findings[0]["kind"] != "straggler":
    print(f"WARNING: the first finding is {findings[0]['kind']} (rank {findings[0]['rank']}), not the straggler")
PY
status=$?
[ -s "$OUT/job/report.html" ] || { echo "FAIL: no $OUT/job/report.html"; status=1; }
echo "report: $OUT/job/report.html"
exit $status
