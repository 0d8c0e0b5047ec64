"""AON's Python start-up hook (docs/pytorch.md).

aon-run and srun --aon put this directory first on PYTHONPATH, so Python runs
this file at start-up. It
  1. runs the sitecustomize that would have run without AON (the next one on
     sys.path: a site's or the user's), so nothing of theirs is lost;
  2. when the process is profiled by AON (the agent's variables are set and
     AON_PYTHON_HOOK is not "off"), waits for the script to import torch or
     jax and then installs AON's hook for it (aon/_hook.py: PyTorch,
     aon/_jax_hook.py: JAX). A process that imports neither is not touched:
     no import, no thread, no hook.
It never raises: a failure is printed and the program runs on.
"""
import os
import sys


def _run_next_sitecustomize():
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.origin is None or os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _install_torch(module):
    from aon import _hook
    _hook.install(module)


def _install_jax(module):
    from aon import _jax_hook
    _jax_hook.install(module)


_HOOKS = {"torch": ("PyTorch", _install_torch), "jax": ("JAX", _install_jax)}


class _WhenImported:
    """A meta-path finder that only watches for the frameworks AON hooks
    (`torch`, `jax`): once a framework's own module has run, it installs that
    framework's hook; it leaves sys.meta_path when every one is installed."""

    def __init__(self, pending):
        self.pending = set(pending)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.pending:
            return None
        import importlib.util
        self.pending.discard(fullname)
        if not self.pending:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the real one (this finder passes now)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module
        what, install = _HOOKS[fullname]

        def exec_module(module):
            run(module)
            try:
                install(module)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("AON: %s hook not installed: %r\n" % (what, e))

        loader.exec_module = exec_module
        return spec


def _install():
    if os.environ.get("AON_PYTHON_HOOK", "on") == "off":
        return
    if not os.environ.get("CUDA_INJECTION64_PATH"):
        return  # not a process AON profiles
    pending = []
    for name, (_, install) in _HOOKS.items():
        if name in sys.modules:
            install(sys.modules[name])
        else:
            pending.append(name)
    if pending:
        sys.meta_path.insert(0, _WhenImported(pending))


try:
    _run_next_sitecustomize()
except Exception as e:  # noqa: BLE001 - theirs failed; ours still runs
    sys.stderr.write("AON: the sitecustomize found after AON's failed: %r\n" % (e,))
try:
    _install()
except Exception as e:  # noqa: BLE001
    sys.stderr.write("AON: Python hook not installed: %r\n" % (e,))
