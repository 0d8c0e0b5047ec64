#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, clang-14) of what AON reads from other
# processes, under AddressSanitizer + UndefinedBehaviorSanitizer, for a bounded
# time: rank files as aon-merge reads them, rings as the node collector drains
# them, datagrams on the collector's socket (tests/fuzz/README.md). Builds the
# fuzz targets in ./build-fuzz, writes a fresh seed corpus there, fuzzes each
# target, and prints one line per target. Fails on any finding: a crash, a
# sanitizer report, a leak, a hang (-timeout) or an allocation past the limits.
#
#   scripts/fuzz.sh [SECONDS]   seconds per target (AON_FUZZ_SECONDS; default
#                               75 rank files, 60 rings, 30 messages)
#   AON_FUZZ_JOBS=N             fuzzing processes per target at once (default 2, at most nproc)
#   AON_FUZZ_TARGETS="ring_fuzz ..."   only these targets
#
# Reproducers and their reports stay in build-fuzz/findings/<target>/ (a
# report's first line replays it); the corpus grows in build-fuzz/corpus/ from
# run to run (CI starts from the seeds). Crashes of libhdf5 itself that
# our reader could not have prevented are listed in tests/fuzz/libhdf5_known_bugs.txt
# and reported as excluded, not as findings.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-${AON_FUZZ_SECONDS:-}}
cpus=$(nproc 2>/dev/null || echo 2)
jobs=${AON_FUZZ_JOBS:-$((cpus < 2 ? cpus : 2))}
targets=${AON_FUZZ_TARGETS:-rank_file_fuzz ring_fuzz collector_message_fuzz}
declare -A default_seconds=([rank_file_fuzz]=75 [ring_fuzz]=60 [collector_message_fuzz]=30)
declare -A seeds=([rank_file_fuzz]=rank [ring_fuzz]=ring [collector_message_fuzz]=message)

if ! command -v clang++-14 >/dev/null 2>&1 ||
   ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz: clang++-14 with libFuzzer not found (scripts/install-deps.sh --test installs" \
       "clang-14 libclang-rt-14-dev)"
  exit 1
fi

# Only AON's own code is instrumented (libhdf5 is the system's). Warnings are
# not errors here: the gcc build checks them, clang-14 adds its own.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 with line tables (reports name file:line): libFuzzer's usual level, and
# less compile time on CI's 2 cores than -O2 -g; the fuzzing time is fixed.
opt="-O1 -g1 -DNDEBUG"
start=$SECONDS
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
  -DAON_BUILD_EXAMPLES=OFF -DAON_BUILD_FUZZERS=ON -DAON_WERROR=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" > build-fuzz.log 2>&1 ||
  { tail -20 build-fuzz.log; exit 1; }
cmake --build build-fuzz -j "$cpus" --target aon_fuzz_seeds $targets >> build-fuzz.log 2>&1 ||
  { tail -30 build-fuzz.log; exit 1; }
echo "fuzz: built in $((SECONDS - start)) s (build-fuzz.log)"

rm -rf build-fuzz/seeds build-fuzz/findings
build-fuzz/bin/aon_fuzz_seeds build-fuzz/seeds/rank build-fuzz/seeds/ring build-fuzz/seeds/message

# libhdf5 asks malloc for sizes a crafted file states (16 GiB, 7.6e18 bytes),
# then fails the read past the file's end. glibc returns NULL, or address space
# it never touches; ASan would abort, or touch an eighth of it (its shadow).
# With these, ASan's malloc returns NULL above 2 GiB, and HDF5 reports an error;
# between 256 MiB and 2 GiB libFuzzer's -malloc_limit_mb still reports it.
# operator new, what AON's code allocates with, still reports whatever the
# size. LeakSanitizer: lsan.supp.
export ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=2048:detect_leaks=1
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1
# The rank-file target's job directories, in memory where possible; removed at
# the end (a process that crashed leaves its own).
tmp=/dev/shm
[[ -d $tmp && -w $tmp ]] || tmp=$PWD/build-fuzz
export TMPDIR
TMPDIR=$(mktemp -d "$tmp/aon-fuzz.XXXXXX")
trap 'rm -rf "$TMPDIR"' EXIT

