#!/usr/bin/env python3
"""Checks AON's JAX steps and its kernel -> HLO instruction table against JAX's
own profiler, step by step (issue #32; docs/jax.md).

    check_jax.py --aon JOB --jax PROFILE_DIR --steps N --mode full|budgeted
                 [--label L] [--json OUT]

The same program (tests/gpu/jax_models.py) ran twice, separately (one CUPTI
client at a time): under jax.profiler.trace (PROFILE_DIR, read back with
jax.profiler.ProfileData) and under aon-run (JOB, read with aon.load). The
truth per step: JAX's StepTraceAnnotation("train", step_num=i) range on the host
and the GPU kernels that began inside it, each with the `hlo_op` JAX's profiler
gives it. AON's: its `jax` steps (numbered from 0 like the annotations) and the
kernels that began inside each, with the reader's `hlo_op`. Then:
  - steps: AON has exactly N `jax` steps, numbered 0..N-1;
  - per step compared (full: every step both have; budgeted: every step AON
    captured), the multisets of (kernel name, hlo_op): the share of JAX's pairs
    that AON has, over all those steps; PASS at >= 99 % and equal kernel counts.
    A kernel JAX gives to the command buffer (CUDA graph) it ran in and AON to
    the instruction inside it that XLA emitted the kernel for agrees (counted
    and printed apart: refined_in_command_buffers).
Kernels that ran before the first annotation (compilation, autotuning) are in
no step on either side and are not compared. Prints a line per failed step
(first 10), the totals, and PASS or FAIL; --json writes the figures.
"""
import argparse
import collections
import glob
import json
import sys

import aon


def col(tab, name):
    v = tab[name]
    return v.to_numpy() if hasattr(v, "to_numpy") else v


def jax_side(profile_dir):
    """({step: Counter((kernel, hlo_op))}, number of annotated steps)."""
    from jax.profiler import ProfileData
    files = sorted(glob.glob(profile_dir + "/**/*.xplane.pb", recursive=True))
    if not files:
        raise SystemExit("FAIL no .xplane.pb under %s" % profile_dir)
    pd = ProfileData.from_file(files[-1])
    steps = []  # (start, end, step)
    kernels = []  # (start, name, hlo_op)
    for plane in pd.planes:
        gpu = plane.name.startswith("/device:GPU")
        for line in plane.lines:
            for e in line.events:
                stats = dict(e.stats)
                if not gpu and e.name == "train" and "step_num" in stats:
                    steps.append((e.start_ns, e.start_ns + e.duration_ns, int(stats["step_num"])))
                elif gpu and not e.name.startswith(("Memcpy", "Memset")):
                    kernels.append((e.start_ns, e.name, str(stats.get("hlo_op", ""))))
    steps.sort()
    out = collections.defaultdict(collections.Counter)
    for start, name, op in kernels:
        for a, b, s in steps:
            if a <= start < b:
                out[s][(name, op)] += 1
                break
    return out, len(steps)


def aon_side(job):
    """({step: Counter((kernel, hlo_op))}, jax step numbers, captured step numbers)."""
    t = aon.load(job, kinds=["kernels", "steps", "api", "nvtx"])
    st = t["steps"]
    steps = sorted((int(a), int(b), int(s), int(f)) for a, b, s, f, src in
                   zip(col(st, "start_ns"), col(st, "end_ns"), col(st, "step"), col(st, "flags"),
                       col(st, "source_name")) if src == "jax")
    k = t["kernels"]
    out = collections.defaultdict(collections.Counter)
    starts = [a for a, _, _, _ in steps]
    import bisect
    for start, name, op in zip(col(k, "start_ns"), col(k, "name"), col(k, "hlo_op")):
        i = bisect.bisect_right(starts, int(start)) - 1
        if i >= 0 and int(start) < steps[i][1]:
            out[steps[i][2]][(str(name), str(op))] += 1
    return out, [s for _, _, s, _ in steps], {s for _, _, s, f in steps if f & 1}


def refined_in_command_buffers(jax_only, aon_only):
    """How many of JAX's (kernel, command_buffer_N) pairs AON names more finely.

    jax.profiler may give a kernel that ran inside an XLA command buffer (a CUDA
    graph) the command buffer's thunk as its hlo_op; AON names the instruction
    recorded for the graph node. That is the same kernel, finer, when the
    instruction is the one XLA emitted the kernel for: XLA names a fusion's
    kernel after its instruction with '.' made '_' (input_reduce_fusion.1 ->
    input_reduce_fusion_1). Anything else stays a disagreement."""
    n = 0
    aon_left = collections.Counter(aon_only)
    for (kernel, op), count in jax_only.items():
        if not op.startswith("command_buffer"):
            continue
        for (k2, op2), c2 in list(aon_left.items()):
            if k2 == kernel and c2 > 0 and op2 and op2.replace(".", "_") == kernel:
                used = min(count, c2)
                aon_left[(k2, op2)] -= used
                count -= used
                n += used
    return n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--aon", required=True)
    p.add_argument("--jax", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--mode", choices=["full", "budgeted"], required=True)
    p.add_argument("--label", default="")
    p.add_argument("--json", default="")
    args = p.parse_args()
    tag = "[jax %s]" % (args.label or args.mode)
    truth, annotated = jax_side(args.jax)
    got, numbers, captured = aon_side(args.aon)
    ok = True
    if annotated != args.steps:
        print("%s FAIL JAX's profile holds %d annotated steps, the program ran %d" %
              (tag, annotated, args.steps))
        ok = False
    if numbers != list(range(args.steps)):
        print("%s FAIL AON's jax steps: %d, numbered %s..., want 0..%d" %
              (tag, len(numbers), numbers[:5], args.steps - 1))
        ok = False
    else:
        print("%s ok   AON's jax steps: %d of %d, numbered 0..%d" %
              (tag, len(numbers), args.steps, args.steps - 1))
    compared = sorted(s for s in truth if (s in captured if args.mode == "budgeted" else s in got))
    agree = total = kernels_aon = 0
    bad = 0
    refined = 0
    for s in compared:
        want, have = truth[s], got.get(s, collections.Counter())
        both = sum((want & have).values())
        inside = refined_in_command_buffers(want - have, have - want)
        refined += inside
        both += inside
        agree += both
        total += sum(want.values())
        kernels_aon += sum(have.values())
        if both != sum(want.values()) or sum(have.values()) != sum(want.values()):
            bad += 1
            if bad <= 10:
                print("%s step %d: JAX %d kernels, AON %d, %d agree; JAX only %s; AON only %s" %
                      (tag, s, sum(want.values()), sum(have.values()), both,
                       list((want - have).items())[:3], list((have - want).items())[:3]))
    share = agree / total if total else 0.0
    if not compared:
        print("%s FAIL no step to compare" % tag)
        ok = False
    elif share < 0.99 or kernels_aon != total:
        ok = False
    print("%s %s kernel -> hlo_op agrees for %d of %d kernels (%.2f %%) over %d steps; AON had %d"
          % (tag, "ok  " if share >= 0.99 else "FAIL", agree, total, 100 * share, len(compared),
             kernels_aon))
    if refined:
        print("%s      %d of them JAX gives to the command buffer that ran them and AON to the "
              "instruction inside it that the kernel was emitted for (counted as agreeing)"
              % (tag, refined))
    print("%s %s" % (tag, "PASS" if ok else "FAIL"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "mode": args.mode, "steps": len(compared),
                       "aon_steps": len(numbers), "kernels": total, "aon_kernels": kernels_aon,
                       "agree": agree, "refined_in_command_buffers": refined, "pass": ok}, f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
