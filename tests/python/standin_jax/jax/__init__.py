"""A STAND-IN for JAX, for CI only (Debian has no JAX; the real JAX is checked
on the GPU machine, tests/gpu/). It has just what AON's JAX hook touches:
jax.profiler.StepTraceAnnotation, a subclass of TraceAnnotation whose
__enter__/__exit__ it inherits, as in JAX."""
from jax import profiler  # noqa: F401

__version__ = "0.0.0+aon-standin"
