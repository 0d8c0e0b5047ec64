#!/usr/bin/env python3
"""JAX training loops for AON's GPU checks of JAX and XLA (issue #32; docs/jax.md).

    python3 tests/gpu/jax_models.py [--model mlp|conv] [--steps 30] [--dim 512]
                                    [--profile DIR] [--no-annotation]

A jitted training step (value_and_grad, SGD), compiled by one call first, then
run --steps times, each inside
jax.profiler.StepTraceAnnotation("train", step_num=i) unless --no-annotation
(then AON finds the steps from XLA's executions). No AON code in it. With
--profile DIR the whole run is under jax.profiler.trace(DIR), the truth the
check compares AON with (tests/gpu/check_jax.py). Models:
  mlp   two dense layers with tanh (matmuls and fusions; XLA puts the step in a
        command buffer)
  conv  a small convolutional net (cuDNN convolutions: library calls)
Prints "JAX_STEPS <n>" and the final loss.
"""
import argparse
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "conv"], default="mlp")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--profile", default="")
    p.add_argument("--no-annotation", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import contextlib

    import jax
    import jax.numpy as jnp
    import jax.profiler

    if not any(d.platform == "gpu" for d in jax.devices()):
        print("FAIL no GPU for JAX: %s" % (jax.devices(),), flush=True)
        return 1
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    if args.model == "mlp":
        params = [jax.random.normal(k1, (args.dim, 4 * args.dim)) * 0.02,
                  jax.random.normal(k2, (4 * args.dim, args.dim)) * 0.02]
        x = jax.random.normal(k3, (256, args.dim))
        y = x * 0.5

        def loss_fn(ps, x, y):
            h = jnp.tanh(x @ ps[0])
            return jnp.mean((h @ ps[1] - y) ** 2)
    else:
        params = [jax.random.normal(k1, (3, 3, 16, 32)) * 0.05,
                  jax.random.normal(k2, (32, 10)) * 0.05]
        x = jax.random.normal(k3, (32, 32, 32, 16))
        y = jax.random.normal(k3, (32, 10))

        def loss_fn(ps, x, y):
            h = jax.lax.conv_general_dilated(x, ps[0], (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            h = jnp.mean(jax.nn.relu(h), axis=(1, 2))
            return jnp.mean((h @ ps[1] - y) ** 2)

    @jax.jit
    def step(ps, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        return [w - 0.01 * g for w, g in zip(ps, grads)], loss

    def run():
        nonlocal params
        # One call before the steps: compiling, with XLA's autotuning, whose
        # kernel repetitions depend on timing and so differ from run to run.
        params, loss = step(params, x, y)
        loss.block_until_ready()
        for i in range(args.steps):
            marker = (contextlib.nullcontext() if args.no_annotation else
                      jax.profiler.StepTraceAnnotation("train", step_num=i))
            with marker:
                params, loss = step(params, x, y)
                loss.block_until_ready()
        return loss

    if args.profile:
        with jax.profiler.trace(args.profile):
            loss = run()
    else:
        loss = run()
    print("JAX_STEPS %d loss %.6f jax %s" % (args.steps, float(loss), jax.__version__), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
