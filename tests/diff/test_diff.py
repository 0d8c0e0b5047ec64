#!/usr/bin/env python3
"""CI test of aon-diff (report/include/aon/report/diff.h): real aon-run jobs of
the findings corpus's host_work case on the labeled SYNTHETIC GPU, the same
program with one planted change (the host work per step, or the kernels' GPU
time), and the change named first with its size per step; the HTML page, the
ranks' median steps and the modules of a framework run.

usage: test_diff.py BIN_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin")
DIR = None
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


TRUTH = {}


def run(name, *args, extra=()):
    """The program under aon-run; keeps what it measured about itself (its TRUTH
    line: median step and GPU idle per step, host times real, GPU the model's)."""
    job = os.path.join(DIR, name)
    p = subprocess.run([os.path.join(BIN, "aon-run"), "--source", "synthetic", "--no-report",
                        *extra, "-o", job, os.path.join(BIN, "aon-synthetic-pathology"),
                        "--case", "host_work", *args], env=ENV, capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        raise RuntimeError(p.stdout + p.stderr)
    line = [x for x in p.stdout.splitlines() if x.startswith("TRUTH ")]
    TRUTH[name] = json.loads(line[0][len("TRUTH "):])
    return job


def setUpModule():
    global DIR
    DIR = tempfile.mkdtemp(prefix="aon-diff-")
    run("base", "--steps", "120", "--host-ms", "4", "--gpu-ms", "2")
    run("slow_host", "--steps", "80", "--host-ms", "8", "--gpu-ms", "2")
    run("slow_gpu", "--steps", "120", "--host-ms", "4", "--gpu-ms", "10")
    run("base_full", "--steps", "60", "--host-ms", "1", "--gpu-ms", "2", extra=("--mode", "full"))
    # Framework ranges (module "model" > aten::linear > aten::addmm), two ranks.
    p = subprocess.run([os.path.join(BIN, "aon-run"), "--source", "synthetic", "--no-report",
                        "--mode", "full", "-o", os.path.join(DIR, "ops"), "mpirun", "-np", "2",
                        "--oversubscribe", os.path.join(BIN, "aon-synthetic-app"), "--ops",
                        "--iterations", "10"], env=ENV, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(p.stdout + p.stderr)


def tearDownModule():
    shutil.rmtree(DIR, ignore_errors=True)


def diff(base, new):
    out = os.path.join(DIR, "diff.json")
    p = subprocess.run([os.path.join(BIN, "aon-diff"), os.path.join(DIR, base),
                        os.path.join(DIR, new), "--json", out], capture_output=True, text=True,
                       timeout=300)
    with open(out) as f:
        return p, json.load(f)


class Diff(unittest.TestCase):
    def test_more_host_work_is_named_first_with_its_size(self):
        # 4 ms more host work a step (as planted: what the programs measured of
        # their idle GPU), in a run of another length (80 vs 120 steps).
        p, d = diff("base", "slow_host")
        self.assertEqual(p.returncode, 0, p.stderr)
        first = d["changes"][0]
        self.assertEqual((first["category"], first["name"]),
                         ("idle", "host work outside CUDA calls"), p.stdout)
        want = (TRUTH["slow_host"]["idle_per_step_ms"] - TRUTH["base"]["idle_per_step_ms"]) * 1e6
        self.assertAlmostEqual(first["delta_ns"] / want, 1.0, delta=0.15, msg=p.stdout)
        want = (TRUTH["slow_host"]["step_ms"] - TRUTH["base"]["step_ms"]) * 1e6
        step = d["new_step_ns"] - d["base_step_ns"]
        self.assertAlmostEqual(step / want, 1.0, delta=0.15, msg=p.stdout)
        self.assertGreater(first["share_of_step_change"], 0.8, p.stdout)
        self.assertIn("host work outside CUDA calls", p.stdout.splitlines()[4], p.stdout)

    def test_longer_kernels_are_named_first(self):
        p, d = diff("base", "slow_gpu")
        self.assertEqual(p.returncode, 0, p.stderr)
        kernels = [c for c in d["changes"] if c["category"] == "kernel"]
        first = d["changes"][0]
        self.assertEqual(first["category"], "kernel", p.stdout)
        # 2 -> 10 ms of GPU work a step: 8 ms more, and no more than the base's
        # host-work idle (about 4 ms a step) less idle.
        self.assertGreater(first["delta_ns"], 6e6, p.stdout)
        self.assertTrue(all(abs(c["delta_ns"]) <= abs(first["delta_ns"]) for c in kernels))

    def test_budgeted_against_full_and_the_same_run_against_itself(self):
        p, d = diff("base", "base")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(all(c["delta_ns"] == 0 for c in d["changes"]), p.stdout)
        p, d = diff("base", "base_full")  # windows against every step: still per step
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d["new_gpu_steps"], d["new_steps"])
        self.assertLess(d["base_gpu_steps"], d["base_steps"])

    def test_html_page_and_ranks(self):
        out = os.path.join(DIR, "diff.html")
        p = subprocess.run([os.path.join(BIN, "aon-diff"), os.path.join(DIR, "base"),
                            os.path.join(DIR, "slow_host"), "--html", out], capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            html = f.read()
        self.assertTrue(html.startswith("<!DOCTYPE html>"))
        # The changes table, the largest first: as in the terminal and the JSON.
        table = html[html.index("<table id=changes>"):]
        first_row = table.split("</tr>")[1]
        self.assertIn("host work outside CUDA calls", first_row)
        self.assertIn("<table id=ranks>", html)
        self.assertNotIn("<script", html)
        self.assertNotIn("https://", html)
        _, d = diff("base", "slow_host")
        self.assertEqual([r["rank"] for r in d["ranks"]], [0])
        self.assertEqual(d["ranks"][0]["new_step_ns"], d["new_step_ns"])  # one rank: its median

    def test_modules_and_every_rank_of_a_framework_run(self):
        p, d = diff("ops", "ops")
        self.assertEqual(p.returncode, 0, p.stderr)
        modules = [c for c in d["changes"] if c["category"] == "module"]
        self.assertEqual([c["name"] for c in modules], ["model"], p.stdout)
        self.assertGreater(modules[0]["base_ns"], 0)
        self.assertEqual(modules[0]["delta_ns"], 0)
        self.assertEqual([r["rank"] for r in d["ranks"]], [0, 1])
        self.assertIn("Median step per rank:", p.stdout)
        self.assertIn("rank 1 ", p.stdout)

    def test_unreadable_input_and_usage(self):
        p = subprocess.run([os.path.join(BIN, "aon-diff"), os.path.join(DIR, "base"),
                            os.path.join(DIR, "nothing")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("nothing", p.stderr)
        p = subprocess.run([os.path.join(BIN, "aon-diff")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
