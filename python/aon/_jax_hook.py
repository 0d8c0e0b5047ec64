"""AON's JAX hook (docs/jax.md): installed by sitecustomize.py once the script
imports jax, in a process AON profiles; the script is not changed.

Steps: every `jax.profiler.StepTraceAnnotation` the program enters marks a step
boundary (aon_jax_step: source "jax"), so capture windows open on the same steps
of every process, as PyTorch's optimizer steps do for PyTorch. The annotation
itself still does what it did (a TraceMe for jax.profiler). What runs inside a
step (XLA's executions and thunks) AON reads from the NVTX ranges XLA emits.

Never raises into the program: a failure is printed once and the annotation
works as before.
"""
import sys

from aon._agent import Agent


def _say(text):
    sys.stderr.write("AON: " + text + "\n")


class JaxHook:
    def __init__(self, profiler_module):
        self.profiler = profiler_module
        self.failed = False

    def step(self):
        """One StepTraceAnnotation entered (any thread)."""
        if self.failed:
            return
        try:
            agent = Agent.get()  # None until JAX has started CUDA
            if agent is not None:
                agent.jax_step()
        except Exception as e:  # noqa: BLE001
            self.failed = True
            _say("JAX step hook off: %r" % (e,))

    def install(self):
        cls = getattr(self.profiler, "StepTraceAnnotation", None)
        if cls is None:
            _say("jax.profiler has no StepTraceAnnotation: JAX steps are not marked")
            return False
        enter = cls.__dict__.get("__enter__") or getattr(cls, "__enter__", None)
        if enter is None or getattr(enter, "_aon_wrapped", False):
            return enter is not None
        hook = self

        def __enter__(annotation):
            hook.step()
            return enter(annotation)

        __enter__._aon_wrapped = True
        __enter__.__wrapped__ = enter
        cls.__enter__ = __enter__
        return True


_hook = None


def install(jax_module):
    """Called once jax is imported. Never raises."""
    global _hook
    if _hook is not None:
        return _hook
    try:
        import importlib
        profiler = getattr(jax_module, "profiler", None) or importlib.import_module("jax.profiler")
        hook = JaxHook(profiler)
        if hook.install():
            _hook = hook
    except Exception as e:  # noqa: BLE001 - the job runs on without the hook
        _say("JAX hook not installed: %r" % (e,))
    return _hook


def current():
    return _hook
