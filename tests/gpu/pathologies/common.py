"""Shared helpers of the pathology programs (tests/gpu/pathologies/README.md).

Nothing here imports torch or jax at import time (the JAX programs must not pull
in torch, and compile_startup.py sets Inductor's cache variables before torch is
imported); the torch helpers take the torch module as an argument.

  parser()        --steps and --seed, the options every program takes
  StepClock       the wall time (time.perf_counter) of every step
  EventPairs      torch.cuda.Event pairs around GPU work, read after the run
  PyWork          pure-Python CPU work that lasts a given time (not a sleep)
  lcg_ints()      deterministic synthetic data from the seed, in plain Python
  MatmulModel     a few ms of bf16 matmuls plus a tiny trainable parameter whose
                  torch.optim.SGD step marks the step for AON's PyTorch hook
  AonStep         aon_step() of AON's agent when it is loaded (JAX programs)
  print_truth()   the closing `TRUTH <json>` line
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

# Warm-up steps of the PyTorch programs: run and marked like the others, left
# out of the per-step medians.
WARMUP = 3

# When this module was imported: the programs import it first, before torch or
# jax, so the wall time from here to the TRUTH line (process_s) holds every part
# of the run a profiler can see, start-up compilation before the first step too.
_IMPORTED = time.perf_counter()


def parser(doc, steps):
    """An ArgumentParser with --steps (default `steps`) and --seed."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument("--steps", type=int, default=steps,
                   help="measured steps, after the warm-up ones (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of every synthetic input")
    return p


def median(values):
    values = list(values)
    return statistics.median(values) if values else None


class StepClock:
    """Wall time of each step: begin() and end() around it, warm-up steps first."""

    def __init__(self, warmup=WARMUP):
        self.warmup = warmup
        self.starts = []
        self.ends = []

    def begin(self):
        t = time.perf_counter()
        self.starts.append(t)
        return t

    def end(self):
        t = time.perf_counter()
        self.ends.append(t)
        return t

    def walls_ms(self):
        """Every step's wall (ms), warm-up steps included."""
        return [(e - s) * 1e3 for s, e in zip(self.starts, self.ends)]

    def measured(self, values):
        """The part of a per-step list that belongs to the measured steps."""
        return list(values)[self.warmup:]

    def figures(self):
        """steps (all steps run, warm-up included), warmup, measured_steps, run_s
        (first step's start to last step's end), step_ms (median measured step)."""
        walls = self.walls_ms()
        return {
            "steps": len(self.ends),
            "warmup": self.warmup,
            "measured_steps": max(0, len(self.ends) - self.warmup),
            "run_s": (self.ends[-1] - self.starts[0]) if self.ends else 0.0,
            "step_ms": median(self.measured(walls)) or 0.0,
        }


class EventPairs:
    """torch.cuda.Event pairs around GPU work. start() and stop() record on the
    current stream and return the event; ms() synchronizes once, after the run,
    and gives each pair's elapsed GPU time (an event's time can only be read once
    it has completed, so nothing is read inside the steps)."""

    def __init__(self, torch):
        self._torch = torch
        self._pairs = []
        self._open = None

    def _event(self):
        e = self._torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def start(self):
        self._open = self._event()
        return self._open

    def stop(self):
        end = self._event()
        self._pairs.append((self._open, end))
        self._open = None
        return end

    def ms(self):
        self._torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in self._pairs]


def lcg_ints(seed, n, bound):
    """n integers in [0, bound) from a linear congruential generator: synthetic
    data built in plain Python, the same for the same seed."""
    x = (seed * 2654435761 + 0x9E3779B9) & 0x7FFFFFFF
    out = []
    for _ in range(n):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        out.append((x >> 8) % bound)
    return out


class PyWork:
    """Pure-Python CPU work (an integer loop: no sleep, no C extension, no GIL
    release) that lasts a given time: run(ms) iterates, in chunks of about 2 us
    (sized once at start-up), until `ms` have passed on time.perf_counter. The
    planted figure is the time; the loop is real CPU work throughout. It only mixes
    a checksum: the data a program builds from the seed does not depend on it."""

    CHUNK_US = 2.0

    def __init__(self, repeats=5, iterations=50_000):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            self._spin(iterations, 1, 0)
            times.append(time.perf_counter() - t)
        self.ns_per_iteration = statistics.median(times) * 1e9 / iterations
        self.chunk = max(1, round(self.CHUNK_US * 1e3 / self.ns_per_iteration))
        self.checksum = 0

    @staticmethod
    def _spin(iterations, x, acc):
        for _ in range(iterations):
            x = (1103515245 * x + 12345) & 0x7FFFFFFF
            acc = (acc + (x >> 16)) & 0xFFFFFFF
        return x, acc

    def run(self, ms, seed=1):
        end = time.perf_counter() + ms * 1e-3
        x, acc = seed | 1, 0
        while time.perf_counter() < end:
            x, acc = self._spin(self.chunk, x, acc)
        self.checksum ^= acc


