#!/usr/bin/env python3
"""Capture windows on a real GPU: the budgeted run's captured steps hold exactly
the GPU work of those steps, and its other steps none.

    python3 tests/gpu/check_windows.py FULL_JOB_DIR BUDGETED_JOB_DIR

Both job directories are runs of the same deterministic program (the CUDA
example) on the same ranks: FULL_JOB_DIR with --mode full gives, for every step,
the kernels, copies and memsets the program issued in it; BUDGETED_JOB_DIR is the
default mode. A GPU record belongs to the step whose host span holds the API call
that issued it (records share CUPTI's correlation id with their call). Prints a
line per rank and PASS or FAIL.
"""
import collections
import glob
import sys

import h5py
import numpy as np


def strings(f):
    data = f["strings/data"][:].tobytes()
    offsets = f["strings/offsets"][:]
    return [data[o:data.index(b"\0", o)].decode("utf-8", "replace") for o in offsets]


def per_step(path):
    with h5py.File(path, "r") as f:
        steps = f["records/steps"][:]
        api = f["records/api"][:]
        meta = dict(f["meta"].attrs)  # read now: the file closes below
        call = dict(zip(api["correlation_id"].tolist(), api["start_ns"].tolist()))
        starts = steps["start_ns"]
        counts = collections.defaultdict(collections.Counter)
        unassigned = 0
        no_call = collections.Counter()  # kernels without their launch call's record
        names = strings(f)
        for kind in ("kernels", "memcpy", "memset"):
            rec = f["records/" + kind][:]
            for r in rec:
                t = call.get(int(r["correlation_id"]))
                if t is None and kind == "kernels":
                    # A launch CUPTI saw no API call for (below): placed by its GPU start.
                    no_call[names[r["name_id"]].split("(")[0]] += 1
                    t = int(r["start_ns"])
                i = -1 if t is None else int(np.searchsorted(starts, t, side="right")) - 1
                if i < 0 or t >= steps["end_ns"][i]:
                    unassigned += 1
                    continue
                counts[int(steps["step"][i])][kind] += 1
        captured = {int(s["step"]) for s in steps if s["flags"] & 1}
        return dict(rank=int(meta["rank"]), steps=steps, counts=counts, captured=captured,
                    unassigned=unassigned, meta=meta, no_call=no_call)


def main():
    full_dir, budget_dir = sys.argv[1], sys.argv[2]
    ok = True
    for path in sorted(glob.glob(budget_dir + "/rank-*.h5")):
        b = per_step(path)
        f = per_step(path.replace(budget_dir, full_dir))
        m = b["meta"]
        problems = []
        if not b["captured"]:
            problems.append("no captured step")
        for step in sorted(b["captured"]):
            if b["counts"][step] != f["counts"][step]:
                problems.append(f"step {step}: {dict(b['counts'][step])} != full run "
                                f"{dict(f['counts'][step])}")
        for step, c in b["counts"].items():
            if step not in b["captured"] and sum(c.values()):
                problems.append(f"uncaptured step {step} has records {dict(c)}")
        windows = sorted({int(s["window"]) for s in b["steps"] if s["window"]})
        print(f"[windows] rank {b['rank']}: steps {len(b['steps'])}, captured {len(b['captured'])} "
              f"in {len(windows)} windows, period {int(m['capture_period'])}, "
              f"source {m['step_source'].decode() if isinstance(m['step_source'], bytes) else m['step_source']}, in-window ratio {float(m['window_step_ratio']):.2f}, "
              f"amortized cost {100 * float(m['amortized_cost']):.3f} %, "
              f"records outside steps {b['unassigned']} (full run {f['unassigned']})")
        if b["no_call"]:
            # Every launch call should have its record in a window, driver
            # calls included (docs/always-on.md); any left is printed.
            print(f"[windows] rank {b['rank']}: kernels without their launch call's record in "
                  f"windows: {dict(b['no_call'])} (full run: {dict(f['no_call'])})")
        for p in problems[:10]:
            print(f"[windows] rank {b['rank']}: {p}")
        ok = ok and not problems
    print("[windows] " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
