#!/usr/bin/env python3
"""CI test of the reader's conventions (aon.load; python/aon/reader.py): its
kinds argument checked, duration and time-from-start columns, the job's
metadata, a short repr, flag bits as boolean columns. Reads a real aon-run job of the labeled SYNTHETIC GPU.

usage: test_reader.py BIN_DIR   (with a python that has h5py and numpy)
"""
import os
import shutil
import sys
import tempfile
import unittest

import hook_jobs
from hook_jobs import col

hook_jobs.configure(sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin")
import aon  # noqa: E402

JOB = None


def setUpModule():
    global JOB
    JOB = tempfile.mkdtemp(prefix="aon-reader-")
    p = hook_jobs.run(os.path.join(JOB, "job"),
                      [os.path.join(hook_jobs.HERE, "host_sample_program.py"), "--steps", "20",
                       "--busy-ms", "1"],
                      {"PYTHONPATH": hook_jobs.HERE, "AON_JOB_ID": "reader-test"}, ["--mode", "full"])
    if p.returncode != 0:
        raise RuntimeError(p.stdout + p.stderr)


def tearDownModule():
    shutil.rmtree(JOB, ignore_errors=True)


class Reader(unittest.TestCase):
    def job(self):
        return os.path.join(JOB, "job")

    def test_kinds_one_name_or_a_list_and_unknown_ones_refused(self):
        one = aon.load(self.job(), kinds="kernels")
        self.assertEqual(len(one.kernels), 20)  # one kernel a step
        self.assertNotIn("counters", one)
        both = aon.load(self.job(), kinds=["kernels", "steps"])
        self.assertEqual(len(both.steps), 20)
        with self.assertRaises(ValueError) as e:
            aon.load(self.job(), kinds="kernel")
        self.assertIn("'kernel'", str(e.exception))
        self.assertIn("kernels", str(e.exception))
        with self.assertRaises(ValueError):
            aon.load(self.job(), kinds=["kernels", "kernals"])
        with self.assertRaises(TypeError):
            aon.load(self.job(), kinds=5)

    def test_duration_and_time_from_the_start(self):
        t = aon.load(self.job())
        start = t.meta["start_ns"]
        for name in ("kernels", "steps", "api"):
            s, e = col(t[name], "start_ns"), col(t[name], "end_ns")
            self.assertEqual(col(t[name], "duration_ns"), [b - a for a, b in zip(s, e)], name)
            self.assertEqual(col(t[name], "t"), [(a - start) / 1e9 for a in s], name)
            self.assertGreaterEqual(min(col(t[name], "t")), 0.0, name)
        self.assertIn("t", t.host_samples.dtype.names if hasattr(t.host_samples, "dtype")
                      else t.host_samples.columns)

    def test_metadata_and_a_short_repr(self):
        t = aon.load(self.job())
        self.assertEqual(t.meta["job_id"], "reader-test")
        self.assertEqual(t.meta["world_size"], 1)
        self.assertEqual(t.meta["records_kernels"], 20)
        r = repr(t)
        self.assertIn("reader-test", r)
        self.assertIn("kernels 20", r)
        self.assertLess(len(r), 400)

    def test_flag_bits_are_boolean_columns_named_after_them(self):
        # Full mode: every step captured; the program's Python frames are in
        # its samples. Each bit's column is exactly that bit of `flags`.
        t = aon.load(self.job())
        for table, bits in (("steps", {"captured": 1, "window_tail": 2, "on_demand": 4}),
                            ("host_samples", {"python": 1, "truncated": 2, "partial": 4})):
            flags = col(t[table], "flags")
            self.assertTrue(flags, table)
            for name, bit in bits.items():
                self.assertEqual([bool(v) for v in col(t[table], name)],
                                 [bool(int(f) & bit) for f in flags], (table, name))
        self.assertTrue(all(col(t.steps, "captured")))
        self.assertTrue(any(col(t.host_samples, "python")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
