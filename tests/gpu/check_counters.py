#!/usr/bin/env python3
"""GPU check of the node's GPM counters (docs/counters.md) on a real GPU.

usage: check_counters.py JOB_DIR REPORT_JSON [NCU_CSV]

JOB_DIR holds the merged timeline of tests/gpu/counters_phases.cu run under
aon-run; REPORT_JSON is `aon-report --json` of it; NCU_CSV (optional) is
`ncu --csv` of the same program's kernels. Checks, printing one line each and
PASS/FAIL at the end:
  - the timeline holds GPM rows (source gpm) of the GPU: GPU active in
    contiguous intervals near the sampling interval, every other metric in
    those same intervals, lacking some only where the notes say NVML gave NaN;
  - the four planted phases get their verdicts in the report: phase:compute
    compute-bound, phase:memory memory-bound, phase:launch launch-bound,
    phase:host host-bound (the counters call it idle as they do phase:launch;
    the trace's gaps inside it say host work: in the default budgeted mode
    only where capture windows traced 5 ms of it or more, else launch-bound,
    the counters' word alone, and the line says which);
  - with NCU_CSV: GPM's DRAM figure of the memory phase and its tensor figure of
    the compute phase against ncu's per-kernel figures of the same kernels.
    GPM averages the whole interval (gaps between kernels included, the GPU is
    >= 95 % busy in those phases), ncu one kernel alone: GPM may be lower by the
    idle share, and the two count differently (device-wide pipe activity vs the
    kernel's own throughput), so agreement is judged within 15 points.
"""
import csv
import glob
import json
import sys

import h5py
import numpy as np

METRICS = {1: "gpu_active_pct", 2: "sm_active_pct", 3: "sm_occupancy_pct", 4: "tensor_active_pct",
           5: "fp64_active_pct", 6: "fp32_active_pct", 7: "fp16_active_pct", 8: "int_active_pct",
           9: "dram_bandwidth_pct", 10: "pcie_tx_mib_per_s", 11: "pcie_rx_mib_per_s",
           12: "nvlink_tx_mib_per_s", 13: "nvlink_rx_mib_per_s"}
WANT = {"phase:compute": "compute-bound", "phase:memory": "memory-bound",
        "phase:launch": "launch-bound", "phase:host": "host-bound"}


