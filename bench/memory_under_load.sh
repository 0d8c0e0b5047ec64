#!/usr/bin/env bash
# Memory and CPU of AON under a 1 M records/s NVTX load (RESULTS.md, "Memory
# under a 1 M records/s load"). For each thread count, runs aon-bench-agent-load
# (bench/agent_load.cc) once without the agent (the baseline: NVTX calls are
# no-ops) and once per memory cap with libaon_agent.so injected through
# NVTX_INJECTION64_PATH (the agent starts its own aon-collector), and samples
# every 100 ms:
#   * the load process: VmRSS (peak over the samples); at its end it prints its
#     own VmHWM, read after the agent's exit handler ran;
#   * its aon-collector (found by name, and by the run's output directory on its
#     command line): VmRSS and RssAnon (peaks), utime+stime from /proc/PID/stat
#     (last sample before it exits, ~2 s after the load: its linger);
# then reads the rank file with aon-inspect --json: records written and dropped.
#
#   bash bench/memory_under_load.sh                 # build-collbench, 10 s per run
#   BUILD=build RATE=500000 SECONDS_PER_RUN=5 THREADS="1" CAPS="64M" bash bench/memory_under_load.sh
#   OUT=/tmp/memload bash bench/memory_under_load.sh  # keeps every run's files there
#
# Prints a table per thread count (figures as ratios against the baseline of
# the same run where that means something) and writes the raw values to
# $OUT/memory_under_load.txt. Exit status: 0, or 1 when a run failed (load
# exited non-zero, no rank file).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-collbench}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
RATE=${RATE:-1000000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
THREADS=${THREADS:-"1 4"}
CAPS=${CAPS:-"64M 16M"}
KEEP=1
if [[ -z ${OUT:-} ]]; then
  OUT=$(mktemp -d /tmp/aon-memload-XXXXXX)
  KEEP=0
fi
mkdir -p "$OUT"
LOAD=$BUILD/bin/aon-bench-agent-load
AGENT=$BUILD/lib/libaon_agent.so
INSPECT=$BUILD/bin/aon-inspect
for f in "$LOAD" "$AGENT" "$INSPECT" "$BUILD/bin/aon-collector"; do
  [[ -e $f ]] || { echo "missing $f (build aon-bench-agent-load aon_agent aon-collector aon-inspect)" >&2; exit 1; }
done
TICK=$(getconf CLK_TCK)
RAW=$OUT/memory_under_load.txt
: > "$RAW"

kb() {  # kb FILE FIELD: a /proc status field in kB, or empty
  awk -v k="$2:" '$1 == k { print $2; exit }' "$1" 2>/dev/null || true
}

# run_one LABEL THREADS CAP ("none" = baseline): appends one line of key=value to $RAW.
run_one() {
  local label=$1 threads=$2 cap=$3
  local dir=$OUT/$label
  rm -rf "$dir"
  mkdir -p "$dir/trace"
  if [[ $cap == none ]]; then
    env -u NVTX_INJECTION64_PATH -u CUDA_INJECTION64_PATH \
      "$LOAD" --rate "$RATE" --threads "$threads" --seconds "$SECONDS_PER_RUN" \
      > "$dir/load.out" 2> "$dir/load.err" &
  else
    env -u CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH="$AGENT" AON_OUTPUT_DIR="$dir/trace" \
      AON_JOB_ID="memload-$label-$$" AON_MEMORY_CAP="$cap" \
      "$LOAD" --rate "$RATE" --threads "$threads" --seconds "$SECONDS_PER_RUN" \
      > "$dir/load.out" 2> "$dir/load.err" &
  fi
  local pid=$! app_peak=0 cpid="" c_peak=0 c_anon_peak=0 c_cpu=0 c_seen=0 v t
  local t_end=0
  while :; do
    if [[ -e /proc/$pid/status ]] && [[ $(awk '$1 == "State:" { print $2 }' /proc/$pid/status 2>/dev/null) != Z ]]; then
      v=$(kb /proc/$pid/status VmRSS)
      [[ -n $v && $v -gt $app_peak ]] && app_peak=$v
    elif [[ $t_end == 0 ]]; then
      t_end=$(date +%s%N)
    fi
    if [[ $cap != none && -z $cpid ]]; then
      for p in $(pgrep -x aon-collector || true); do
        if tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -qF -- "$dir/trace"; then cpid=$p; fi
      done
    fi
    if [[ -n $cpid ]]; then
      if [[ -e /proc/$cpid/stat ]]; then
        c_seen=1
        v=$(kb /proc/$cpid/status VmRSS)
        [[ -n $v && $v -gt $c_peak ]] && c_peak=$v
        v=$(kb /proc/$cpid/status RssAnon)
        [[ -n $v && $v -gt $c_anon_peak ]] && c_anon_peak=$v
        t=$(awk '{ print $14 + $15 }' /proc/$cpid/stat 2>/dev/null || true)
        [[ -n $t ]] && c_cpu=$t
      else
        cpid=done
      fi
    fi
    # Done when the load has exited and its collector too (or 30 s after the load).
    if [[ $t_end != 0 ]]; then
      [[ $cap == none || $cpid == done ]] && break
      (( ($(date +%s%N) - t_end) / 1000000000 > 30 )) && break
    fi
    sleep 0.1
  done
  local rc=0
  wait "$pid" || rc=$?
  local line
  line="label=$label threads=$threads cap=$cap rc=$rc app_peak_sampled_kB=$app_peak"
  line+=" $(grep -h '^threads=' "$dir/load.out" | sed 's/^threads=[0-9]* //' || true)"
  line+=" $(grep -h '^exit_VmHWM' "$dir/load.out" || true)"
  if [[ $cap != none ]]; then
    local cpu_s
    cpu_s=$(awk -v t="$c_cpu" -v k="$TICK" 'BEGIN { printf "%.2f", t / k }')
    line+=" collector_seen=$c_seen collector_peak_kB=$c_peak collector_anon_peak_kB=$c_anon_peak collector_cpu_s=$cpu_s"
    local file
    file=$(ls "$dir"/trace/rank-*.h5 2>/dev/null | head -1 || true)
    if [[ -n $file ]]; then
      line+=" file_bytes=$(stat -c %s "$file")"
      local summary
      if summary=$("$INSPECT" --json "$file" | python3 -c '
import json, sys
d = json.load(sys.stdin)
notes = [n for n in d["metadata"]["notes"] if n.startswith("collector pid")]
print("written=%d dropped=%d written_nvtx=%d dropped_nvtx=%d collector_note=%s" % (
    sum(d["counts"].values()), sum(d["dropped"].values()), d["counts"]["nvtx"],
    d["dropped"]["nvtx"], json.dumps(notes[0] if notes else "").replace(" ", "_")))'); then
        line+=" $summary"
      else
        line+=" written=0 dropped=0 inspect_failed=1"
        rc=1
      fi
    else
      line+=" file_bytes=0 written=0 dropped=0"
      rc=1
    fi
  fi
  echo "$line" >> "$RAW"
  echo "$line" >&2
  return $rc
}

status=0
for th in $THREADS; do
  run_one "t$th-none" "$th" none || status=1
  for cap in $CAPS; do run_one "t$th-cap$cap" "$th" "$cap" || status=1; done
done

echo
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1); rate $RATE records/s, $SECONDS_PER_RUN s per run"
python3 - "$RAW" <<'EOF'
import sys
runs = []
for line in open(sys.argv[1]):
    d = {}
    for kv in line.split():
        k, _, v = kv.partition("=")
        d[k] = v
    runs.append(d)
def f(d, k, default=0.0):
    try:
        return float(d.get(k, default))
    except ValueError:
        return default
def cap_bytes(c):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return float(c[:-1]) * mult[c[-1]] if c[-1] in mult else float(c)
for th in sorted({r["threads"] for r in runs}, key=int):
    rs = [r for r in runs if r["threads"] == th]
    base = next((r for r in rs if r["cap"] == "none"), None)
    if base is None:
        continue
    bh = f(base, "exit_VmHWM_kB")
    br = f(base, "achieved_rate")
    print(f"\n{th} thread(s):")
    bc = f(base, "cpu_s")
    print("| run | achieved rate/s | rate vs baseline | app CPU s (vs baseline) | app VmHWM MB | "
          "app peak VmRSS MB (sampled) | VmHWM - baseline MB | of the cap | collector peak RSS MB (anon) | "
          "collector CPU s | collector CPU % of a core | written | dropped | dropped % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rs:
        hwm = f(r, "exit_VmHWM_kB")
        rate = f(r, "achieved_rate")
        run_s = f(r, "seconds")
        if r["cap"] == "none":
            print(f"| no agent (baseline) | {rate:,.0f} | 1.000 | {bc:.2f} (1.0) | {hwm/1024:.1f} | "
                  f"{f(r,'app_peak_sampled_kB')/1024:.1f} | - | - | - | - | - | - | - | - |")
            continue
        delta = (hwm - bh) / 1024
        cap = cap_bytes(r["cap"]) / (1 << 20)
        written = int(f(r, "written"))
        dropped = int(f(r, "dropped"))
        total = written + dropped
        cpu = f(r, "collector_cpu_s")
        ac = f(r, "cpu_s")
        print(f"| agent, AON_MEMORY_CAP={r['cap']} | {rate:,.0f} | {rate/br:.3f} | "
              f"{ac:.2f} ({ac/bc if bc else 0:.1f}) | {hwm/1024:.1f} | "
              f"{f(r,'app_peak_sampled_kB')/1024:.1f} | {delta:.1f} | {delta/cap:.2f} | "
              f"{f(r,'collector_peak_kB')/1024:.1f} ({f(r,'collector_anon_peak_kB')/1024:.1f}) | "
              f"{cpu:.2f} | {100*cpu/run_s:.0f} | {written:,} | {dropped:,} | "
              f"{100*dropped/total if total else 0:.2f} |")
EOF
if [[ $KEEP == 0 ]]; then
  cp "$RAW" /tmp/aon-memload-last.txt
  rm -rf "$OUT"
  echo "(raw values: /tmp/aon-memload-last.txt)"
fi
exit $status
