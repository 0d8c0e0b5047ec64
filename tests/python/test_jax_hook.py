#!/usr/bin/env python3
"""CI test of AON's JAX hook (docs/jax.md) with the labeled SYNTHETIC GPU and a
labeled STAND-IN for jax.profiler (tests/python/standin_jax: CI has no JAX; the
real JAX is checked on the GPU machine). Runs real aon-run jobs of
tests/python/jax_synthetic_steps.py, whose steps are marked only by
jax.profiler.StepTraceAnnotation, and checks the steps and windows AON gives.

usage: test_jax_hook.py BIN_DIR   (with a python that has h5py and numpy)
"""
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

import hook_jobs
from hook_jobs import col, marked_steps

hook_jobs.configure(sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin")
SCRIPT = os.path.join(hook_jobs.HERE, "jax_synthetic_steps.py")
STANDIN = {"PYTHONPATH": os.path.join(hook_jobs.HERE, "standin_jax")}
REPLAY = os.path.join(hook_jobs.HERE, "..", "data", "xla", "jit_step.replay")
COMMAND_BUFFER = os.path.join(hook_jobs.HERE, "..", "data", "xla", "command_buffer.replay")
import aon  # noqa: E402


def kernels_per_step(t, numbers):
    """Kernels of each step of `numbers` (by the kernel's start), and how many
    fell in no step of them."""
    spans = [(a, b, n) for a, b, n, src in zip(col(t.steps, "start_ns"), col(t.steps, "end_ns"),
                                               col(t.steps, "step"), col(t.steps, "source_name"))
             if src == "jax" and n in numbers]
    counts = {n: 0 for n in numbers}
    outside = 0
    for ts in col(t.kernels, "start_ns"):
        hit = [n for a, b, n in spans if a <= ts < b]
        if hit:
            counts[hit[0]] += 1
        else:
            outside += 1
    return counts, outside


class JaxHook(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="aon-jax-")
        self.job = os.path.join(self.dir, "job")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_each_step_trace_annotation_is_a_step_in_full_mode(self):
        p = hook_jobs.run(self.job, [SCRIPT, "--steps", "9", "--kernels", "3"], extra_env=STANDIN,
                          aon_args=["--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("HOOK jax", p.stdout)
        self.assertIn("DONE steps=9 entered=9 exited=9", p.stdout)  # the annotation still works
        t = aon.load(self.job)
        steps = marked_steps(self, t, "jax")
        # A step runs from one annotation to the next; the last one ends with the run.
        self.assertEqual(steps, list(range(9)))
        counts, _ = kernels_per_step(t, steps)
        self.assertEqual(counts, {n: 3 for n in range(9)})
        self.assertEqual(len(col(t.kernels, "start_ns")), 27)

    def test_windows_open_on_jax_steps_and_hold_exactly_their_kernels(self):
        p = hook_jobs.run(self.job, [SCRIPT, "--steps", "40", "--kernels", "2"], extra_env=STANDIN,
                          aon_args=["--capture-period", "8", "--capture-steps", "2"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(self.job)
        steps = marked_steps(self, t, "jax")
        self.assertEqual(steps, list(range(40)))
        captured = sorted(n for n, f, src in zip(col(t.steps, "step"), col(t.steps, "flags"),
                                                  col(t.steps, "source_name"))
                          if f & 1 and src == "jax")
        self.assertTrue(captured, "no window opened on the jax steps")
        self.assertLess(len(captured), 40)
        counts, _ = kernels_per_step(t, steps)
        for n in steps:
            self.assertEqual(counts[n], 2 if n in captured else 0, (n, captured, counts))

    def test_hook_off_leaves_jax_alone(self):
        p = hook_jobs.run(self.job, [SCRIPT, "--steps", "3"], extra_env=STANDIN,
                          aon_args=["--python-hook", "off", "--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("HOOK none", p.stdout)
        self.assertIn("entered=3 exited=3", p.stdout)
        t = aon.load(self.job)
        self.assertNotIn("jax", col(t.steps, "source_name"))


def truth(thunk, module):
    """What a kernel launched inside these XLA ranges is tied to, read from the
    names with the patterns of docs/jax.md (not the reader's parser)."""
    op = re.search(r"[#,]hlo_op=([^,#]*)", thunk)
    name = re.search(r"#name=(.*),hlo_op=", thunk)
    mod = re.search(r"#hlo_module=([^,#]*)", module)
    return (op.group(1) if op else "", name.group(1) if name else "", mod.group(1) if mod else "")


class XlaRangeNames(unittest.TestCase):
    """The reader's parser of XLA's range names, as aon-report's
    (format/src/framework_ranges.cc, tests/unit/report/xla_test.cc)."""

    def test_fields_prefix_and_other_names(self):
        from aon.reader import xla_annotation
        self.assertEqual(xla_annotation("TSL:Thunk:#hlo_op=f.1#"), ("Thunk", {"hlo_op": "f.1"}))
        kind, fields = xla_annotation(
            "Thunk:#name=jit(s)/dot_general[dimension_numbers=(((1,), (0,)))],hlo_op=g.2#")
        self.assertEqual(fields["name"], "jit(s)/dot_general[dimension_numbers=(((1,), (0,)))]")
        self.assertEqual(fields["hlo_op"], "g.2")
        self.assertEqual(xla_annotation("XlaModule:#hlo_module=jit_step,program_id=7#"),
                         ("XlaModule", {"hlo_module": "jit_step", "program_id": "7"}))
        for other in ("XlaCompile:#module=jit_step#", "Thunk:#hlo_op=x", "step 3", ""):
            self.assertIsNone(xla_annotation(other), other)


class XlaAttribution(unittest.TestCase):
    """Kernels tied to the XLA thunk and module ranges open around their launch
    (a replayed annotation sequence on the synthetic GPU: aon-synthetic-xla)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="aon-xla-")
        self.job = os.path.join(self.dir, "job")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def replay(self, aon_args, steps, extra=(), path=REPLAY, kernels=8):
        p = hook_jobs.run_program(self.job, [os.path.join(hook_jobs.BIN, "aon-synthetic-xla"),
                                             path, "--steps", str(steps), *extra],
                                  aon_args=aon_args)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        want = {}
        for line in p.stdout.splitlines():
            if line.startswith("AON_XLA "):
                fields = dict(f.split("=", 1) for f in line[len("AON_XLA "):].split("\t"))
                want[fields["kernel"]] = truth(fields["thunk"], fields["module"])
        self.assertEqual(len(want), kernels, p.stdout)
        return want

    def check(self, t, want, kernels):
        names = col(t.kernels, "name")
        self.assertEqual(len(names), kernels)
        got = list(zip(names, col(t.kernels, "hlo_op"), col(t.kernels, "jax_op"),
                       col(t.kernels, "hlo_module")))
        for name, op, jax_op, module in got:
            self.assertEqual((op, jax_op, module), want[name], name)
        return got

    def test_every_kernel_gets_its_thunk_and_module_in_full_mode(self):
        want = self.replay(["--mode", "full"], 6)
        self.assertEqual(want["gemm_fusion_dot_4_kernel"][1],
                         "jit(step)/transpose(jvp())/dot_general[dimension_numbers=(((1,), (0,)), "
                         "((), ())) precision=None]")
        self.assertEqual(want["loop_add_fusion"][0], "loop_add_fusion")  # the inner thunk
        self.assertEqual(want["while_condition_kernel"][0], "while.2")
        self.assertEqual(want["outside_kernel"], ("", "", ""))
        t = aon.load(self.job)
        got = self.check(t, want, 6 * 8)
        self.assertEqual(sum(1 for g in got if g[1]), 6 * 7)
        self.assertEqual(want["custom_call_kernel"], ("custom-call.1", "", "jit_step"))

    def test_in_budgeted_windows_too(self):
        want = self.replay(["--capture-period", "8", "--capture-steps", "2"], 40)
        t = aon.load(self.job, kinds=["kernels", "steps"])
        captured = sum(1 for f, src in zip(col(t.steps, "flags"), col(t.steps, "source_name"))
                       if f & 1 and src == "jax")
        self.assertGreater(captured, 0)
        self.check(t, want, 8 * captured)


    def test_command_buffer_kernels_get_the_instruction_recorded_for_them(self):
        # XLA's command buffers: one graph launch inside the buffer's thunk
        # replays kernels recorded inside the thunks nested in it; XLA names
        # the kernels it emits after their fusion (docs/jax.md).
        want = self.replay(["--mode", "full"], 6, path=COMMAND_BUFFER, kernels=5)
        t = aon.load(self.job)
        names = col(t.kernels, "name")
        self.assertEqual(len(names), 6 * 5)
        graph = col(t.kernels, "graph_node_id")
        self.assertEqual(sum(1 for g in graph if g), 6 * 4, "replayed from the graph")
        for name, op, jax_op, module in zip(names, col(t.kernels, "hlo_op"),
                                            col(t.kernels, "jax_op"), col(t.kernels, "hlo_module")):
            if name == "library_gemm_kernel":
                # Not named after its instruction: the buffer's thunk, as before.
                self.assertEqual((op, jax_op, module), ("command_buffer_1", "", "jit_step"))
            else:
                self.assertEqual(want[name][0].replace(".", "_"), name)
                self.assertEqual((op, jax_op, module), want[name], name)
        # The trace for viewers: compilation its own category, XLA's fields as args.
        with open(os.path.join(self.job, "trace.json"), encoding="utf-8") as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        compiles = [e for e in events if e.get("cat") == "compile:XLA"]
        self.assertEqual([e["name"] for e in compiles], ["XlaCompile:#module=jit_step#"])
        thunks = [e for e in events if e["name"].startswith("Thunk:#")]
        self.assertEqual(len(thunks), 6 * 6)
        for e in thunks:
            self.assertEqual(e["args"]["hlo_op"], truth(e["name"], "")[0], e)
            self.assertTrue(e["cat"].startswith("nvtx:"), e)
        modules = [e for e in events if e["name"].startswith("XlaModule:#")]
        self.assertEqual({e["args"]["hlo_module"] for e in modules}, {"jit_step"})

    def test_without_step_annotations_the_step_modules_executions_are_the_steps(self):
        # XLA's module executions mark steps once one module ran 48 times
        # (rank_agent/src/xla_steps.h): here the only module, once per step.
        want = self.replay(["--mode", "full"], 60, ["--no-step-hook"])
        t = aon.load(self.job)
        steps = marked_steps(self, t, "xla")
        self.assertEqual(steps, list(range(60 - 48)))
        spans = [(a, b) for a, b, src in zip(col(t.steps, "start_ns"), col(t.steps, "end_ns"),
                                              col(t.steps, "source_name")) if src == "xla"]
        for a, b in spans:
            inside = [n for n, ts in zip(col(t.kernels, "name"), col(t.kernels, "start_ns"))
                      if a <= ts < b]
            self.assertEqual(sorted(inside), sorted(want), (a, b))


if __name__ == "__main__":
    unittest.main(verbosity=2)
