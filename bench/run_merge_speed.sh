#!/usr/bin/env bash
# Merge speed of one merge process (issue #19, item 3; bench/RESULTS.md, "Merge speed per
# process"): the 64-rank x 50 k-record synthetic job (3.2 M records, the PyTorch-like mix
# of bench/make_synthetic_job.cc), merged from the page cache in interleaved rounds:
#   timeline only (--no-chrome --no-overview --no-perfetto):
#     base-t1 base-t2 base-t4  an older aon-merge (BASE=path; skipped when unset), --threads 1, 2, 4
#     t1 t2 t4                 this build with --threads 1, 2, 4 (THREADS="1 2 4 8": others)
#   default merge (timeline, overview, Perfetto trace, trace.json while small):
#     base-all  BASE
#     all       this build, default --threads
#   one export beside the timeline (issue #39: what each export costs), this build:
#     +overview  --no-chrome --no-perfetto
#     +perfetto  --no-chrome --no-overview
#   (trace.json is left out by its record limit at this size: the default merge
#   writes none for 3.2 M records.)
# Each run: wall s and CPU s (user + sys, /usr/bin/time, the whole process and its
# children), records per wall second and per CPU second. PIN=0,1 runs every merge
# on those CPUs only (taskset): a 2-core machine's figures on a larger one.
#
# usage: [BUILD=build] [BASE=/path/to/old/aon-merge] [ROUNDS=3] [PIN=cpus] [THREADS="1 2 4"]
#        bench/run_merge_speed.sh [WORK]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
WORK=${1:-$(mktemp -d /tmp/aon-merge-speed.XXXXXX)}
MERGE=$BUILD/bin/aon-merge
MAKE_JOB=$BUILD/bin/aon-bench-make-job
for b in "$MERGE" "$MAKE_JOB" ${BASE:+"$BASE"}; do
  [[ -x $b ]] || { echo "run_merge_speed: $b is not built" >&2; exit 1; }
done
JOB=$WORK/job64
RECORDS=3200000
if [[ ! -f $JOB/rank-00063.h5 ]]; then
  "$MAKE_JOB" --ranks 64 --records-per-rank 50000 --seed 1 --out "$JOB" --jobs "$(nproc)" >/dev/null
fi
cat "$JOB"/rank-*.h5 >/dev/null  # into the page cache
TIMELINE=(--no-chrome --no-overview --no-perfetto)
out=$WORK/runs.txt
: >"$out"
run() {  # tag binary args...
  local tag=$1 bin=$2
  shift 2
  rm -f "$WORK/t.h5"
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time.txt" ${PIN:+taskset -c "$PIN"} "$bin" -q --no-progress -o "$WORK/t.h5" "$@" \
    "$JOB" >/dev/null 2>"$WORK/err.txt" || { cat "$WORK/err.txt" >&2; exit 1; }
  read -r wall user sys rss <"$WORK/time.txt"
  awk -v t="$tag" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss" -v n="$RECORDS" \
    'BEGIN { c = u + s; printf "%-9s wall %6.2f s  CPU %6.2f s  %5.2f M rec/s  %5.2f M rec/CPU s  RSS %4d MiB\n",
             t, w, c, n / w / 1e6, n / c / 1e6, m / 1024 }' | tee -a "$out"
}
for r in $(seq "$ROUNDS"); do
  echo "round $r"
  for t in ${THREADS:-1 2 4}; do
    if [[ -n ${BASE:-} ]]; then run "base-t$t" "$BASE" "${TIMELINE[@]}" --threads "$t"; fi
    run "t$t" "$MERGE" "${TIMELINE[@]}" --threads "$t"
  done
  if [[ -n ${BASE:-} ]]; then run base-all "$BASE"; fi
  run all "$MERGE"
  run +overview "$MERGE" --no-chrome --no-perfetto
  run +perfetto "$MERGE" --no-chrome --no-overview
done
echo
echo "median over $ROUNDS rounds (range):"
awk '{ w[$1] = w[$1] " " $3; c[$1] = c[$1] " " $6 }
  END { for (t in w) { print t, w[t], "|", c[t] } }' "$out" | sort |
  while read -r tag rest; do
    walls=${rest%%|*}
    cpus=${rest##*|}
    med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ a[NR] = $1 } END { printf "%.2f [%.2f-%.2f]", a[int((NR + 1) / 2)], a[1], a[NR] }'; }
    printf '%-9s wall %s s   CPU %s s\n' "$tag" "$(med "$walls")" "$(med "$cpus")"
  done
