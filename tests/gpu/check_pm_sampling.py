#!/usr/bin/env python3
"""GPU check of CUPTI PM sampling in capture windows (docs/counters.md).

usage: check_pm_sampling.py JOB_DIR REPORT_JSON INTERVAL_US [NCU_CSV]

JOB_DIR holds the merged timeline of tests/gpu/counters_phases.cu run under
`aon-run --mode full` (every step captured, so PM sampling runs all along);
REPORT_JSON is `aon-report --json` of it; NCU_CSV (optional) is `ncu --csv` of
the same program's GEMM and stream-add kernels. Checks, one line each, then
PASS/FAIL:
  - the rank file holds PM samples (source "pm sampling"), their length the
    interval asked for (within 10 %: the GPU-time trigger runs on the GPU's
    clock, the timestamps are the host's);
  - per kernel name, the mean of the samples that lie inside its executions,
    printed as a table beside ncu's figure of the same kernels;
  - agreement with ncu within 15 points for DRAM throughput (both kernels: the
    same metric, dram__throughput) and the tensor pipe (the GEMM). Why 15: ncu
    replays one kernel alone with its clocks locked to base and its caches
    flushed, AON samples the kernel where it ran (boost clocks, caches warm,
    neighbours' ramps in the samples at its edges), and the tensor figures are
    different counters (any tensor pipe vs HMMA ops);
  - aon-report judges the GEMM compute-bound, the stream add memory-bound and
    the tiny kernel launch-bound, each from PM samples, and the NVTX phases
    the same, but for phase:host (the tiny kernel between 1 ms sleeps):
    host-bound, from the trace's gaps in it.
"""
import csv
import json
import sys

import h5py
import numpy as np

GPU_ACTIVE, SM_ACTIVE, TENSOR, DRAM, ISSUE = 1, 2, 4, 9, 14
PM_SAMPLING = 2


def kernel_group(name):
    if "StreamAdd" in name:
        return "stream_add"
    if "Tiny" in name:
        return "tiny"
    if "Fill" in name:
        return None
    return "gemm"


def main():
    job, report, interval_us = sys.argv[1], sys.argv[2], float(sys.argv[3])
    ncu = sys.argv[4] if len(sys.argv) > 4 else None
    ok = True

    def say(good, text):
        nonlocal ok
        ok = ok and good
        print(("[pm-sampling] ok   " if good else "[pm-sampling] FAIL ") + text)

    with h5py.File(job + "/timeline.h5", "r") as f:
        rows = f["records/counters"][:] if "records/counters" in f else np.zeros(0)
        kernels = f["records/kernels"][:]
        data = f["strings/data"][:].tobytes()
        names = [data[o:data.index(b"\0", o)].decode("utf-8", "replace")
                 for o in f["strings/offsets"][:]]
    pm = rows[rows["source"] == PM_SAMPLING] if len(rows) else rows
    say(len(pm) > 0, "%d PM sampling rows in the timeline" % len(pm))
    if len(pm) == 0:
        print("[pm-sampling] FAIL")
        return 1
    lengths = (pm["end_ns"] - pm["start_ns"]) / 1e3
    say(abs(np.median(lengths) - interval_us) <= 0.1 * interval_us,
        "sample length median %.1f us (asked %.0f us)" % (np.median(lengths), interval_us))

    # Samples by metric, sorted by start.
    by_metric = {}
    for m in (GPU_ACTIVE, SM_ACTIVE, TENSOR, DRAM, ISSUE):
        r = np.sort(pm[pm["metric"] == m], order="start_ns")
        by_metric[m] = r
    ours = {}
    for group in ("gemm", "stream_add", "tiny"):
        ks = [k for k in kernels if kernel_group(names[k["name_id"]]) == group]
        means = {}
        for m, r in by_metric.items():
            total = weight = 0.0
            for k in ks:
                lo = np.searchsorted(r["start_ns"], k["start_ns"])
                hi = np.searchsorted(r["start_ns"], k["end_ns"])
                inside = r[lo:hi]
                inside = inside[inside["end_ns"] <= k["end_ns"]]
                total += float(inside["value"].sum())
                weight += len(inside)
            means[m] = total / weight if weight else float("nan")
        ours[group] = (len(ks), int(weight), means)

    ncu_fig = {}
    if ncu:
        with open(ncu, encoding="utf-8", errors="replace") as f:
            lines = [l for l in f if l.startswith('"')]
        for row in csv.DictReader(lines):
            try:
                g = kernel_group(row["Kernel Name"])
                v = float(row["Metric Value"].replace(",", ""))
            except (KeyError, ValueError):
                continue
            if g:
                ncu_fig.setdefault((g, row["Metric Name"]), []).append(v)

    def ncu_mean(group, prefix):
        vs = [v for (g, m), vals in ncu_fig.items() if g == group and m.startswith(prefix) for v in vals]
        return float(np.mean(vs)) if vs else float("nan")

    print("[pm-sampling] kernel      launches  samples  gpu_act  sm_act  issue  tensor  dram | "
          "ncu: dram  tensor(hmma)  issue  sm_throughput")
    for group, (n, samples, m) in ours.items():
        print("[pm-sampling] %-11s %8d %8d %8.1f %7.1f %6.1f %7.1f %5.1f | %9.1f %13.1f %6.1f %14.1f" % (
            group, n, samples, m[GPU_ACTIVE], m[SM_ACTIVE], m[ISSUE], m[TENSOR], m[DRAM],
            ncu_mean(group, "dram__throughput"), ncu_mean(group, "sm__pipe_tensor_op_hmma"),
            ncu_mean(group, "sm__inst_executed"), ncu_mean(group, "sm__throughput")))
    say(ours["gemm"][1] >= 10 and ours["stream_add"][1] >= 10,
        "samples inside the GEMMs (%d) and the stream adds (%d)" % (ours["gemm"][1], ours["stream_add"][1]))
    if ncu:
        for group, metric, prefix in (("stream_add", DRAM, "dram__throughput"),
                                      ("gemm", DRAM, "dram__throughput"),
                                      ("gemm", TENSOR, "sm__pipe_tensor_op_hmma")):
            a, b = ncu_mean(group, prefix), ours[group][2][metric]
            say(abs(a - b) <= 15, "%s %s: ncu %.1f %% vs PM samples %.1f %% (within 15 points)" %
                (group, prefix, a, b))

    with open(report, encoding="utf-8") as f:
        c = json.load(f).get("counters", {})
    want = {"gemm": "compute-bound", "stream_add": "memory-bound", "tiny": "launch-bound"}
    for k in c.get("kernels", []):
        g = kernel_group(k["name"])
        if g in want:
            say(k["verdict"] == want[g] and k.get("sampled"),
                "kernel %s: %s from %s (want %s): %s" % (k["name"][:50], k["verdict"],
                "PM samples" if k.get("sampled") else "GPM", want[g], k.get("why", "")))
            want.pop(g)
    say(not want, "every planted kernel judged (missing: %s)" % sorted(want))
    phases = {"phase:compute": "compute-bound", "phase:memory": "memory-bound",
              "phase:launch": "launch-bound", "phase:host": "host-bound"}
    for p in c.get("phases", []):
        if p["name"] in phases:
            say(p["verdict"] == phases[p["name"]] and p.get("sampled"),
                "%s: %s from %s: %s" % (p["name"], p["verdict"],
                                        "PM samples" if p.get("sampled") else "GPM", p.get("why", "")))
    print("[pm-sampling] PASS" if ok else "[pm-sampling] FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
