#!/usr/bin/env python3
"""jax_recompile: a jitted step whose input shape changes every step recompiles.

Planted: a jax.jit training step of a small MLP (tanh hidden layer, squared
error, plain SGD) called with a batch of --base-batch + i rows at step i: every
call has a new shape, so JAX retraces and XLA compiles a new executable every
step, on the host, while the GPU waits. Each step is marked with
jax.profiler.StepTraceAnnotation("train", step_num=i) and, when AON's agent is
loaded, by calling its aon_step() (common.AonStep). No warm-up: every step
compiles.

A correct profiler says first: compilation (each step's time is mostly XLA
compiling on the host: recompilations), and that static shapes would save about
recompile_s: every step's compile but the first step's, which compiles the
step function for the first time and stays.

Truth (TRUTH line): a step is host data -> device_put -> the jitted call ->
block_until_ready; after the last step every step's shape is run again, the same
way (its executable is cached by then: one untimed call, then --reruns timed
ones, median), which gives that shape's steady execution time;
compile_ms_per_step = median over steps of (step wall - steady execution of its
shape); compile_s = their sum over the run; recompile_s = that sum over the
steps after the first. xla_compile_ms_per_step = median of the backend-compile durations JAX
itself reports per step (jax.monitoring), when it reports them; recompiled_steps
= steps in which it reported one.
"""
import os
import time

import common


def main():
    p = common.parser(__doc__, steps=12)
    p.add_argument("--base-batch", type=int, default=32, help="rows at step 0 (then +1 per step)")
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--reruns", type=int, default=3)
    args = p.parse_args()

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.monitoring
    import jax.numpy as jnp
    import jax.profiler
    import numpy as np

    if jax.default_backend() not in ("gpu", "cuda"):
        raise SystemExit("FAIL: JAX runs on %s, not a GPU" % jax.default_backend())
    compiles = []  # (perf_counter when reported, seconds)

    def on_duration(event, duration, *rest, **kwargs):
        if "backend_compile" in event:
            compiles.append((time.perf_counter(), duration))

    try:
        jax.monitoring.register_event_duration_secs_listener(on_duration)
        listening = True
    except Exception:  # noqa: BLE001 - an optional figure
        listening = False

    key = jax.random.key(args.seed) if hasattr(jax.random, "key") else jax.random.PRNGKey(args.seed)
    k1, k2 = jax.random.split(key)
    params = {
        "w1": jax.random.normal(k1, (args.dim, args.hidden)) * args.dim ** -0.5,
        "b1": jnp.zeros((args.hidden,)),
        "w2": jax.random.normal(k2, (args.hidden, 1)) * args.hidden ** -0.5,
    }

    def loss_fn(params, x, y):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        return jnp.mean(((h @ params["w2"])[:, 0] - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss

    rng = np.random.default_rng(args.seed)
    data = []
    for i in range(args.steps):
        rows = args.base_batch + i
        data.append((rng.standard_normal((rows, args.dim), dtype=np.float32),
                     rng.standard_normal((rows,), dtype=np.float32)))
    jax.block_until_ready(params)  # the backend and CUDA are up: AON's agent, if any, too
    marker = common.AonStep()

    def one_step(params, x, y):
        params, loss = train_step(params, jax.device_put(x), jax.device_put(y))
        loss.block_until_ready()
        return params, loss

    clock = common.StepClock(warmup=0)
    for i, (x, y) in enumerate(data):
        clock.begin()
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            params, loss = one_step(params, x, y)
        marker.step()
        clock.end()

    # After the last step: each shape again, from the executable cache.
    steady_ms = []
    for x, y in data:
        one_step(params, x, y)
        times = []
        for _ in range(args.reruns):
            t = time.perf_counter()
            one_step(params, x, y)
            times.append((time.perf_counter() - t) * 1e3)
        steady_ms.append(common.median(times))

    walls = clock.walls_ms()
    per_step_compile = []
    for s, e in zip(clock.starts, clock.ends):
        per_step_compile.append(sum(d for t, d in compiles if s <= t <= e) * 1e3)
    truth = clock.figures()
    truth.update({
        "compile_ms_per_step": common.median(w - s for w, s in zip(walls, steady_ms)),
        "compile_s": sum(w - s for w, s in zip(walls, steady_ms)) / 1e3,
        "recompile_s": sum(w - s for w, s in zip(walls[1:], steady_ms[1:])) / 1e3,
        "steady_exec_ms": common.median(steady_ms),
        "batch_first": args.base_batch,
        "batch_last": args.base_batch + args.steps - 1,
        "aon_step": marker.found,
    })
    if listening and compiles:
        truth["xla_compile_ms_per_step"] = common.median(per_step_compile)
        truth["recompiled_steps"] = sum(1 for c in per_step_compile if c > 0)
    common.print_truth(truth)


if __name__ == "__main__":
    main()
