#!/usr/bin/env bash
# NCCL capture overhead on a GPU host: all-reduce latency and bus bandwidth from
# 8 B to 256 MiB, without AON and under aon-run with NCCL capture off, coll and
# default, the configurations interleaved and repeated (REPEATS, default 2) so
# drift hits all alike; the median per size is kept. Prints a table (ratios
# against the no-AON run of the same script) and writes it to $OUT/nccl-overhead.md.
#   BUILD=build-gpu bash bench/run_nccl_overhead.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/aon-bench}
REPEATS=${REPEATS:-2}
MS=${MS:-100}
BIN=$PWD/$BUILD/bin
mkdir -p "$OUT"
NGPU=$(nvidia-smi -L | grep -c '^GPU')
NP=$(( NGPU < 2 ? NGPU : 2 ))
MPI=(mpirun --allow-run-as-root --bind-to none -np "$NP" -x NCCL_NVLS_ENABLE)
for rep in $(seq 1 "$REPEATS"); do
  for cfg in plain off coll default; do
    log="$OUT/allreduce-$cfg-$rep.log"
    if [ "$cfg" = plain ]; then
      "${MPI[@]}" "$BIN/aon-bench-allreduce" --ms "$MS" > "$log" 2>&1
    else
      rm -rf "$OUT/job-$cfg-$rep"
      "$BIN/aon-run" --no-merge --nccl "$cfg" -o "$OUT/job-$cfg-$rep" "${MPI[@]}" \
        "$BIN/aon-bench-allreduce" --ms "$MS" > "$log" 2>&1
    fi
    echo "run $rep $cfg: $(grep -c AON_BENCH "$log") sizes"
  done
done
python3 - "$OUT" "$REPEATS" "$NP" <<'PY'
import glob, re, statistics, sys
out, repeats, np_ = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = {}
for cfg in ("plain", "off", "coll", "default"):
    per = {}
    for rep in range(1, repeats + 1):
        for line in open(f"{out}/allreduce-{cfg}-{rep}.log", errors="replace"):
            m = re.search(r"AON_BENCH bytes=(\d+) iters=\d+ us=([\d.]+) algbw=[\d.]+ busbw=([\d.]+)", line)
            if m:
                per.setdefault(int(m.group(1)), []).append((float(m.group(2)), float(m.group(3))))
    data[cfg] = {b: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for b, v in per.items()}
def size(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {unit}"
    return f"{b} B"
lines = [f"All-reduce on {np_} GPUs, median of {repeats} interleaved runs per configuration.",
         "Time ratio = time / time without AON (1.000 = no cost); busbw in GB/s.", "",
         "| size | no AON us | busbw | AON nccl=off | AON nccl=coll | AON nccl=default | default busbw |",
         "|---:|---:|---:|---:|---:|---:|---:|"]
for b in sorted(data["plain"]):
    base = data["plain"][b][0]
    r = {c: data[c].get(b, (float("nan"), 0))[0] / base for c in ("off", "coll", "default")}
    lines.append(f"| {size(b)} | {base:.2f} | {data['plain'][b][1]:.1f} | {r['off']:.3f} | {r['coll']:.3f} | "
                 f"{r['default']:.3f} | {data['default'].get(b, (0, 0))[1]:.1f} |")
big = [b for b in data["plain"] if b >= 1 << 20]
if big:
    worst = max(data["default"][b][0] / data["plain"][b][0] for b in big)
    worst_nccl = max(data["default"][b][0] / data["off"][b][0] for b in big)
    lines.append("")
    lines.append(f"Worst time ratio at >= 1 MiB: default vs no AON {worst:.3f}; "
                 f"default vs AON without NCCL capture {worst_nccl:.3f}.")
text = "\n".join(lines)
print(text)
open(f"{out}/nccl-overhead.md", "w").write(text + "\n")
PY
