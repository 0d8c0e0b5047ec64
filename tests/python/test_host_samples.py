#!/usr/bin/env python3
"""CI test of host stack sampling (docs/host-sampling.md) with real sampled
processes under aon-run and the labeled SYNTHETIC GPU: a Python program and a
native one, each with a planted hot function whose spans they write down, and
a stress program (threads made and ended, generators, coroutines, deep
recursion, exceptions, fork, fork+exec) sampled at 4 kHz.

usage: test_host_samples.py BIN_DIR   (with a python that has h5py and numpy)
"""
import ast
import bisect
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import hook_jobs
from hook_jobs import col

hook_jobs.configure(sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin")
PROGRAM = os.path.join(hook_jobs.HERE, "host_sample_program.py")
import aon  # noqa: E402


def planted_lines():
    """The lines of planted_busy in the program's source."""
    with open(PROGRAM) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "planted_busy":
            return range(node.lineno, node.end_lineno + 1)
    raise AssertionError("no planted_busy in " + PROGRAM)


def frames(stack):
    return stack.split("\n")


def innermost_python(stack):
    py = [f for f in frames(stack) if not f.startswith("[native] ")]
    return py[-1] if py else ""


def inside(spans, t):
    """Whether time t lies in one of the sorted (start, end) spans."""
    i = bisect.bisect_right([s for s, _ in spans], t) - 1
    return i >= 0 and t < spans[i][1]


class HostSamples(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="aon-hostsamples-")
        self.job = os.path.join(self.dir, "job")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def aon_run(self, command, aon_args=()):
        """`command` under aon-run (hook_jobs.run_program), which must succeed."""
        p = hook_jobs.run_program(self.job, command, {"PYTHONPATH": hook_jobs.HERE}, aon_args)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p

    def run_python(self, args, aon_args=()):
        out = os.path.join(self.dir, "planted.json")
        p = self.aon_run([sys.executable, PROGRAM, "--out", out, *args], aon_args)
        with open(out) as f:
            return json.load(f), p

    def main_samples(self, t, tid):
        rows = zip(col(t.host_samples, "start_ns"), col(t.host_samples, "tid"),
                   col(t.host_samples, "stack"), col(t.host_samples, "flags"))
        return [(ts, stack, flags) for ts, x, stack, flags in rows if x == tid]

    def test_python_hot_function_is_the_top_frame(self):
        planted, _ = self.run_python(["--steps", "80"], ["--mode", "full"])
        t = aon.load(self.job)
        spans = sorted(tuple(s) for s in planted["planted"])
        mine = self.main_samples(t, planted["main_tid"])
        within = [(stack, flags) for ts, stack, flags in mine if inside(spans, ts)]
        # 80 x 3 ms of CPU at 1 kHz: about 240 samples (fewer if the machine is busy).
        self.assertGreaterEqual(len(within), 50, "samples in planted_busy: %d" % len(within))
        lines = planted_lines()
        top = collections.Counter()
        for stack, flags in within:
            self.assertTrue(flags & 1, "a sample of a Python thread without its Python frames")
            f = innermost_python(stack)
            name, _, where = f.partition(" (")
            path, _, line = where.rstrip(")").rpartition(":")
            ok = (name == "planted_busy" and os.path.basename(path) == "host_sample_program.py"
                  and int(line or -1) in lines)
            top[ok] += 1
            if ok:  # the callers, outermost first
                names = [x.partition(" (")[0] for x in frames(stack)]
                self.assertLess(names.index("<module>"), names.index("main"), stack)
                self.assertLess(names.index("main"), names.index("planted_busy"), stack)
                self.assertTrue(frames(stack)[-1].startswith("[native] "), stack)
        share = top[True] / len(within)
        self.assertGreaterEqual(share, 0.9, "planted_busy on top in %d of %d" %
                                (top[True], len(within)))
        # The viewer trace: every sample an instant on its thread's row, named
        # by its innermost frame, the stack an argument.
        with open(os.path.join(self.job, "trace.json")) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "host_samples"]
        self.assertEqual(len(events), len(t.host_samples))
        self.assertEqual(collections.Counter((e["ph"], e["tid"], e["name"], e["args"]["stack"])
                                             for e in events),
                         collections.Counter(("i", int(tid), innermost_python(s) or frames(s)[-1], s)
                                             for tid, s in zip(col(t.host_samples, "tid"),
                                                               col(t.host_samples, "stack"))))

    def test_a_nul_byte_in_a_frame_name_costs_nothing_else(self):
        # Strings are stored NUL-terminated: the agent stores the byte as '?'.
        # Before, two stacks differing after such a byte read back the same and
        # the merge refused the whole rank file as corrupt.
        planted, p = self.run_python(["--case", "nul", "--steps", "60"], ["--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(self.job)
        stacks = [s for _, s, _ in self.main_samples(t, planted["main_tid"])]
        self.assertTrue(any("busy?hidden (" in s for s in stacks), stacks[:3])
        self.assertFalse(any("\x00" in s for s in col(t.host_samples, "stack")))
        self.assertGreater(len(col(t.kernels, "name")), 0)

    def test_budgeted_samples_fall_only_in_windows(self):
        planted, _ = self.run_python(["--steps", "64", "--busy-ms", "2"],
                                     ["--capture-period", "8", "--capture-steps", "3"])
        t = aon.load(self.job)
        steps = sorted(zip(col(t.steps, "start_ns"), col(t.steps, "end_ns"),
                           col(t.steps, "flags"), col(t.steps, "window")))
        captured = [i for i, s in enumerate(steps) if s[2] & 1]
        self.assertTrue(captured, steps)
        # A window is sampled from its first step's start; sampling stops when
        # its last step ends, on that boundary's thread, before the next step
        # runs any of the program's code: so a sample of the main thread lies
        # in a captured step or in the step right after one (the boundary's
        # own few microseconds).
        allowed = sorted({i for c in captured for i in (c, c + 1) if i < len(steps)})
        spans = [(steps[i][0], steps[i][1]) for i in allowed]
        mine = self.main_samples(t, planted["main_tid"])
        self.assertGreater(len(mine), 0)
        outside = [ts for ts, _, _ in mine if not inside(spans, ts)]
        self.assertEqual(outside, [], "samples outside capture windows")
        windows = {steps[i][3] for i in captured
                   if any(steps[i][0] <= ts < steps[i][1] for ts, _, _ in mine)}
        self.assertGreaterEqual(len(windows), 2, "samples in windows %s" % sorted(windows))

    def test_native_hot_function_is_the_top_frame(self):
        p = self.aon_run([os.path.join(hook_jobs.BIN, "aon-host-busy"), "--steps", "80"],
                     ["--mode", "full"])
        spans = sorted(tuple(int(x) for x in line.split()[1:])
                       for line in p.stdout.splitlines() if line.startswith("busy "))
        self.assertEqual(len(spans), 80, p.stdout)
        t = aon.load(self.job)
        by_thread = collections.defaultdict(list)
        for ts, tid, stack in zip(col(t.host_samples, "start_ns"), col(t.host_samples, "tid"),
                                  col(t.host_samples, "stack")):
            by_thread[tid].append((ts, frames(stack)[-1]))
        main = min(by_thread)  # the process's first thread
        within = [leaf for ts, leaf in by_thread[main] if inside(spans, ts)]
        self.assertGreaterEqual(len(within), 50)
        hits = sum(1 for leaf in within
                   if leaf == "[native] aon_planted_native_busy (aon-host-busy)")
        self.assertGreaterEqual(hits / len(within), 0.9, collections.Counter(within))
        # Helper threads, made and ended every 10 steps, are sampled too.
        helpers = [leaf for tid, rows in by_thread.items() if tid != main for _, leaf in rows]
        self.assertGreater(len(helpers), 0, "no helper thread sampled")
        hits = sum(1 for leaf in helpers
                   if leaf == "[native] aon_planted_helper_busy (aon-host-busy)")
        self.assertGreaterEqual(hits / len(helpers), 0.9, collections.Counter(helpers))

    def test_stress_at_4khz_the_program_is_unharmed(self):
        _, p = self.run_python(["--case", "stress", "--steps", "50"],
                               ["--mode", "full", "--host-sample-hz", "4000"])
        t = aon.load(self.job)
        tids = collections.Counter(col(t.host_samples, "tid"))
        self.assertGreaterEqual(len(tids), 2, tids)  # the main thread and helpers
        names = collections.Counter(innermost_python(s).partition(" (")[0]
                                    for s in col(t.host_samples, "stack"))
        for planted in ("spin",):
            self.assertIn(planted, names, names)

    def test_threads_that_block_the_signal_are_left_alone(self):
        # Queued to threads that block them, 1000 signals a second would pass
        # the program's RLIMIT_SIGPENDING of 600 within a second.
        planted, p = self.run_python(["--case", "blocked", "--steps", "400"], ["--mode", "full"])
        t = aon.load(self.job)
        tids = set(col(t.host_samples, "tid"))
        self.assertIn(planted["main_tid"], tids)
        # ... and the rank file says so: the two threads, each counted once.
        import h5py
        with h5py.File(os.path.join(self.job, "rank-00000.h5"), "r") as f:
            notes = f["meta"].attrs["notes"]
        notes = notes.decode() if isinstance(notes, bytes) else str(notes)
        self.assertIn("host sampling: 2 thread(s) not sampled: they block signal", notes)

    def test_exec_while_a_forked_child_lives(self):
        # The program forks a child that sleeps, then replaces itself with one
        # that computes for 1.5 s: AON's signal would end it (its default action).
        self.aon_run([sys.executable, PROGRAM, "--case", "exec"], ["--mode", "full"])

    def test_report_names_the_function_the_gpu_waited_on(self):
        self.run_python(["--steps", "200"])
        report = os.path.join(self.dir, "report.json")  # and report.html beside the timeline
        p = subprocess.run([os.path.join(hook_jobs.BIN, "aon-report"), self.job,
                            "--json", report], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(report) as f:
            first = json.load(f)["findings"][0]
        self.assertEqual(first["kind"], "host-work", first)
        self.assertIn("`planted_busy (host_sample_program.py:", first["evidence"])
        self.assertGreaterEqual(first["numbers"]["top_frame_share"], 0.9, first)
        self.assertGreater(first["numbers"]["host_samples"], 0, first)
        # The HTML's flame graphs: the planted function among the idle gaps' stacks.
        with open(os.path.join(self.job, "report.html"), encoding="utf-8") as f:
            html = f.read()
        section = html[html.index("<section id=host-samples>"):]
        section = section[:section.index("</section>")]
        idle = section[section.index("While the GPU idled"):section.index("All samples")]
        self.assertIn(">planted_busy (host_sample_program.py)</div>", idle)

    def test_off(self):
        self.run_python(["--steps", "20"], ["--mode", "full", "--host-sample-hz", "0"])
        self.assertEqual(len(aon.load(self.job).host_samples), 0)
        shutil.rmtree(self.job)
        self.run_python(["--steps", "20"], ["--mode", "full", "--kinds", "kernels,api"])
        self.assertEqual(len(aon.load(self.job).get("host_samples", [])), 0)

    def test_bad_rate_is_refused_by_name(self):
        p = hook_jobs.run_program(self.job, ["true"], aon_args=["--host-sample-hz", "fast"])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("host-sample-hz", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
