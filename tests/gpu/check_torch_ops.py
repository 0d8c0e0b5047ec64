#!/usr/bin/env python3
"""GPU check: AON's operator and module for every kernel against torch.profiler's,
on the same deterministic loop (tests/gpu/torch_models.py) run twice, separately
(one CUPTI client at a time): once under aon-run, once under torch.profiler
over the whole run.

usage: check_torch_ops.py --aon JOB --torch TRACE --model M [--checkpoint]
                          --steps N --mode full|budgeted [--label L] [--json F]

Every step is compared, not a chosen range:
  - full mode: every kernel of the run, from before the model is built (the
    set-up and the first iteration, before AON's first step boundary) to the
    last step;
  - budgeted mode: every step AON captured (flag captured), whole.
AON's step s runs from the end of optimizer step s to the end of optimizer step
s + 1: it holds iteration s + 1, torch.profiler's ProfilerStep#(s + 1); what
comes before AON's first boundary is ProfilerStep#0.

Within a step the kernels are matched in launch order by name (difflib). For
each of torch.profiler's kernels: the innermost operator or range that launched
it (torch.profiler's External id; its own ProfilerStep#i range counts as none,
and Inductor's per-kernel range, recorded only under torch.profiler, gives way
to the range around it) must be AON's `op`; for kernels launched in forward
inside an nn.Module, the innermost module's class must be the class of AON's
module path. A kernel AON does not have counts as a disagreement.
Checks, PASS/FAIL last: AON's step count, kernel names, operator agreement
>= 99 %, module agreement >= 99 %, and in budgeted mode at least one captured
step.
"""
import argparse
import collections
import difflib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aon  # noqa: E402  (PYTHONPATH: <build>/lib/aon-python)


def torch_side(path):
    """{ProfilerStep number: [(launch ts, GPU start, kernel name, op name, module class)]}"""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    by_ext = {}
    ranges = collections.defaultdict(list)  # tid -> [(start, end, name)]: ops and annotations
    modules = collections.defaultdict(list)  # tid -> [(start, end, class)]
    steps = []
    runtime = {}
    kernels = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, args = e.get("cat", ""), e.get("args", {})
        if cat in ("cpu_op", "user_annotation"):
            if "External id" in args:
                by_ext.setdefault(args["External id"], e)
            ranges[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        if cat == "python_function" and e["name"].startswith("nn.Module: "):
            cls = e["name"][len("nn.Module: "):].rsplit("_", 1)[0]
            modules[e["tid"]].append((e["ts"], e["ts"] + e["dur"], cls))
        if cat == "user_annotation" and e["name"].startswith("ProfilerStep#"):
            steps.append((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])))
        # Launches through the driver API (cuLaunchKernelEx: cuBLASLt, NCCL) are
        # cuda_driver events, the rest cuda_runtime.
        if cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            runtime[args["correlation"]] = e
        if cat == "kernel":
            kernels.append(e)

    def innermost(tid, ts, name, exclude):
        inside = [r for r in ranges.get(tid, []) if r[0] <= ts <= r[1] and r[2] != exclude]
        return min(inside, key=lambda r: r[1] - r[0])[2] if inside else ""

    def op_and_module(op, rt_tid, kernel_name=None):
        name = op["name"] if op else ""
        # (At a capture the kernel's name is not known: Inductor's are triton_*.)
        per_kernel = name == kernel_name if kernel_name else name.startswith("triton_")
        if op is not None and rt_tid is not None and per_kernel:
            # Inductor's range named after the kernel exists only under torch.profiler.
            name = innermost(rt_tid, op["ts"], name, name)
        if name.startswith("ProfilerStep#"):
            name = ""  # torch.profiler's own step range: no operator launched it
        cls = ""
        if op is not None:
            inside = [m for m in modules.get(op["tid"], []) if m[0] <= op["ts"] < m[1]]
            if inside:
                cls = min(inside, key=lambda m: m[1] - m[0])[2]
        return name, cls

    replayed = graph_capture_ops(events, by_ext, runtime, kernels, op_and_module)
    out = collections.defaultdict(list)
    for k in kernels:
        rt = runtime.get(k["args"].get("correlation"))
        launch = rt["ts"] if rt else k["ts"]
        step = next((s for a, b, s in steps if a <= launch < b), None)
        if step is None:
            continue
        if id(k) in replayed:
            name, cls = replayed[id(k)]
        else:
            name, cls = op_and_module(by_ext.get(k["args"].get("External id")),
                                      rt["tid"] if rt else None, k["name"])
        out[step].append((launch, k["ts"], k["name"], name, cls))
    return {s: sorted(v) for s, v in out.items()}


LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
            "cudaLaunchCooperativeKernel")


def graph_capture_ops(events, by_ext, runtime, kernels, op_and_module):
    """CUDA graphs: {id(kernel event): (op, module class)} for the kernels replayed
    from a graph, from the capture itself: the i-th kernel launch made between
    cudaStreamBeginCapture and cudaStreamEndCapture, on any thread (autograd's
    backward runs on its own thread: make_graphed_callables captures the
    backward pass from there; nothing else launches meanwhile in these loops),
    is the i-th node of that graph, and each replay (one cudaGraphLaunch: its
    kernels by GPU start) runs the nodes in that order (a linear capture). A
    replay is matched to the capture with as many launches (said and left out
    when none or several)."""
    calls = sorted((e for e in events if e.get("ph") == "X" and
                    e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
    captures, current = [], None
    for e in calls:
        n = e["name"]
        if n.startswith("cudaStreamBeginCapture"):
            current = []
        elif n.startswith("cudaStreamEndCapture") and current is not None:
            captures.append(current)
            current = None
        elif n in LAUNCHES and current is not None:
            op = by_ext.get(e.get("args", {}).get("External id"))
            current.append(op_and_module(op, e["tid"]))
    replays = collections.defaultdict(list)
    for k in kernels:
        rt = runtime.get(k["args"].get("correlation"))
        if rt is not None and rt["name"].startswith("cudaGraphLaunch"):
            replays[k["args"]["correlation"]].append(k)
    out, unmatched = {}, 0
    for ks in replays.values():
        fits = [c for c in captures if len(c) == len(ks)]
        if len(fits) != 1:
            unmatched += len(ks)
            continue
        for k, truth in zip(sorted(ks, key=lambda k: k["ts"]), fits[0]):
            out[id(k)] = truth
    if replays:
        print("[torch-ops] CUDA graphs: %d captures (%s launches), %d replays; %d replayed "
              "kernels tied to their capture's op, %d not (no capture of their length, or several)"
              % (len(captures), "/".join(str(len(c)) for c in captures), len(replays), len(out),
                 unmatched))
    return out


def col(tab, name):
    v = tab[name]
    return v.to_numpy() if hasattr(v, "to_numpy") else v


def aon_side(job, model_classes):
    """({AON step (-1: before the first boundary): [(launch, GPU start, kernel, op, module)]},
    [(start, end, step, source, flags)])"""
    t = aon.load(job)
    k, api, st = t["kernels"], t["api"], t["steps"]
    launch = dict(zip(col(api, "correlation_id").tolist(), col(api, "start_ns").tolist()))
    steps = sorted(zip(col(st, "start_ns").tolist(), col(st, "end_ns").tolist(),
                       col(st, "step").tolist(), col(st, "source_name").tolist(),
                       col(st, "flags").tolist()))
    # Before the first optimizer step AON marks time-slot steps (no framework
    # step source yet): all of that is the set-up, torch.profiler's ProfilerStep#0.
    steps = [s for s in steps if s[3] == "pytorch"] + [s for s in steps if s[3] != "pytorch"]
    pytorch = [s for s in steps if s[3] == "pytorch"]
    first = pytorch[0][0] if pytorch else None
    out = collections.defaultdict(list)
    unlaunched = 0
    for c, kstart, name, op, module, phase in zip(col(k, "correlation_id").tolist(),
                                                  col(k, "start_ns").tolist(), col(k, "name"),
                                                  col(k, "op"), col(k, "module"), col(k, "phase")):
        ts = launch.get(c)
        if ts is None:
            unlaunched += 1
            continue
        if first is not None and ts < first:
            step = -1
        else:
            step = next((s for a, b, s, src, _ in pytorch if a <= ts < b), None)
            if step is None:
                continue
        cls = model_classes.get(module, "") if phase == "forward" else ""
        out[step].append((ts, kstart, name, op, cls))
    return {s: sorted(v) for s, v in out.items()}, steps, unlaunched


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--aon", required=True)
    p.add_argument("--torch", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--checkpoint", action="store_true")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--mode", choices=["full", "budgeted"], required=True)
    p.add_argument("--label", default="")
    p.add_argument("--json", default="")
    args = p.parse_args()
    label = args.label or args.model
    ok = True

    def say(good, text):
        nonlocal ok
        ok = ok and good
        print(("[torch-ops %s] ok   " % label if good else "[torch-ops %s] FAIL " % label) + text)

    import torch_models
    model, _, _ = torch_models.build(args.model, "cpu", args.checkpoint)
    root = type(model).__name__
    classes = {(root + "." + n if n else root): type(m).__name__ for n, m in model.named_modules()}
    if "ops" not in aon.load(args.aon, kinds=["ops"]):
        say(False, "the job has no ops table: this agent records no operator ranges")
        return 1
    ours, steps, unlaunched = aon_side(args.aon, classes)
    sources = collections.Counter(s[3] for s in steps)
    pytorch = [s for s in steps if s[3] == "pytorch"]
    say(len(pytorch) == args.steps,
        "AON steps from the optimizer: %d (want %d); all steps by source %s"
        % (len(pytorch), args.steps, dict(sources)))
    theirs = torch_side(args.torch)
    if args.mode == "full":
        compared = sorted(s - 1 for s in theirs)  # every step, the set-up (-1) first
    else:
        compared = [s for _, _, s, _, f in pytorch if f & 1]
        other = sum(1 for _, _, _, src, f in steps if f & 1 and src != "pytorch")
        say(len(compared) > 0, "captured optimizer steps: %d of %d (and %d time-slot steps of "
            "the set-up, not compared: torch.profiler has the set-up as one step)"
            % (len(compared), len(pytorch), other))
    total = same_op = fwd = same_mod = missing = 0
    per_step = []
    examples = collections.Counter()
    for s in compared:
        tk, ak = theirs.get(s + 1, []), ours.get(s, [])
        sm = difflib.SequenceMatcher(a=[x[2] for x in tk], b=[x[2] for x in ak], autojunk=False)
        matched = {}
        for block in sm.get_matching_blocks():
            for i in range(block.size):
                matched[block.a + i] = block.b + i
        st = sa = 0
        for i, (_, _, name, op, cls) in enumerate(tk):
            total += 1
            j = matched.get(i)
            a = ak[j] if j is not None else None
            if a is None:
                missing += 1
            if a is not None and a[3] == op:
                same_op += 1
                sa += 1
            else:
                examples[(op, a[3] if a else None, name[:50])] += 1
            st += 1
            if cls:
                fwd += 1
                if a is not None and a[4] == cls:
                    same_mod += 1
                else:
                    examples[("module " + cls, a[4] if a else None, name[:50])] += 1
        per_step.append((s, len(tk), len(ak), sa))
    worst = sorted(per_step, key=lambda r: (r[3] / r[1]) if r[1] else 1.0)[:3]
    for s, nt, na, sa in worst:
        print("[torch-ops %s] step %d: torch %d kernels, AON %d, operator agrees for %d"
              % (label, s, nt, na, sa))
    for (want, got, kname), n in examples.most_common(10):
        print("[torch-ops %s]   %d x kernel %s: torch %r, AON %r" % (label, n, kname, want, got))
    names_t = {x[2] for s in compared for x in theirs.get(s + 1, [])}
    names_a = {x[2] for s in compared for x in ours.get(s, [])}
    say(names_t == names_a, "kernel names: %d distinct in torch.profiler's steps, %d in AON's, "
        "%d differ" % (len(names_t), len(names_a), len(names_t ^ names_a)))
    say(total > 0 and same_op >= 0.99 * total,
        "operator agrees for %d of %d kernels (%.2f %%) over %d steps; %d kernels missing in AON"
        % (same_op, total, 100.0 * same_op / max(total, 1), len(compared), missing))
    say(fwd > 0 and same_mod >= 0.99 * fwd,
        "module class agrees for %d of %d forward kernels in a module (%.2f %%)"
        % (same_mod, fwd, 100.0 * same_mod / max(fwd, 1)))
    print("[torch-ops %s] %s" % (label, "PASS" if ok else "FAIL"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": label, "mode": args.mode, "steps": len(compared), "kernels": total,
                       "op_agree": same_op, "forward_in_module": fwd, "module_agree": same_mod,
                       "missing": missing, "unlaunched": unlaunched, "pass": ok}, f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
