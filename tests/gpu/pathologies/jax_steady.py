#!/usr/bin/env python3
"""jax_steady: a jitted MLP training step with fixed shapes; nothing is wrong.

Planted: nothing. A jax.jit training step (a --layers-layer tanh MLP, squared
error, plain SGD) on a fixed batch of --batch x --dim, --steps times. The first
call compiles; every later call reuses the executable. The host dispatches step
i and then waits for step i - 1's loss, so the GPU always has the next step
queued (never idle, never more than one step behind). Steps are marked with
jax.profiler.StepTraceAnnotation("train", step_num=i) and, when AON's agent is
loaded, by calling its aon_step() (common.AonStep).

A correct profiler finds no problem in the steady steps (its first finding, if
any, claims only a small share of a step, or is the start-up compilation: a
one-off that a persistent compilation cache removes); the first step's compile is a one-off
(on an H200 about 4.6 s with XLA's autotuning, against about 1.15 ms a step at
the default sizes: hence the default of 2000 steps, so that the steady steps are
not a small part of the run).

Truth (TRUTH line): step_ms = median step wall (perf_counter, from the dispatch
to the wait's return); first_step_s = the first step's wall, compile included
(it waits for its own loss).
"""
import os

import common


def main():
    p = common.parser(__doc__, steps=2000)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=3, help="weight matrices (>= 2)")
    args = p.parse_args()

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    import jax.profiler
    import numpy as np

    if jax.default_backend() not in ("gpu", "cuda"):
        raise SystemExit("FAIL: JAX runs on %s, not a GPU" % jax.default_backend())
    sizes = [args.dim] + [args.hidden] * (args.layers - 1) + [args.dim]
    key = jax.random.key(args.seed) if hasattr(jax.random, "key") else jax.random.PRNGKey(args.seed)
    keys = jax.random.split(key, len(sizes) - 1)
    params = [(jax.random.normal(k, (m, n)) * m ** -0.5, jnp.zeros((n,)))
              for k, m, n in zip(keys, sizes[:-1], sizes[1:])]

    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jnp.tanh(h)
        return jnp.mean((h - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), loss

    rng = np.random.default_rng(args.seed)
    x = jax.device_put(rng.standard_normal((args.batch, args.dim), dtype=np.float32))
    y = jax.device_put(rng.standard_normal((args.batch, args.dim), dtype=np.float32))
    jax.block_until_ready((params, x, y))
    marker = common.AonStep()

    clock = common.StepClock(warmup=0)
    last = args.steps - 1
    previous = None
    for i in range(args.steps):
        clock.begin()
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            params, loss = train_step(params, x, y)
            if previous is None or i == last:
                loss.block_until_ready()  # the first step (compile) and the last one
            else:
                previous.block_until_ready()  # step i is queued behind it
        previous = loss
        marker.step()
        clock.end()

    walls = clock.walls_ms()
    truth = clock.figures()
    truth.update({
        "first_step_s": walls[0] / 1e3,
        "step_ms_after_first": common.median(walls[1:]),
        "aon_step": marker.found,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
