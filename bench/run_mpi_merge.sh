#!/usr/bin/env bash
# Scaling of the collective merge: aon-merge under `mpirun -np P` for P = 1, 2, 4,
# ... up to the cores available, on synthetic collector-written jobs of 64 .. 1024
# ranks; and the same merge with a small --memory-mb (sort rounds, bounded memory).
#   bash bench/run_mpi_merge.sh                       (from anywhere)
#   CONFIGS="64:100000 1024:20000" PROCS="1 2 4" bash bench/run_mpi_merge.sh
# Prints one table: wall time, speedup against P = 1 of the same job (same run),
# records/s, records/s per process, CPU seconds (all processes), the largest
# process's max RSS, timeline (+ shards) bytes per record. Files are read from
# the page cache (just written). Environment: BUILD (default build-mergebench,
# Release; configured when missing), WORK (/tmp/aon-mpimerge, deleted at the end
# unless KEEP=1), CONFIGS (RANKS:RECORDS_PER_RANK ...), PROCS, SMALL_MB (64: the
# bounded-memory run at the largest P), SEED.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build-mergebench}
WORK=${WORK:-/tmp/aon-mpimerge}
CONFIGS=${CONFIGS:-"64:100000 256:50000 1024:20000"}
NPROC=$(nproc)
if [[ -z ${PROCS:-} ]]; then
  PROCS=""
  for p in 1 2 4 8 16 32 64; do (( p <= NPROC )) && PROCS+="$p "; done
fi
SMALL_MB=${SMALL_MB:-64}
SEED=${SEED:-1}
KEEP=${KEEP:-0}
BIN=$ROOT/$BUILD/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "run_mpi_merge: $*" >&2; exit 1; }
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS=OFF \
    -DAON_BUILD_EXAMPLES=ON >"$WORK.cmake.log" 2>&1 || { cat "$WORK.cmake.log"; die "cmake failed"; }
fi
ninja -C "$BUILD" aon-bench-make-job aon-merge >/dev/null || die "build failed"
[[ -x /usr/bin/time ]] || die "/usr/bin/time (GNU time) is needed"
mkdir -p "$WORK"

echo "machine: nproc=$NPROC, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)," \
  "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
printf '%-6s %9s %4s %7s %8s %8s %12s %8s %9s %8s %8s\n' ranks records np mem_mb wall_s speedup \
  "records/s" "M/s/proc" cpu_s rss_MiB "B/rec"
for c in $CONFIGS; do
  ranks=${c%%:*}; rpr=${c##*:}
  job=$WORK/job-$ranks
  rm -rf "$job"
  "$BIN/aon-bench-make-job" --ranks "$ranks" --records-per-rank "$rpr" --seed "$SEED" \
    --out "$job" --jobs "$NPROC" >"$WORK/make-$ranks.log" 2>&1 || { cat "$WORK/make-$ranks.log"; die "make job failed"; }
  records=$(( ranks * rpr ))
  base=""
  last=""
  run() {  # run NP MEM_MB
    local np=$1 mem=$2 tv=$WORK/time.txt
    rm -rf "$job/timeline.h5" "$job/timeline.shards"
    /usr/bin/time -v -o "$tv" mpirun -np "$np" --oversubscribe --bind-to none "$BIN/aon-merge" -q \
      --no-chrome --no-overview --no-progress --memory-mb "$mem" "$job" >"$WORK/merge.log" 2>&1 ||
      { cat "$WORK/merge.log"; die "merge failed (np $np)"; }
    local wall cpu rss bytes
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$tv")
    cpu=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u+s}' "$tv")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$tv")
    bytes=$(du -cb "$job/timeline.h5" $( [[ -d $job/timeline.shards ]] && echo "$job/timeline.shards" ) | tail -1 | cut -f1)
    [[ -z $base ]] && base=$wall
    awk -v r="$ranks" -v n="$records" -v np="$np" -v mem="$mem" -v w="$wall" -v b="$base" \
      -v cpu="$cpu" -v rss="$rss" -v bytes="$bytes" 'BEGIN {
        printf "%-6s %9d %4d %7s %8.2f %8.2f %12.0f %8.3f %9.1f %8s %8.2f\n", r, n, np, mem, w, b / w,
          n / w, n / w / np / 1e6, cpu, rss, bytes / n }'
  }
  for np in $PROCS; do run "$np" 1024; last=$np; done
  run "$last" "$SMALL_MB"
  [[ $KEEP == 1 ]] || rm -rf "$job"
done
[[ $KEEP == 1 ]] || rm -rf "$WORK"
