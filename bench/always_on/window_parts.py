#!/usr/bin/env python3
"""What each part of a capture window costs, measured inside one process.

    aon-run --capture-period 16 python3 bench/always_on/window_parts.py --steps 1200

The launch-bound loop of train_loop.py (4-layer transformer encoder, AdamW,
batch 8 x 64: a few hundred short kernels per step). Steps are marked by the
optimizer (AON's PyTorch hook). Each capture window runs one configuration,
in rotation, so every configuration is measured on the same process's steps,
interleaved:
  cupti     CUPTI only: the operator observer and the module hooks switched off
            for the window
  kernels   CUPTI with its API records off too (runtime and driver calls, and the
            external correlations written with them): kernels, copies, memsets
            and synchronizations only
  runtime   CUPTI with the driver-call records off (runtime calls kept)
  dispatch  PyTorch's RecordFunction calling AON's observer, which calls two
            no-op functions instead of AON's range functions (what dispatching
            the callbacks costs)
  ops       the operator observer (AON op ranges with their external
            correlation), no module hooks
  modules   the module hooks, no operator observer
  both      operators and modules (the default)
Prints per configuration the median captured step against the median ordinary
step (neither captured nor in a window's two-step tail), the mean ratio, the
medians of the windows' first steps and of their later steps apart, and the
number of windows; then one line PARTS <json>.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch

CONFIGS = ["cupti", "kernels", "runtime", "dispatch", "ops", "modules", "both"]
# CUPTI's numbers (cupti_activity.h): what the kernels/runtime configurations
# switch off for their window (the agent enables them again at the next).
KIND_RUNTIME, KIND_EXTERNAL_CORRELATION = 5, 39
DRIVER_CBIDS = range(1, 1024)


def cupti_lib():
    """libcupti as the agent loaded it (never loads another copy)."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "libcupti.so" in path:
                lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 4))
                lib.cuptiActivityDisable.argtypes = [ctypes.c_int]
                lib.cuptiActivityEnableDriverApi.argtypes = [ctypes.c_uint32, ctypes.c_uint8]
                return lib
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--warmup", type=int, default=40)
    args = p.parse_args()
    import aon
    from aon import _hook
    from aon._agent import Agent
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 64, 256, device=dev)
    target = torch.randn(8, 64, 256, device=dev)
    hook = _hook.current()
    agent = Agent.get()
    if hook is None or agent is None or hook.extension is None:
        print("FAIL no AON agent, hook or operator observer in this process", flush=True)
        return 1
    ext = hook.extension
    real = (ctypes.cast(agent.lib.aon_op_begin, ctypes.c_void_p).value,
            ctypes.cast(agent.lib.aon_op_end, ctypes.c_void_p).value)
    # A no-op pair with the right calling convention for the dispatch-only
    # configuration: aon_ops_active ignores its arguments and returns 1 in a
    # window (an id the no-op end ignores).
    noop = ctypes.cast(agent.lib.aon_ops_active, ctypes.c_void_p).value
    cupti = None
    rows = []  # (step time ms, window number or -1, config, tail, position in the window)
    window = -1
    was_open = False
    tail = 0
    config = None
    pos = 0
    for i in range(args.steps):
        is_open = aon.window_open()
        pos = pos + 1 if is_open and was_open else 0
        if is_open and not was_open:
            window += 1
            config = CONFIGS[window % len(CONFIGS)]
            if config in ("cupti", "kernels", "runtime", "modules"):
                ext.aon_torch_observe(0)
            elif config == "dispatch":
                ext.aon_torch_bind(noop, noop)
            if config in ("cupti", "kernels", "runtime", "dispatch", "ops"):
                hook.modules.off()
            if config in ("kernels", "runtime"):
                cupti = cupti or cupti_lib()
                if cupti is None:
                    print("FAIL no libcupti in this process during a window", flush=True)
                    return 1
                for cbid in DRIVER_CBIDS:
                    cupti.cuptiActivityEnableDriverApi(cbid, 0)
                if config == "kernels":
                    cupti.cuptiActivityDisable(KIND_RUNTIME)
                    cupti.cuptiActivityDisable(KIND_EXTERNAL_CORRELATION)
        if was_open and not is_open:
            ext.aon_torch_bind(*real)  # the next window's observer calls AON again
            tail = 2
        t0 = time.perf_counter_ns()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        loss.item()
        ms = (time.perf_counter_ns() - t0) / 1e6
        if i >= args.warmup:
            rows.append((ms, window if is_open else -1, config if is_open else None,
                         tail > 0 and not is_open, pos if is_open else -1))
        if tail > 0 and not is_open:
            tail -= 1
        was_open = is_open
    base = [ms for ms, w, _, t, _ in rows if w < 0 and not t]
    if not base:
        print("FAIL no ordinary steps", flush=True)
        return 1
    b = statistics.median(base)
    out = {"base_ms": b, "base_steps": len(base)}
    print("%-9s %8s %8s %8s %8s %8s %8s" % ("config", "windows", "steps", "median/x", "mean/x",
                                          "first/x", "later/x"))
    for c in CONFIGS:
        steps = [ms for ms, w, cc, _, _ in rows if cc == c]
        wins = len({w for _, w, cc, _, _ in rows if cc == c})
        if not steps:
            continue
        med, mean = statistics.median(steps) / b, statistics.mean(steps) / b
        # A window's first step pays for attaching CUPTI and instrumenting each
        # kernel at its first launch; the later ones only what tracing costs.
        first = [ms for ms, _, cc, _, k in rows if cc == c and k == 0]
        later = [ms for ms, _, cc, _, k in rows if cc == c and k > 0]
        f = statistics.median(first) / b if first else float("nan")
        lt = statistics.median(later) / b if later else float("nan")
        out[c] = {"windows": wins, "steps": len(steps), "median": med, "mean": mean,
                  "first": f, "later": lt}
        print("%-9s %8d %8d %8.3f %8.3f %8.3f %8.3f" % (c, wins, len(steps), med, mean, f, lt))
    print("base: median %.3f ms over %d ordinary steps" % (b, len(base)))
    print("PARTS " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
