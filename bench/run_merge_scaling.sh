#!/usr/bin/env bash
# Serial aon-merge baseline: throughput, CPU, memory and output size per record
# on synthetic jobs of 64..1024 ranks, against the raw read of the same files.
#   bash bench/run_merge_scaling.sh                 (from anywhere; ~20 min on 2 cores)
#   CONFIGS="64:100000 1024:20000" CHROME=0 bash bench/run_merge_scaling.sh
#   OUT=/tmp/mergebench bash bench/run_merge_scaling.sh   (tables + raw TSV kept there)
#
# For each RANKS:RECORDS_PER_RANK in CONFIGS (default "64:100000 256:50000
# 1024:20000 64:320000": 6.4 M, 12.8 M, 20.5 M and 20.5 M records; the last
# one has the 1024-rank job's total on 64 ranks, so rank count and record count
# can be told apart):
#   1. bin/aon-bench-make-job writes the job (bench/make_synthetic_job.cc:
#      PyTorch-like mix, rank files written as the node collector writes them,
#      raw NCCL records that the merge resolves, clock offsets within +-50 us);
#   2. read baseline: aon-bench-make-job --read (TraceReader::Open, metadata,
#      strings, ReadAll of every kind of every rank file: the merge's reads and
#      nothing else), with 1 process and with `nproc` processes;
#   3. the merge itself: aon-merge -q --no-chrome (and --no-overview where
#      aon-merge has it): timeline.h5 only, under /usr/bin/time -v;
#   4. where aon-merge writes an overview.json: aon-merge -q --no-chrome (timeline
#      + overview; also what the default does once trace.json is over
#      --max-trace-records);
#   5. aon-merge -q with every record in trace.json (--max-trace-records 0 where
#      aon-merge has it): timeline (+ overview) + trace.json (CHROME=0 skips it);
#      trace.json is deleted once measured.
# The options are taken from `aon-merge --help`, so the script runs against older
# and newer aon-merge alike.
# Files are read from the page cache (they were just written): the figures are
# CPU-bound, as on a node with a warm cache or fast storage.
# Once: the first config again with --nccl resolved (NCCL_CHECK=1, default):
# what the merge's resolution of raw NCCL records costs (it re-reads the
# kernels, api and external_correlation tables of every rank); and a perf profile
# of the timeline-only merge of the config with the most ranks (PERF=1, default
# when `perf` works): inclusive share of the merge's phases.
# Every measurement line says how busy the machine was: other_cpu_s = CPU time
# the whole machine spent during the run (/proc/stat) minus the run's own. Before
# each timed run the script waits (up to QUIET_WAIT s, default 120) for a 2 s
# window in which other processes use under a quarter of a core.
#
# Environment: BUILD (default build-mergebench; configured here when missing,
# Release, tests off, examples on), SKIP_BUILD=1, WORK (default
# /tmp/aon-mergebench: job directories, deleted at the end unless KEEP=1),
# SEED (1), CONFIGS, CHROME, NCCL_CHECK, PERF, QUIET_WAIT, OUT.
# Exit status: 1 when a step fails (its output is printed), 2 when the disk or
# memory cannot hold the largest config.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build-mergebench}
WORK=${WORK:-/tmp/aon-mergebench}
SEED=${SEED:-1}
CONFIGS=${CONFIGS:-"64:100000 256:50000 1024:20000 64:320000"}
CHROME=${CHROME:-1}
NCCL_CHECK=${NCCL_CHECK:-1}
PERF=${PERF:-auto}
KEEP=${KEEP:-0}
OUT=${OUT:-}
QUIET_WAIT=${QUIET_WAIT:-120}
NPROC=$(nproc)
BIN=$ROOT/$BUILD/bin