def main():
    job, report = sys.argv[1], sys.argv[2]
    ncu = sys.argv[3] if len(sys.argv) > 3 else None
    ok = True

    def say(good, text):
        nonlocal ok
        ok = ok and good
        print(("[counters] ok   " if good else "[counters] FAIL ") + text)

    with h5py.File(job + "/timeline.h5", "r") as f:
        rows = f["records/counters"][:]
        nvtx = f["records/nvtx"][:]
        data = f["strings/data"][:].tobytes()
        names = [data[o:data.index(b"\0", o)].decode("utf-8", "replace")
                 for o in f["strings/offsets"][:]]

    def name(i):
        return names[i] if i < len(names) else "?"

    say(len(rows) > 0, "%d counter rows in the timeline" % len(rows))
    if len(rows) == 0:
        print("[counters] FAIL")
        return 1
    # This check is about the node's GPM tier; PM samples in capture windows
    # (source 2) have tests/gpu/check_pm_sampling.py.
    pm = int((rows["source"] == 2).sum())
    rows = rows[rows["source"] != 2]
    say(len(rows) > 0 and bool(np.all(rows["source"] == 1)),
        "every other row from NVML GPM (source gpm); %d PM sampling rows set aside" % pm)
    # NVML GPM gives some metrics as NaN for some intervals; the collector leaves
    # those rows out and says so in the notes. Every metric is read in the same
    # intervals as GPU active: a metric may lack some of them (at the edges or
    # inside the run), only if the notes name it, and has none of its own.
    notes = ""
    for path in glob.glob(job + "/rank-*.h5"):
        with h5py.File(path, "r") as f:
            n = f["meta"].attrs.get("notes", "")
            notes += (n.decode() if isinstance(n, bytes) else str(n)) + "\n"
    reference = set(rows[rows["metric"] == 1]["start_ns"].tolist())
    for metric in sorted(set(rows["metric"].tolist())):
        label = METRICS.get(int(metric), str(metric))
        r = np.sort(rows[rows["metric"] == metric], order="start_ns")
        gaps = r["start_ns"][1:].astype(np.int64) - r["end_ns"][:-1].astype(np.int64)
        lengths = (r["end_ns"] - r["start_ns"]) / 1e6
        starts = set(r["start_ns"].tolist())
        own = len(starts - reference)
        missing = len(reference - starts)
        said = ("gave %s as not a number" % label) in notes
        contiguous = int(np.abs(gaps).max(initial=0)) == 0
        say(len(r) > 10 and own == 0 and int(gaps.min(initial=0)) >= 0 and
            (missing == 0 or said) and (metric != 1 or contiguous),
            "%-20s %5d rows, %d hole(s) inside, %d interval(s) of gpu_active without it%s, "
            "interval median %.1f ms" %
            (label, len(r), int((gaps != 0).sum()), missing,
             (" (the notes say it was NaN)" if said else " (the notes do NOT say why)")
             if missing else "", float(np.median(lengths))))

    # Overlap-weighted means per phase, for the record (the report decides).
    phases = {}
    for n in nvtx:
        nm = name(int(n["name_id"]))
        if nm in WANT:
            phases[nm] = (int(n["start_ns"]), int(n["end_ns"]))
    say(set(phases) == set(WANT), "the four phases are in the timeline: %s" % sorted(phases))
    means = {}
    for nm, (s, e) in sorted(phases.items()):
        line = []
        for metric in (1, 2, 4, 6, 9):
            r = rows[rows["metric"] == metric]
            r = r[np.isfinite(r["value"])]  # files written before the collector left NaN out
            w = np.clip(np.minimum(r["end_ns"], e).astype(np.int64) -
                        np.maximum(r["start_ns"], s).astype(np.int64), 0, None)
            v = float((w * r["value"]).sum() / w.sum()) if w.sum() > 0 else float("nan")
            means[(nm, metric)] = v
            line.append("%s %.1f" % (METRICS[metric], v))
        print("[counters] %-14s %s" % (nm, ", ".join(line)))

    with open(report, encoding="utf-8") as f:
        rep = json.load(f)
    got = {p["name"]: p for p in rep.get("counters", {}).get("phases", [])}
    for nm, verdict in WANT.items():
        p = got.get(nm, {})
        traced = p.get("traced_ns", 0)
        if verdict == "host-bound" and traced < 5e6:
            verdict = "launch-bound"  # no trace of it to tell the cause from
        say(p.get("verdict") == verdict, "%s: report says %s (want %s; %.0f ms traced, gaps %s)" %
            (nm, p.get("verdict"), verdict, traced / 1e6, p.get("idle_by_cause_ns", {})))

    if ncu:
        # ncu --csv: one row per (kernel launch, metric).
        per = {}
        with open(ncu, encoding="utf-8", errors="replace") as f:
            lines = [l for l in f if l.startswith('"')]
        for row in csv.DictReader(lines):
            try:
                per.setdefault((row["Kernel Name"], row["Metric Name"]), []).append(
                    float(row["Metric Value"].replace(",", "")))
            except (KeyError, ValueError):
                continue
        dram = [v for (k, m), vs in per.items() if "StreamAdd" in k and m.startswith("dram__")
                for v in vs]
        tensor = [v for (k, m), vs in per.items() if "StreamAdd" not in k and "Tiny" not in k and
                  "Fill" not in k and "tensor" in m for v in vs]
        if dram:
            a, b = float(np.mean(dram)), means[("phase:memory", 9)]
            say(abs(a - b) <= 15, "memory phase DRAM: ncu %.1f %% vs GPM %.1f %%" % (a, b))
        else:
            say(False, "ncu gave no DRAM figure of StreamAddKernel")
        if tensor:
            a, b = float(np.mean(tensor)), means[("phase:compute", 4)]
            say(abs(a - b) <= 15, "compute phase tensor: ncu %.1f %% vs GPM %.1f %%" % (a, b))
        else:
            say(False, "ncu gave no tensor-pipe figure of the GEMM")
    print("[counters] PASS" if ok else "[counters] FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