# 256 MiB in one allocation: the most a valid input of this size needs is
# about 70 MB (a table at deflate's 1100:1 bound). 20 s per input: a valid file
# claiming the largest world the merge believes merges in 8 s under ASan.
limits=(-rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=20)

# One libFuzzer process after another until `end`. A crash, a leak, a timeout
# or an out-of-memory ends a process and leaves a reproducer; that process's
# own report is kept beside it as <reproducer>.txt (a wild read inside libhdf5
# does not always fault again when the reproducer is run alone), and the next
# process goes on from the same corpus.
worker() {
  local t=$1 w=$2 end=$3 n=0 log artifact
  while ((end - SECONDS >= 1)); do
    n=$((n + 1))
    log=build-fuzz/findings/$t/worker$w-run$n.log
    "build-fuzz/bin/$t" "${limits[@]}" -max_total_time=$((end - SECONDS)) -print_final_stats=1 \
      -artifact_prefix="build-fuzz/findings/$t/" "build-fuzz/corpus/$t" \
      "build-fuzz/seeds/${seeds[$t]}" > "$log" 2>&1 || true
    artifact=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    if [[ -n $artifact && -e $artifact ]]; then
      { echo "replay: ASAN_OPTIONS=$ASAN_OPTIONS LSAN_OPTIONS=$LSAN_OPTIONS build-fuzz/bin/$t" \
             "${limits[*]} $artifact"; cat "$log"; } > "$artifact.txt"
    fi
  done
}

shopt -s nullglob
status=0
for t in $targets; do
  s=${seconds:-${default_seconds[$t]}}
  findings=build-fuzz/findings/$t
  mkdir -p "build-fuzz/corpus/$t" "$findings"
  end=$((SECONDS + s))
  for ((w = 1; w <= jobs; ++w)); do worker "$t" "$w" "$end" & done
  wait
  # Executions summed over the processes; coverage as the furthest one saw it.
  outputs=("$findings"/*.log "$findings"/*.txt)
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' /dev/null "${outputs[@]}" |
          awk '{n += $1} END {print n + 0}')
  cov=$(sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+) .*/\1 \2/p' /dev/null "${outputs[@]}" |
        sort -n | tail -1)
  cov=${cov:-0 0}
  corp=$(find "build-fuzz/corpus/$t" -type f | wc -l)
  found=() known=()
  for f in "$findings"/crash-* "$findings"/leak-* "$findings"/timeout-* "$findings"/oom-*; do
    [[ $f != *.txt && $f != *.verdict ]] || continue
    if verdict=$(python3 tests/fuzz/triage.py tests/fuzz/libhdf5_known_bugs.txt "$f.txt"); then
      known+=("$f: $(head -1 <<< "${verdict#known: }")")
    else
      found+=("$f")
      echo "${verdict#finding: }" > "$f.verdict"
    fi
  done
  echo "fuzz: $t: $execs executions, $((execs / s)) exec/s, corpus $corp," \
       "cov ${cov% *} ft ${cov#* }, findings ${#found[@]}," \
       "known libhdf5 bugs excluded ${#known[@]} ($s s, $jobs processes)"
  for k in "${known[@]}"; do echo "  excluded, known libhdf5 bug: $k"; done
  if ((execs == 0)); then
    echo "  libFuzzer ran nothing: ${outputs[0]:-no output}"
    [[ -n ${outputs[0]:-} ]] && tail -20 "${outputs[0]}"
    status=1
  fi
  for f in "${found[@]}"; do
    echo "  FINDING: $f: $(cat "$f.verdict")"
    head -1 "$f.txt" | sed 's/^/    /'
    # The sanitizer's report from its first line (libFuzzer's preamble skipped).
    report=$(sed -n '/ERROR: \|runtime error:/,$p' "$f.txt")
    head -60 <<< "${report:-$(cat "$f.txt")}" | sed 's/^/    /'
    status=1
  done
done
exit $status
