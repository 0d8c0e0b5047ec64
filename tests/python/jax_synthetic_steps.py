#!/usr/bin/env python3
"""A JAX-style loop for CI tests of AON's JAX hook: steps marked only with
jax.profiler.StepTraceAnnotation (the script never mentions AON), each launching
--kernels SYNTHETIC kernels (synthetic_gpu.py). Run under
`aon-run --source synthetic` with tests/python/standin_jax on PYTHONPATH
(CI has no JAX) or with a real JAX.

Prints HOOK jax|none, then DONE steps=<n> entered=<n> exited=<n>.
"""
import argparse
import sys

from synthetic_gpu import start_synthetic_gpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--kernels", type=int, default=2)
    args = p.parse_args()
    gpu = start_synthetic_gpu()

    import jax  # AON's JAX hook installs itself here
    import jax.profiler

    hook = sys.modules.get("aon._jax_hook")
    print("HOOK", "jax" if hook is not None and hook.current() is not None else "none", flush=True)
    for i in range(args.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            for k in range(args.kernels):
                gpu.launch_kernel(0, ("jax_step_kernel_%d" % k).encode(), 2000, 1, 32)
            gpu.synchronize(0)
    print("DONE steps=%d entered=%d exited=%d" % (
        args.steps, getattr(jax.profiler, "entered", -1), getattr(jax.profiler, "exited", -1)),
        flush=True)


if __name__ == "__main__":
    main()
