#!/usr/bin/env bash
# NCCL capture overhead on a GPU host: all-reduce latency and bus bandwidth from
# MIN_BYTES to MAX_BYTES (8 B .. 256 MiB), without AON and under aon-run in each
# configuration of CONFIGS, interleaved and repeated (REPEATS, default 2) so
# drift hits all alike; the median per size is kept. Prints a table (time
# ratios against the no-AON run of the same script) and writes it to
# $OUT/nccl-overhead.md. A configuration is `plain` (no AON), `nccl:<mode>`
# (aon-run --nccl <mode>) or `kinds:<list>` (aon-run --nccl off --kinds <list>).
#   BUILD=build-gpu bash bench/run_nccl_overhead.sh
#   CONFIGS="plain kinds:nvtx kinds:kernels" MAX_BYTES=2097152 bash bench/run_nccl_overhead.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/aon-bench}
REPEATS=${REPEATS:-2}
MS=${MS:-100}
MIN_BYTES=${MIN_BYTES:-8}
MAX_BYTES=${MAX_BYTES:-268435456}
CONFIGS=${CONFIGS:-plain nccl:off nccl:coll nccl:default nccl:channels}
NAME=${NAME:-nccl-overhead}
BIN=$PWD/$BUILD/bin
mkdir -p "$OUT"
NGPU=$(nvidia-smi -L | grep -c '^GPU')
NP=$(( NGPU < 2 ? NGPU : 2 ))
MPI=(mpirun --allow-run-as-root --bind-to none -np "$NP" -x NCCL_NVLS_ENABLE)
ARGS=(--ms "$MS" --min-bytes "$MIN_BYTES" --max-bytes "$MAX_BYTES")
for rep in $(seq 1 "$REPEATS"); do
  for cfg in $CONFIGS; do
    tag=${cfg//[:,]/_}
    log="$OUT/$NAME-$tag-$rep.log"
    case $cfg in
      plain) "${MPI[@]}" "$BIN/aon-bench-allreduce" "${ARGS[@]}" > "$log" 2>&1 ;;
      nccl:*) rm -rf "$OUT/job-$tag-$rep"
        "$BIN/aon-run" --no-merge --nccl "${cfg#nccl:}" -o "$OUT/job-$tag-$rep" "${MPI[@]}" \
          "$BIN/aon-bench-allreduce" "${ARGS[@]}" > "$log" 2>&1 ;;
      kinds:*) rm -rf "$OUT/job-$tag-$rep"
        "$BIN/aon-run" --no-merge --nccl off --kinds "${cfg#kinds:}" -o "$OUT/job-$tag-$rep" \
          "${MPI[@]}" "$BIN/aon-bench-allreduce" "${ARGS[@]}" > "$log" 2>&1 ;;
    esac
    echo "run $rep $cfg: $(grep -c AON_BENCH "$log") sizes"
  done
done
python3 - "$OUT" "$REPEATS" "$NP" "$NAME" $CONFIGS <<'PY'
import re, statistics, sys
out, repeats, np_, name, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
data = {}
for cfg in configs:
    tag = cfg.replace(":", "_").replace(",", "_")
    per = {}
    for rep in range(1, repeats + 1):
        for line in open(f"{out}/{name}-{tag}-{rep}.log", errors="replace"):
            m = re.search(r"AON_BENCH bytes=(\d+) iters=\d+ us=([\d.]+) algbw=[\d.]+ busbw=([\d.]+)", line)
            if m:
                per.setdefault(int(m.group(1)), []).append((float(m.group(2)), float(m.group(3))))
    data[cfg] = {b: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
                 for b, v in per.items()}
def size(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {unit}"
    return f"{b} B"
others = [c for c in configs if c != "plain"]
lines = [f"All-reduce on {np_} GPUs, median of {repeats} interleaved runs per configuration.",
         "Columns after busbw: time / time without AON (1.000 = no cost).", "",
         "| size | no AON us | busbw GB/s | " + " | ".join(others) + " |",
         "|---:|---:|---:|" + "---:|" * len(others)]
for b in sorted(data["plain"]):
    base = data["plain"][b][0]
    cells = [f"{data[c][b][0] / base:.3f}" if b in data[c] else "n/a" for c in others]
    lines.append(f"| {size(b)} | {base:.2f} | {data['plain'][b][1]:.1f} | " + " | ".join(cells) + " |")
big = [b for b in data["plain"] if b >= 1 << 20]
if big and "nccl:off" in data:
    lines.append("")
    for c in [c for c in others if c.startswith("nccl:") and c != "nccl:off"]:
        worst = max(data[c][b][0] / data["nccl:off"][b][0] for b in big if b in data[c])
        lines.append(f"Worst time ratio at >= 1 MiB, {c} vs nccl:off (the cost of NCCL capture): {worst:.3f}")
text = "\n".join(lines)
print(text)
open(f"{out}/{name}.md", "w").write(text + "\n")
PY
