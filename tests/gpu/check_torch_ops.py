#!/usr/bin/env python3
"""GPU check: AON's operator and module for each kernel against torch.profiler's
on the same deterministic loop (tests/gpu/torch_attribution.py), run
separately (one CUPTI client at a time).

usage: check_torch_ops.py AON_JOB_DIR TORCH_TRACE_JSON STEPS

AON_JOB_DIR: `aon-run --mode full` of the loop (a merged job); TORCH_TRACE_JSON:
the loop's torch.profiler Chrome trace of iterations [a, b); STEPS: the loop's
step count. Checks, one line each, PASS/FAIL last:
  - AON's step count is exact (steps from the optimizer hook, source pytorch);
  - for the kernels of the profiled iterations, matched in launch order, the
    innermost operator that launched each kernel agrees for >= 99 %;
  - for forward kernels inside an nn.Module, the innermost module's class
    agrees for >= 99 % (torch.profiler names modules by class and instance;
    AON by path, mapped to the class through the same model).
"""
import collections
import difflib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aon  # noqa: E402  (PYTHONPATH: build-gpu/lib/aon-python)


def torch_side(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    by_ext = {}
    modules = collections.defaultdict(list)  # tid -> [(start, end, class)]
    steps = []
    runtime = {}
    kernels = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, args = e.get("cat", ""), e.get("args", {})
        if cat in ("cpu_op", "user_annotation") and "External id" in args:
            by_ext.setdefault(args["External id"], e)
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
    out = collections.defaultdict(list)  # step -> [(launch ts, kernel, op, module class)]
    for k in kernels:
        rt = runtime.get(k["args"].get("correlation"))
        launch = rt["ts"] if rt else k["ts"]
        op = by_ext.get(k["args"].get("External id"))
        step = next((s for a, b, s in steps if a <= launch < b), None)
        if step is None:
            continue
        cls = ""
        if op is not None:
            inside = [m for m in modules.get(op["tid"], []) if m[0] <= op["ts"] < m[1]]
            if inside:
                cls = min(inside, key=lambda m: m[1] - m[0])[2]
        out[step].append((launch, k["name"], op["name"] if op else "", cls))
    return {s: sorted(v) for s, v in out.items()}


def aon_side(job, model_classes):
    t = aon.load(job)
    def col(tab, name):
        v = tab[name]
        return v.to_numpy() if hasattr(v, "to_numpy") else v
    k, api, st = t["kernels"], t["api"], t["steps"]
    launch = dict(zip(col(api, "correlation_id").tolist(), col(api, "start_ns").tolist()))
    steps = list(zip(col(st, "start_ns").tolist(), col(st, "end_ns").tolist(),
                     col(st, "step").tolist(), col(st, "source_name").tolist()))
    out = collections.defaultdict(list)
    for c, name, op, module, phase in zip(col(k, "correlation_id").tolist(), col(k, "name"),
                                          col(k, "op"), col(k, "module"), col(k, "phase")):
        ts = launch.get(c)
        if ts is None:
            continue
        step = next((s for a, b, s, _ in steps if a <= ts < b), None)
        if step is None:
            continue
        cls = model_classes.get(module, "") if phase == "forward" else ""
        out[step].append((ts, name, op, cls))
    return {s: sorted(v) for s, v in out.items()}, steps


def main():
    job, trace, want_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ok = True

    def say(good, text):
        nonlocal ok
        ok = ok and good
        print(("[torch-ops] ok   " if good else "[torch-ops] FAIL ") + text)

    import torch_attribution
    model = torch_attribution.build("cpu")
    root = type(model).__name__
    classes = {(root + "." + n if n else root): type(m).__name__ for n, m in model.named_modules()}
    if "ops" not in aon.load(job, kinds=["ops"]):
        print("[torch-ops] FAIL the job has no ops table: this agent records no operator ranges")
        return 1
    ours, steps = aon_side(job, classes)
    sources = collections.Counter(s[3] for s in steps)
    # Boundaries after each optimizer step: steps 0 .. STEPS-1, the last one
    # ending when the process does.
    say(len(steps) == want_steps and set(sources) == {"pytorch"},
        "AON steps: %d (want %d), sources %s" % (len(steps), want_steps, dict(sources)))
    theirs = torch_side(trace)
    total = same_op = fwd = same_mod = 0
    examples = []
    for tstep, tk in sorted(theirs.items()):
        # AON's step s runs from the end of iteration s to the end of s + 1:
        # it holds iteration s + 1, torch.profiler's ProfilerStep#(s + 1).
        ak = ours.get(tstep - 1, [])
        sm = difflib.SequenceMatcher(a=[x[1] for x in tk], b=[x[1] for x in ak], autojunk=False)
        matched = {}
        for block in sm.get_matching_blocks():
            for i in range(block.size):
                matched[block.a + i] = block.b + i
        for i, (_, name, op, cls) in enumerate(tk):
            total += 1
            j = matched.get(i)
            a = ak[j] if j is not None else None
            if a is not None and a[2] == op:
                same_op += 1
            elif len(examples) < 8:
                examples.append("kernel %s: torch %r, AON %r" % (name[:60], op, a[2] if a else None))
            if cls:
                fwd += 1
                if a is not None and a[3] == cls:
                    same_mod += 1
        print("[torch-ops] ProfilerStep#%d: torch %d kernels, AON step %d: %d kernels"
              % (tstep, len(tk), tstep - 1, len(ak)))
    for e in examples:
        print("[torch-ops]   differs: " + e)
    # Kernel names: the same kernels must carry the same names (issue #17 item 6).
    names_t = {x[1] for v in theirs.values() for x in v}
    names_a = {x[1] for s in theirs for x in ours.get(s - 1, [])}
    only_t, only_a = sorted(names_t - names_a), sorted(names_a - names_t)
    for n in only_t[:5]:
        print("[torch-ops]   name only in torch.profiler (%d chars): %.120s" % (len(n), n))
    for n in only_a[:5]:
        print("[torch-ops]   name only in AON (%d chars): %.120s" % (len(n), n))
    say(not only_t and not only_a,
        "kernel names: %d distinct in torch.profiler's steps, %d in AON's, %d differ"
        % (len(names_t), len(names_a), len(only_t) + len(only_a)))
    say(total > 0 and same_op >= 0.99 * total,
        "operator agrees for %d of %d kernels (%.2f %%)" % (same_op, total,
                                                           100.0 * same_op / max(total, 1)))
    say(fwd > 0 and same_mod >= 0.99 * fwd,
        "module class agrees for %d of %d forward kernels in a module (%.2f %%)"
        % (same_mod, fwd, 100.0 * same_mod / max(fwd, 1)))
    print("[torch-ops] PASS" if ok else "[torch-ops] FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
