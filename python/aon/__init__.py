"""AON from inside a Python program (docs/pytorch.md).

Under `aon-run` or `srun --aon` this package is on PYTHONPATH and the PyTorch
hook loads by itself: a training script needs no change. These functions are
for what the hook cannot guess, and they do nothing when AON is not profiling
the process, so a script may call them unconditionally:

    aon.step()                   a step begins (loops without an optimizer)
    with aon.range("eval"): ...  a named range (also a decorator), recorded
                                 inside capture windows
    aon.capture(steps=5)         capture the next 5 steps on every rank
    aon.active()                 True when AON profiles this process
    aon.load(job_dir)            the job's records as tables (aon.reader)
"""
import functools

from aon._agent import Agent

__all__ = ["step", "range", "capture", "active", "window_open", "load"]


def _sync():
    from aon import _hook
    hook = _hook.current()
    if hook is not None:
        hook.sync()


def step():
    """Marks a step boundary (source "api", preferred over every other source)."""
    agent = Agent.get()
    if agent is not None:
        agent.step()
        _sync()


def capture(steps=1, delay_ms=0):
    """Asks for a capture window of `steps` steps from the first step boundary at
    least `delay_ms` from now. Returns True when the agent took the request."""
    if steps < 1:
        raise ValueError("aon.capture: steps must be >= 1, got %r" % (steps,))
    agent = Agent.get()
    return agent is not None and agent.capture(int(steps), int(delay_ms)) == 0


def active():
    """True when AON's agent is loaded in this process (it is, under aon-run or
    srun --aon, once the process has started CUDA)."""
    return Agent.get() is not None


def window_open():
    """True while a capture window is open on this rank (ops are recorded)."""
    agent = Agent.get()
    return agent is not None and agent.ops_active()


class range:  # noqa: A001 - the name users expect, as torch.profiler.record_function
    """A named range: `with aon.range("name"):` or `@aon.range("name")`. Inside a
    capture window it is recorded as a user range (kind user in the ops table);
    kernels launched directly inside it, outside any operator, are tied to it."""

    def __init__(self, name):
        self.name = str(name)
        self._ids = []

    def __enter__(self):
        agent = Agent.get()
        op_id = agent.begin(self.name, Agent.USER) if agent is not None else 0
        self._ids.append((agent, op_id))
        return self

    def __exit__(self, *exc):
        agent, op_id = self._ids.pop()
        if op_id:
            agent.end(op_id)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with range(self.name):
                return fn(*args, **kwargs)
        return wrapped


def load(job_dir, kinds=None):
    """The records of a merged job (its timeline.h5) as tables; see aon.reader.load."""
    from aon import reader
    return reader.load(job_dir, kinds)
