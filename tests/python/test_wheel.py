#!/usr/bin/env python3
"""CI test of the `aon` Python package as the build makes it: the wheel
build/dist/aon-<version>-py3-none-any.whl (python/build_wheel.py), installed by
pip into a folder of its own, then imported from there alone (not from the
build's aon-python) to read a real aon-run job of the labeled SYNTHETIC GPU.

usage: test_wheel.py BIN_DIR   (with a python that has pip, numpy and h5py)
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin")
BUILD = os.path.dirname(BIN)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
ENV.pop("PYTHONPATH", None)


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="aon-wheel-")
        wheels = glob.glob(os.path.join(BUILD, "dist", "aon-*-py3-none-any.whl"))
        assert len(wheels) == 1, "want one wheel in %s/dist, found %s" % (BUILD, wheels)
        cls.wheel = wheels[0]
        cls.version = os.path.basename(cls.wheel).split("-")[1]
        cls.site = os.path.join(cls.dir, "site")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                            "--no-compile", "--target", cls.site, cls.wheel],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, "pip install of %s: %s%s" % (cls.wheel, p.stdout, p.stderr)
        cls.job = os.path.join(cls.dir, "job")
        p = subprocess.run([os.path.join(BIN, "aon-run"), "--source", "synthetic", "--no-report",
                            "--mode", "full", "-o", cls.job, os.path.join(BIN, "aon-synthetic-app"), "--iterations",
                            "12"], env=ENV, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def python(self, code, *args):
        # From a folder of its own, with only the installed package on the path.
        env = dict(ENV, PYTHONPATH=self.site, PYTHONNOUSERSITE="1")
        return subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=self.dir,
                              capture_output=True, text=True, timeout=300)

    def test_pip_installs_it_and_it_reads_a_job(self):
        p = self.python(
            "import importlib.metadata, sys, aon\n"
            "t = aon.load(sys.argv[1])\n"
            "print(aon.__file__)\n"
            "print(importlib.metadata.version('aon'))\n"
            "print(len(t.kernels), t.meta['world_size'], len(t.steps))\n", self.job)
        self.assertEqual(p.returncode, 0, p.stderr)
        where, version, counts = p.stdout.splitlines()
        self.assertTrue(where.startswith(self.site), where)
        self.assertEqual(version, self.version)
        # 12 iterations of 3 kernels; one rank; its 12 NVTX steps.
        self.assertEqual(counts, "36 1 12")

    def test_the_api_is_a_no_op_outside_aon_and_no_sitecustomize(self):
        p = self.python("import aon\nprint(aon.active())\naon.step()\n"
                        "with aon.range('x'):\n    pass\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "False")
        # A sitecustomize.py in site-packages would run in every Python process.
        self.assertFalse(os.path.exists(os.path.join(self.site, "sitecustomize.py")))
        self.assertEqual(sorted(os.listdir(os.path.join(self.site, "aon"))),
                         ["__init__.py", "_agent.py", "_hook.py", "_jax_hook.py", "_schema.py",
                          "reader.py"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