die() { echo "run_merge_scaling: $*" >&2; exit 1; }

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  if [[ ! -f $BUILD/build.ninja ]]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS=OFF \
      -DAON_BUILD_EXAMPLES=ON >"$WORK.cmake.log" 2>&1 || { cat "$WORK.cmake.log"; die "cmake failed"; }
  fi
  ninja -C "$BUILD" aon-bench-make-job aon-merge aon-inspect >/dev/null ||
    die "build failed (ninja -C $BUILD aon-bench-make-job aon-merge aon-inspect)"
fi
for b in aon-bench-make-job aon-merge; do [[ -x $BIN/$b ]] || die "$BIN/$b missing"; done
[[ -x /usr/bin/time ]] || die "/usr/bin/time (GNU time) is needed for wall, CPU and max RSS"

mkdir -p "$WORK" || die "cannot create $WORK"
HELP=$("$BIN/aon-merge" --help 2>&1)
TIMELINE_ARGS=(--no-chrome)
OVERVIEW=0
if grep -q -- '--no-overview' <<<"$HELP"; then TIMELINE_ARGS+=(--no-overview); OVERVIEW=1; fi
FULL_ARGS=()
grep -q -- '--max-trace-records' <<<"$HELP" && FULL_ARGS+=(--max-trace-records 0)
RAW=$WORK/results.tsv
: >"$RAW"

