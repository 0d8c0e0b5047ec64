#!/usr/bin/env python3
"""CI test of the reader's conventions (aon.load; python/aon/reader.py): its
kinds argument checked, duration and time-from-start columns, the job's
metadata, a short repr, flag bits as boolean columns, "none" values as NA in
DataFrames (and as stored in numpy arrays). Reads a real aon-run job of the labeled SYNTHETIC GPU.

usage: test_reader.py BIN_DIR   (with a python that has h5py, numpy and pandas)
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

    def test_none_values_are_na_in_dataframes_and_kept_in_numpy(self):
        # Every field the format says has a "none" value, in every table of the
        # job: NA exactly where the stored value (read without pandas) is that
        # value, in a nullable column of the field's width.
        import numpy as np
        try:
            import pandas  # noqa: F401
        except ImportError:
            self.fail("pandas is not installed (scripts/install-deps.sh --test installs "
                      "python3-pandas): the DataFrame conventions are not checked")
        from aon import _schema
        with_pandas = aon.load(self.job())
        saved = sys.modules.get("pandas")
        sys.modules["pandas"] = None  # import pandas now raises ImportError
        try:
            stored = aon.load(self.job())
        finally:
            sys.modules["pandas"] = saved
        checked, na_total = 0, 0
        for table, fields in _schema.NONE.items():
            if table not in stored:
                continue
            self.assertIsInstance(stored[table], np.ndarray, table)
            for field, none in fields.items():
                if field not in stored[table].dtype.names:
                    continue
                raw = stored[table][field]
                frame_col = with_pandas[table][field]
                self.assertEqual(list(frame_col.isna()), list(raw == none), (table, field))
                present = frame_col.dropna().to_numpy()
                self.assertEqual([int(v) if raw.dtype.kind in "iu" else float(v) for v in present],
                                 [v for v in raw[raw != none].tolist()], (table, field))
                if raw.dtype.kind in "iu":
                    want = "%sInt%d" % ("U" if raw.dtype.kind == "u" else "", raw.dtype.itemsize * 8)
                    self.assertEqual(str(frame_col.dtype), want, (table, field))
                checked += 1
                na_total += int(frame_col.isna().sum())
        # This job has such values: no kernel from a CUDA graph, no capture
        # windows in full mode.
        self.assertGreaterEqual(checked, 5)
        self.assertEqual(int(with_pandas.kernels["graph_node_id"].isna().sum()),
                         len(with_pandas.kernels))
        self.assertEqual(list(stored.kernels["graph_node_id"]), [0] * len(stored.kernels))
        self.assertGreater(na_total, len(with_pandas.kernels))


if __name__ == "__main__":
    unittest.main(verbosity=2)
