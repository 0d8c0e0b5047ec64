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
#   AON_FUZZ_JOBS=N             fuzzing processes per target (default 2, at most nproc)
#   AON_FUZZ_TARGETS="ring_fuzz ..."   only these targets
#
# Reproducers and their reports stay in build-fuzz/findings/<target>/ (rerun
# one: build-fuzz/bin/<target> FILE); the corpus grows in build-fuzz/corpus/
# from run to run (CI starts from the seeds). Crashes of libhdf5 itself that
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
start=$SECONDS
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DAON_BUILD_EXAMPLES=OFF -DAON_BUILD_FUZZERS=ON -DAON_WERROR=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" > build-fuzz.log 2>&1 ||
  { tail -20 build-fuzz.log; exit 1; }
cmake --build build-fuzz -j "$cpus" --target aon_fuzz_seeds $targets >> build-fuzz.log 2>&1 ||
  { tail -30 build-fuzz.log; exit 1; }
echo "fuzz: built in $((SECONDS - start)) s (build-fuzz.log)"

rm -rf build-fuzz/seeds build-fuzz/findings
build-fuzz/bin/aon_fuzz_seeds build-fuzz/seeds/rank build-fuzz/seeds/ring build-fuzz/seeds/message

# libhdf5 asks malloc for sizes a crafted file states (7.6e18 bytes): glibc
# returns NULL and HDF5 reports an error, ASan would abort instead; with
# allocator_may_return_null its malloc returns NULL too (operator new, what
# AON's code allocates with, still reports). LeakSanitizer: lsan.supp.
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1
# The rank-file target's job directories and libFuzzer's fork-mode files, in
# memory where possible; removed at the end (a crashed process leaves its own).
tmp=/dev/shm
[[ -d $tmp && -w $tmp ]] || tmp=$PWD/build-fuzz
export TMPDIR
TMPDIR=$(mktemp -d "$tmp/aon-fuzz.XXXXXX")
trap 'rm -rf "$TMPDIR"' EXIT

status=0
for t in $targets; do
  s=${seconds:-${default_seconds[$t]}}
  corpus=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
  mkdir -p "$corpus" "$findings"
  limits=(-rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=20)
  # -fork: crashes, leaks, timeouts and OOMs are kept as reproducers and the
  # fuzzing goes on, so one libhdf5 crash does not end the run.
  "build-fuzz/bin/$t" "${limits[@]}" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 \
    -ignore_ooms=1 -max_total_time="$s" -artifact_prefix="$findings/" -print_final_stats=1 \
    "$corpus" "build-fuzz/seeds/${seeds[$t]}" > "$findings/fuzz.log" 2>&1 || true
  # The last stats line of fork mode: "#N: cov: C ft: F corp: K exec/s E ...".
  stats=$(grep -E '^#[0-9]+: cov:' "$findings/fuzz.log" | tail -1 || true)
  execs=$(sed -nE 's/^#([0-9]+):.*/\1/p' <<< "$stats")
  rate=$(sed -nE 's/.*exec\/s ([0-9]+).*/\1/p' <<< "$stats")
  cov=$(sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+).*/cov \1 ft \2/p' <<< "$stats")
  corp=$(find "$corpus" -type f | wc -l)
  found=() known=() unreproduced=()
  for f in "$findings"/crash-* "$findings"/leak-* "$findings"/timeout-* "$findings"/oom-*; do
    [[ -e $f ]] || continue
    "build-fuzz/bin/$t" "${limits[@]}" "$f" > "$f.txt" 2>&1 || true
    if verdict=$(python3 tests/fuzz/triage.py tests/fuzz/libhdf5_known_bugs.txt "$f.txt"); then
      known+=("$f: $(head -1 <<< "${verdict#known: }")")
    elif [[ $verdict == "finding: did not reproduce"* ]]; then
      # libFuzzer's fork mode saved it, but run again alone it passes: a
      # worker killed by the loaded machine's limits, not an input that fails.
      # Kept and listed, not failed on: a CI gate must not turn on the load.
      unreproduced+=("$f")
    else
      found+=("$f")
      echo "${verdict#finding: }" > "$f.verdict"
    fi
  done
  echo "fuzz: $t: ${execs:-?} executions, ${rate:-?} exec/s, corpus $corp, ${cov:-cov ?}," \
       "findings ${#found[@]}, known libhdf5 bugs excluded ${#known[@]} ($s s, $jobs jobs)"
  for k in "${known[@]}"; do echo "  excluded, known libhdf5 bug: $k"; done
  for u in "${unreproduced[@]}"; do echo "  not a finding: $u passes when run again alone (kept)"; done
  if [[ -z $stats ]]; then
    echo "  no statistics from libFuzzer: $findings/fuzz.log"
    tail -20 "$findings/fuzz.log"
    status=1
  fi
  for f in "${found[@]}"; do
    echo "  FINDING: $f: $(cat "$f.verdict")"
    # The sanitizer's report from its first line (libFuzzer's preamble skipped).
    report=$(sed -n '/ERROR: \|runtime error:/,$p' "$f.txt")
    head -60 <<< "${report:-$(cat "$f.txt")}" | sed 's/^/    /'
    status=1
  done
done
exit $status