# ---- Will it fit? ---------------------------------------------------------------
# Per record, measured: ~9.2 B in the rank files, ~8.4 B in timeline.h5, ~380 B of
# trace.json; the merge's RSS ~45 B (the largest kind of all ranks in memory).
max_records=0
for c in $CONFIGS; do
  n=$(( ${c%%:*} * ${c##*:} ))
  (( n > max_records )) && max_records=$n
done
need_disk=$(( max_records * (10 + 9 + (CHROME == 1 ? 400 : 0)) * 12 / 10 ))
avail_disk=$(( $(df -Pk "$WORK" | awk 'NR==2 {print $4}') * 1024 ))
need_mem=$(( max_records * 60 ))
avail_mem=$(( $(awk '/MemAvailable/ {print $2}' /proc/meminfo) * 1024 ))
printf 'largest job: %d records; needs ~%.1f GB of disk (%.1f GB free in %s), ~%.1f GB of memory (%.1f GB available)\n' \
  "$max_records" "$(bc -l <<<"$need_disk/10^9")" "$(bc -l <<<"$avail_disk/10^9")" "$WORK" \
  "$(bc -l <<<"$need_mem/10^9")" "$(bc -l <<<"$avail_mem/10^9")"
(( need_disk < avail_disk )) || { echo "run_merge_scaling: not enough disk in $WORK (CHROME=0 needs far less)" >&2; exit 2; }
(( need_mem < avail_mem )) || { echo "run_merge_scaling: not enough memory for the largest config" >&2; exit 2; }

# ---- Helpers ------------------------------------------------------------------------
busy_s() {  # CPU seconds the whole machine has spent busy since boot
  awk -v hz="$(getconf CLK_TCK)" '/^cpu / {print ($2+$3+$4+$7+$8+$9)/hz}' /proc/stat
}
wait_quiet() {  # until others use < 0.25 core over 2 s, at most QUIET_WAIT s
  local t0=$SECONDS b0 b1
  while (( SECONDS - t0 < QUIET_WAIT )); do
    b0=$(busy_s); sleep 2; b1=$(busy_s)
    (( $(bc -l <<<"($b1 - $b0) / 2 < 0.25") )) && return 0
  done
  echo "  (machine still busy after ${QUIET_WAIT}s: measuring anyway)"
}
# timed NAME CMD...: runs CMD under /usr/bin/time -v; sets WALL CPU RSS_KB OTHER
timed() {
  local name=$1; shift
  local tv=$WORK/$name.time log=$WORK/$name.log b0 b1
  wait_quiet
  b0=$(busy_s)
  /usr/bin/time -v -o "$tv" "$@" >"$log" 2>&1
  local rc=$?
  b1=$(busy_s)
  if (( rc != 0 )); then
    echo "run_merge_scaling: '$*' failed (exit $rc):" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$tv")
  CPU=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u+s}' "$tv")
  RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tv")
  OTHER=$(bc -l <<<"x=$b1-$b0-$CPU; if (x<0) x=0; x" | xargs printf '%.1f')
}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }  # field KEY "k=v k=v"
rec() { printf '%s\n' "$*" | tr ' ' '\t' >>"$RAW"; }     # one TSV row

echo "machine: nproc=$NPROC, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- merge common 2>/dev/null || echo ' (merge/ or common/ modified)')"
rec kind ranks rpr records a b c d e f g h i

run_config() {  # RANKS RPR [--nccl resolved] -> rows in $RAW
  local ranks=$1 rpr=$2 nccl=${3:-raw}
  local tag="r${ranks}x${rpr}-$nccl" dir=$WORK/job
  local records=$(( ranks * rpr ))
  rm -rf "$dir"
  local gen
  gen=$("$BIN/aon-bench-make-job" --ranks "$ranks" --records-per-rank "$rpr" --seed "$SEED" \
        --nccl "$nccl" --out "$dir") || die "generating $tag failed"
  echo "$gen" | cut -c1-400
  sync  # no writeback of the new files during the measurements
  local in_bytes; in_bytes=$(field file_bytes "$gen")
  rec gen "$ranks" "$rpr" "$records" "$in_bytes" "$(field wall_s "$gen")" "$(field cpu_s "$gen")" "$nccl"

  if [[ $nccl == raw ]]; then
    local j line
    for j in 1 "$NPROC"; do
      # Twice; the faster run is kept (the first may still fault the page cache in).
      local best="" rep
      for rep in 1 2; do
        wait_quiet
        local b0 b1; b0=$(busy_s)
        line=$("$BIN/aon-bench-make-job" --read "$dir" --jobs "$j") || die "read baseline failed: $line"
        b1=$(busy_s)
        local other; other=$(bc -l <<<"x=$b1-$b0-$(field cpu_s "$line"); if (x<0) x=0; x" | xargs printf '%.1f')
        echo "$line other_cpu_s=$other" | cut -c1-300
        if [[ -z $best ]] || (( $(bc <<<"$(field wall_s "$line") < $(field wall_s "$best")") )); then
          best="$line other_cpu_s=$other"
        fi
      done
      rec read "$ranks" "$rpr" "$records" "$j" "$(field wall_s "$best")" "$(field cpu_s "$best")" "$(field other_cpu_s "$best")"
    done
  fi

  timed "$tag-timeline" "$BIN/aon-merge" -q "${TIMELINE_ARGS[@]}" "$dir"
  local tl; tl=$(stat -c %s "$dir/timeline.h5")
  printf 'merge (timeline only: %s) %s: wall %.2f s, CPU %.2f s, max RSS %d MiB, timeline.h5 %d B (%.2f B/record), other_cpu_s=%s, load %s\n' \
    "${TIMELINE_ARGS[*]}" "$tag" "$WALL" "$CPU" $(( RSS_KB / 1024 )) "$tl" "$(bc -l <<<"$tl/$records")" "$OTHER" "$(cut -d' ' -f1 /proc/loadavg)"
  rec merge "$ranks" "$rpr" "$records" "$nccl" "$WALL" "$CPU" "$RSS_KB" "$tl" "$OTHER"

  if [[ $OVERVIEW == 1 && $nccl == raw ]]; then
    timed "$tag-overview" "$BIN/aon-merge" -q --no-chrome "$dir"
    local ov; ov=$(stat -c %s "$dir/overview.json" 2>/dev/null || echo 0)
    printf 'merge (timeline + overview.json) %s: wall %.2f s, CPU %.2f s, max RSS %d MiB, overview.json %d B, other_cpu_s=%s\n' \
      "$tag" "$WALL" "$CPU" $(( RSS_KB / 1024 )) "$ov" "$OTHER"
    rec overview "$ranks" "$rpr" "$records" "$nccl" "$WALL" "$CPU" "$RSS_KB" "$ov" "$OTHER"
    rm -f "$dir/overview.json"
  fi

  if [[ $CHROME == 1 && $nccl == raw ]]; then
    timed "$tag-chrome" "$BIN/aon-merge" -q "${FULL_ARGS[@]}" "$dir"
    [[ -f $dir/trace.json ]] || { cat "$WORK/$tag-chrome.log" >&2; die "aon-merge wrote no trace.json"; }
    local js; js=$(stat -c %s "$dir/trace.json")
    printf 'merge (timeline + trace.json%s) %s: wall %.2f s, CPU %.2f s, max RSS %d MiB, trace.json %d B (%.0f B/record), other_cpu_s=%s\n' \
      "$( ((OVERVIEW)) && echo ' + overview.json')" "$tag" "$WALL" "$CPU" $(( RSS_KB / 1024 )) "$js" "$(bc -l <<<"$js/$records")" "$OTHER"
    rec chrome "$ranks" "$rpr" "$records" "$nccl" "$WALL" "$CPU" "$RSS_KB" "$js" "$OTHER"
    rm -f "$dir/trace.json" "$dir/overview.json"
  fi
}

first=1
perf_cfg=""
perf_ranks=0
for c in $CONFIGS; do
  ranks=${c%%:*}; rpr=${c##*:}
  echo "== $ranks ranks x $rpr records"
  run_config "$ranks" "$rpr" raw
  if (( ranks > perf_ranks )); then perf_ranks=$ranks; perf_cfg=$c; fi
  if [[ $first == 1 && $NCCL_CHECK == 1 ]]; then
    echo "== $ranks ranks x $rpr records, NCCL records already resolved (--nccl resolved)"
    run_config "$ranks" "$rpr" resolved
  fi
  first=0
done

# ---- Where the time goes ---------------------------------------------------------------
PERF_TXT=$WORK/perf.txt
: >"$PERF_TXT"
if [[ $PERF == auto ]]; then
  PERF=0
  command -v perf >/dev/null && perf record -q -o /dev/null true >/dev/null 2>&1 && PERF=1
fi
if [[ $PERF == 1 && -n $perf_cfg ]]; then
  ranks=${perf_cfg%%:*}; rpr=${perf_cfg##*:}
  echo "== perf profile: aon-merge ${TIMELINE_ARGS[*]}, $ranks ranks x $rpr records"
  rm -rf "$WORK/job"
  "$BIN/aon-bench-make-job" --ranks "$ranks" --records-per-rank "$rpr" --seed "$SEED" \
    --out "$WORK/job" >/dev/null || die "generating the perf job failed"
  if perf record -q -F 99 --call-graph dwarf,16384 -o "$WORK/perf.data" \
       "$BIN/aon-merge" -q "${TIMELINE_ARGS[@]}" "$WORK/job" >/dev/null 2>"$WORK/perf.log"; then
    perf report -i "$WORK/perf.data" --children --sort symbol --stdio -g none 2>/dev/null |
      grep '%' >"$WORK/perf.report"
    # Inclusive share of each phase (a sample counts in every function on its stack).
    python3 - "$WORK/perf.report" >"$PERF_TXT" <<'EOF'
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.match(r'\s*([\d.]+)%\s+([\d.]+)%\s+\[[.k]\]\s+(.*?)\s+-\s+-\s*$', line)
    if m: rows.append((float(m.group(1)), m.group(3), float(m.group(2))))
def share(pred):
    return max([c for c, s, _ in rows if pred(s)] or [0.0])
phases = [
    ("read input: TraceReader::ReadTable (H5Dread + inflate)", lambda s: s == "aon::TraceReader::ReadTable"),
    ("  of which inflate (zlib)", lambda s: s == "inflate"),
    ("write timeline: TraceWriter::AppendTable (H5Dwrite + deflate)", lambda s: s == "aon::TraceWriter::AppendTable"),
    ("  of which deflate (zlib)", lambda s: s == "deflate"),
    ("NCCL kind (incl. re-reading kernels/api/ext of every rank)", lambda s: "MergeKind<aon::NcclRecord>" in s),
    ("  ResolveNcclRecords itself", lambda s: s == "aon::ResolveNcclRecords"),
    ("per-rank stable_sort (all kinds)", lambda s: "__stable_sort_adaptive" in s or "__inplace_stable_sort" in s),
    ("open + validate rank files (OpenCandidate)", lambda s: "OpenCandidate" in s),
    ("page faults (fresh vectors per kind and rank)", lambda s: s == "asm_exc_page_fault"),
    ("memmove/memcpy (self)", lambda s: "__memmove" in s),
]
sort_total = sum(c for c, s, _ in rows if "__stable_sort_adaptive" in s)
merge_self = sum(x for c, s, x in rows if re.fullmatch(r"aon::merge::\(anonymous namespace\)::MergeKind<aon::\w+>", s))
for name, pred in phases:
    v = sort_total if name.startswith("per-rank stable_sort") else share(pred)
    print(f"{v:6.1f} %  {name}")
print(f"{merge_self:6.1f} %  self time of MergeKind<T> (string remap, clock shift, heap k-way merge: inlined)")
mk = [(c, re.fullmatch(r"aon::merge::\(anonymous namespace\)::MergeKind<aon::(\w+)>", s)) for c, s, _ in rows]
for c, m in sorted([(c, m.group(1)) for c, m in mk if m], reverse=True):
    k = m
    print(f"{c:6.1f} %  MergeKind<{k}> (read + remap + sort + k-way merge + write of that kind)")
EOF
    echo "self time by library:" >>"$PERF_TXT"
    perf report -i "$WORK/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null |
      awk '/%/ && $1+0 >= 0.5 {printf "%8s  %s\n", $1, $2}' >>"$PERF_TXT"
    cat "$PERF_TXT"
  else
    echo "perf record failed (see $WORK/perf.log); no profile"
  fi
  rm -f "$WORK/perf.data"
fi

# ---- Tables ---------------------------------------------------------------------------------
TABLES=$WORK/tables.md
python3 - "$RAW" "$NPROC" "${TIMELINE_ARGS[*]}" "${FULL_ARGS[*]}" >"$TABLES" <<'EOF'
import sys, collections
raw, nproc, tl_args, full_args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [l.rstrip("\n").split("\t") for l in open(raw)][1:]
gen, read, merge, chrome, overview = {}, collections.defaultdict(dict), {}, {}, {}
for r in rows:
    kind, ranks, rpr, records = r[0], int(r[1]), int(r[2]), int(r[3])
    key = (ranks, rpr)
    if kind == "gen" and r[7] == "raw": gen[key] = dict(in_bytes=int(r[4]), wall=float(r[5]))
    if kind == "read": read[key][int(r[4])] = dict(wall=float(r[5]), cpu=float(r[6]), other=float(r[7]))
    if kind in ("merge", "chrome", "overview"):
        d = dict(records=records, nccl=r[4], wall=float(r[5]), cpu=float(r[6]), rss=int(r[7]) * 1024,
                 out=int(r[8]), other=float(r[9]))
        {"merge": merge, "chrome": chrome, "overview": overview}[kind][(ranks, rpr, r[4])] = d
def M(x): return f"{x/1e6:.2f} M"
print(f"Timeline only (`aon-merge -q {tl_args}`):\n")
print("| ranks | records/rank | records | in B/record | wall s | CPU s | records/s | records/s/core | max RSS MiB | RSS B/record | timeline B/record | raw read, 1 proc: records/s | merge / raw read | other CPU s |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (ranks, rpr, nccl), d in merge.items():
    if nccl != "raw": continue
    n = d["records"]; g = gen.get((ranks, rpr), {}); rd = read[(ranks, rpr)].get(1)
    rr = n / rd["wall"] if rd else 0
    print(f"| {ranks} | {rpr:,} | {M(n)} | {g.get('in_bytes', 0)/n:.2f} | {d['wall']:.2f} | {d['cpu']:.2f} | "
          f"{M(n/d['wall'])} | {M(n/d['cpu'])} | {d['rss']/2**20:.0f} | {d['rss']/n:.1f} | {d['out']/n:.2f} | "
          f"{M(rr)} | {(n/d['wall'])/rr:.2f} | {d['other']:.1f} |")
if overview:
    print("\nTimeline + overview.json (`aon-merge -q --no-chrome`; also the default once trace.json is over --max-trace-records):\n")
    print("| ranks | records | wall s | CPU s | records/s | records/s/core | max RSS MiB | overview.json KB | overview share of wall | other CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (ranks, rpr, nccl), d in overview.items():
        n = d["records"]; m = merge.get((ranks, rpr, nccl))
        share = f"{(d['wall']-m['wall'])/d['wall']*100:.0f} %" if m else "-"
        print(f"| {ranks} | {M(n)} | {d['wall']:.2f} | {d['cpu']:.2f} | {M(n/d['wall'])} | {M(n/d['cpu'])} | "
              f"{d['rss']/2**20:.0f} | {d['out']/1e3:.0f} | {share} | {d['other']:.1f} |")
if chrome:
    print(f"\nTimeline + {'overview.json + ' if overview else ''}trace.json with every record (`aon-merge -q {full_args}`):\n")
    print("| ranks | records | wall s | CPU s | records/s | records/s/core | max RSS MiB | trace.json GB | trace.json B/record | JSON share of wall | other CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (ranks, rpr, nccl), d in chrome.items():
        n = d["records"]; m = overview.get((ranks, rpr, nccl)) or merge.get((ranks, rpr, nccl))
        share = f"{(d['wall']-m['wall'])/d['wall']*100:.0f} %" if m else "-"
        print(f"| {ranks} | {M(n)} | {d['wall']:.2f} | {d['cpu']:.2f} | {M(n/d['wall'])} | {M(n/d['cpu'])} | "
              f"{d['rss']/2**20:.0f} | {d['out']/1e9:.2f} | {d['out']/n:.0f} | {share} | {d['other']:.1f} |")
print(f"\nRaw read baseline (`aon-bench-make-job --read`, every table of every rank file):\n")
print(f"| ranks | records | 1 proc: wall s | records/s | {nproc} procs: wall s | records/s | speed-up |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for (ranks, rpr), d in read.items():
    n = ranks * rpr; a = d.get(1); b = d.get(nproc)
    if not a or not b: continue
    print(f"| {ranks} | {M(n)} | {a['wall']:.2f} | {M(n/a['wall'])} | {b['wall']:.2f} | {M(n/b['wall'])} | {a['wall']/b['wall']:.2f} |")
res = [(k, d) for k, d in merge.items() if k[2] == "resolved"]
for (ranks, rpr, _), d in res:
    raw_d = merge.get((ranks, rpr, "raw"))
    if raw_d:
        print(f"\nNCCL resolution ({ranks} ranks x {rpr:,}): raw NCCL records {raw_d['wall']:.2f} s wall / {raw_d['cpu']:.2f} s CPU; "
              f"already resolved {d['wall']:.2f} s / {d['cpu']:.2f} s: resolving costs "
              f"{(raw_d['cpu']-d['cpu'])/raw_d['cpu']*100:.0f} % of the merge's CPU.")
EOF
echo
cat "$TABLES"
if [[ -s $PERF_TXT ]]; then echo; echo "perf (inclusive % of samples):"; cat "$PERF_TXT"; fi

if [[ -n $OUT ]]; then
  mkdir -p "$OUT" && cp "$RAW" "$TABLES" "$OUT"/ && { [[ -s $PERF_TXT ]] && cp "$PERF_TXT" "$OUT"/ || true; }
  echo "tables and raw numbers in $OUT"
fi
rm -rf "$WORK/job"
if [[ $KEEP != 1 ]]; then
  rm -rf "$WORK"
fi
