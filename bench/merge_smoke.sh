#!/usr/bin/env bash
# The merge benchmark's small case as a correctness check (ctest bench.merge_smoke;
# speed is not checked): a synthetic collector-written job (bench/make_synthetic_job.cc)
# merged by one process, by one process in several sort rounds (--memory-mb), and by
# two processes under mpirun (sharded), each timeline checked by `aon-bench-make-job
# --check` (every rank file's records once, per rank and kind; every table in
# (start, rank) order); the three must hold the same records: their Chrome exports
# (aon-export, same bytes for the same records but the timeline's path) are compared.
#   bash bench/merge_smoke.sh BIN_DIR [WORK_DIR]
set -euo pipefail
BIN=${1:?usage: merge_smoke.sh BIN_DIR [WORK_DIR]}
WORK=${2:-$(mktemp -d /tmp/aon-merge-smoke.XXXXXX)}
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job=$WORK/job
"$BIN/aon-bench-make-job" --ranks 8 --records-per-rank 20000 --seed 5 --out "$job" --jobs 2
merge() {  # merge NAME ARGS...: timeline $WORK/NAME.h5, checked and exported
  local name=$1
  shift
  "$@" -q --no-chrome --no-overview --no-progress --timings -o "$WORK/$name.h5" "$job"
  "$BIN/aon-bench-make-job" --check "$job" --timeline "$WORK/$name.h5"
  "$BIN/aon-export" -q --max-trace-records 0 -o "$WORK/$name.json" "$WORK/$name.h5"
  sed -i 's|"timeline":"[^"]*"|"timeline":""|' "$WORK/$name.json"
}
merge one "$BIN/aon-merge"
merge rounds "$BIN/aon-merge" --memory-mb 1
cmp "$WORK/one.json" "$WORK/rounds.json"
if command -v mpirun >/dev/null; then
  merge two mpirun -np 2 --oversubscribe "$BIN/aon-merge"
  cmp "$WORK/one.json" "$WORK/two.json"
else
  echo "merge_smoke: no mpirun: the two-process merge is not checked"
fi
echo "merge_smoke: ok"