class MatmulModel:
    """The GPU work of a torch program's step: `reps` rounds of h = tanh(h @ M)
    (bf16, M a fixed dim x dim matrix), then a loss through a small trainable
    parameter w (64 values) and a torch.optim.SGD step on w: AON's PyTorch hook
    marks the step at optimizer.step(). calibrate() picks `reps` for a GPU time."""

    def __init__(self, torch, dev, dim):
        self.torch = torch
        self.m = torch.randn(dim, dim, device=dev).mul_(dim ** -0.5).to(torch.bfloat16)
        self.w = torch.nn.Parameter(torch.full((64,), 0.5, device=dev))
        self.opt = torch.optim.SGD([self.w], lr=1e-3)
        self.reps = 1

    def forward(self, h):
        for _ in range(self.reps):
            h = self.torch.tanh(h @ self.m)
        return h

    def train_step(self, h):
        """Forward, loss, backward, optimizer step. Returns the loss, unread."""
        out = self.forward(h)
        loss = (out[:, :64].float() * self.w).square().mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss

    def calibrate(self, h, target_ms):
        """Sets reps so that forward(h) takes about target_ms on the GPU (timed
        with events, before any step). Returns the GPU ms of one round."""
        torch = self.torch
        self.reps = 1
        for _ in range(3):
            self.forward(h)
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(10):
            self.forward(h)
        b.record()
        b.synchronize()
        one = a.elapsed_time(b) / 10
        self.reps = max(1, round(target_ms / one))
        return one


def cuda_device(torch):
    """cuda:0, or exit non-zero: these programs mean nothing on the CPU."""
    if not torch.cuda.is_available():
        sys.exit("FAIL: torch sees no CUDA device")
    torch.cuda.set_device(0)
    return torch.device("cuda", 0)


class AonStep:
    """AON's aon_step() when AON's agent is in this process, else a no-op.

    The agent is loaded by the CUDA driver (CUDA_INJECTION64_PATH) when CUDA
    starts, so look it up after the framework has started CUDA. First
    ctypes.CDLL(None).aon_step (the agent's symbols in the global scope), then
    the injection library itself, opened with RTLD_NOLOAD (only if it is already
    loaded, as python/aon/_agent.py does). Until found, step() looks again."""

    def __init__(self):
        self.fn = None
        self.marked = 0
        self._find()

    def _find(self):
        fn = None
        try:
            fn = ctypes.CDLL(None).aon_step
        except (OSError, AttributeError):
            path = os.environ.get("CUDA_INJECTION64_PATH", "")
            if path:
                try:
                    lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 4) | os.RTLD_NOW)
                    fn = lib.aon_step
                except (OSError, AttributeError):
                    fn = None
        if fn is not None:
            fn.restype = None
            fn.argtypes = []
        self.fn = fn

    @property
    def found(self):
        return self.fn is not None

    def step(self):
        if self.fn is None:
            self._find()
        if self.fn is not None:
            self.fn()
            self.marked += 1


def _tidy(value):
    if isinstance(value, float):
        return float("%.6g" % value)
    if isinstance(value, dict):
        return {k: _tidy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tidy(v) for v in value]
    return value


def pipeline_figures(clock, host_ms, busy_ms):
    """An input pipeline's truth: medians over the measured steps of the host's
    work, the GPU's busy time and the step's wall time the GPU did not work."""
    walls = clock.walls_ms()
    return {
        "host_work_ms": median(clock.measured(host_ms)),
        "gpu_busy_ms": median(clock.measured(busy_ms)),
        "idle_per_step_ms": median(clock.measured(w - b for w, b in zip(walls, busy_ms))),
    }


def print_truth(figures):
    """The program's last line: TRUTH <json of what it measured about itself>,
    with process_s, the wall time since this module was imported."""
    figures = dict(figures, process_s=time.perf_counter() - _IMPORTED)
    sys.stderr.flush()
    sys.stdout.flush()
    print("TRUTH " + json.dumps(_tidy(figures)), flush=True)
