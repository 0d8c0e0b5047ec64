"""A Python program with a known hot function, for the CI test of host stack
sampling (tests/python/test_host_samples.py; docs/host-sampling.md). Run under
`aon-run --source synthetic`: it drives the SYNTHETIC GPU (synthetic_gpu.py).

  hot:    every step, planted_busy() computes for --busy-ms of CPU time, then a
          kernel is launched and the step marked; the CLOCK_MONOTONIC span of
          every planted_busy call is written to --out (JSON).
  stress: the hazards a sample handler meets: threads made and ended every
          few steps, generators and coroutines, deep recursion across the
          interpreter's data-stack chunks, exceptions, fork() of children that
          compute and exit, and fork+exec; exits non-zero if any child failed.
  blocked: threads that block every real-time signal (one from its start, one
          after a while) compute for seconds, under a low RLIMIT_SIGPENDING:
          signals queued to them would soon exceed it (the kernel then sends
          SIGIO, which ends the process).
  exec:   a forked child lives on while the process replaces itself (exec) with
          a program that computes: that program must not receive AON's signals.
  nul:    as hot, the hot function named "busy\0hidden" (a NUL byte in its name).
"""
import argparse
import asyncio
import json
import os
import resource
import signal
import sys
import threading
import time
import types

from synthetic_gpu import start_synthetic_gpu

import aon


def planted_busy(cpu_ns):
    end = time.thread_time_ns() + cpu_ns
    x = 0
    while time.thread_time_ns() < end:
        for i in range(200):
            x = (x * 31 + i) % 1000003
    return x


def spin(cpu_ns):
    end = time.thread_time_ns() + cpu_ns
    while time.thread_time_ns() < end:
        pass


def deep(n, cpu_ns):
    if n == 0:
        spin(cpu_ns)
        return 0
    return deep(n - 1, cpu_ns) + 1


def numbers(n):
    for i in range(n):
        spin(20000)
        yield i


async def coroutine(cpu_ns):
    await asyncio.sleep(0)
    spin(cpu_ns)


def raising(cpu_ns):
    try:
        spin(cpu_ns)
        raise ValueError("planted")
    except ValueError:
        return 1


def stress_step(step, busy_ns, failures):
    deep(400, busy_ns // 4)  # several data-stack chunks deep
    sum(numbers(10))
    asyncio.run(coroutine(busy_ns // 4))
    raising(busy_ns // 4)
    if step % 10 == 5:
        pid = os.fork()
        if pid == 0:
            try:
                spin(busy_ns)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            failures.append("child %d: status %d" % (pid, status))
    if step % 25 == 7:
        pid = os.fork()
        if pid == 0:
            os.execv("/bin/true", ["true"])
        _, status = os.waitpid(pid, 0)
        if status != 0:
            failures.append("exec child: status %d" % status)


def blocking_spin(cpu_ns, after_ns):
    """Computes, blocking every real-time signal after `after_ns` of CPU."""
    spin(after_ns)
    signal.pthread_sigmask(signal.SIG_BLOCK, range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
    spin(cpu_ns)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=("hot", "stress", "blocked", "exec", "nul"), default="hot")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--busy-ms", type=float, default=3.0)
    p.add_argument("--out")
    a = p.parse_args()
    gpu = start_synthetic_gpu()
    busy_ns = int(a.busy_ms * 1e6)
    spans, failures, helpers = [], [], []
    if a.case == "blocked":
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (600, 600))
        helpers = [threading.Thread(target=blocking_spin, args=(2 * 10**9, 0)),
                   threading.Thread(target=blocking_spin, args=(2 * 10**9, 3 * 10**8))]
        for t in helpers:
            t.start()
    if a.case == "exec":
        if os.fork() == 0:
            time.sleep(3)  # holds whatever it inherited while the parent execs
            os._exit(0)
        for _ in range(20):
            planted_busy(busy_ns)
            gpu.launch_kernel(0, b"after_busy", 200000, 1, 1)
            aon.step()
        os.execv(sys.executable, [sys.executable, "-c",
                                  "import time\nend = time.thread_time() + 1.5\n"
                                  "while time.thread_time() < end: pass\n"])
    busy = planted_busy
    if a.case == "nul":
        # The same function under a name with a NUL byte in it (Python allows
        # any code name): the sampler reads it from the interpreter as it is.
        code = planted_busy.__code__.replace(co_name="busy\x00hidden")
        if hasattr(code, "co_qualname"):
            code = code.replace(co_qualname="busy\x00hidden")
        busy = types.FunctionType(code, globals(), "busy\x00hidden")
    for step in range(a.steps):
        if a.case in ("hot", "blocked", "nul"):
            start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            busy(busy_ns)
            spans.append((start, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        else:
            if step % 5 == 0:
                for t in helpers:
                    t.join()
                helpers = [threading.Thread(target=spin, args=(6 * busy_ns,)) for _ in range(3)]
                for t in helpers:
                    t.start()
            stress_step(step, busy_ns, failures)
        gpu.launch_kernel(0, b"after_busy", 200000, 1, 1)
        aon.step()
    for t in helpers:
        t.join()
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"planted": spans, "main_tid": threading.get_native_id()}, f)
    if failures:
        sys.exit("FAIL " + "; ".join(failures))


main()
