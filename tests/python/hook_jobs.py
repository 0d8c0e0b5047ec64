"""What the framework-hook tests share: real aon-run jobs with the SYNTHETIC
GPU, and reading their tables (aon.load)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = None
PYDIR = None


def configure(bin_dir):
    """Where aon-run is; puts the aon package it goes with on sys.path."""
    global BIN, PYDIR
    BIN = os.path.abspath(bin_dir)
    PYDIR = os.path.join(os.path.dirname(BIN), "lib", "aon-python")
    sys.path.insert(0, PYDIR)
    return BIN


def run_program(job, command, extra_env=None, aon_args=()):
    """`command` under aon-run with the synthetic GPU, into job directory `job`."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("PYTHONPATH", None)
    env.update(extra_env or {})
    cmd = [os.path.join(BIN, "aon-run"), "--source", "synthetic", "--no-report", "-o", job,
           *aon_args, *command]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def run(job, args, extra_env=None, aon_args=()):
    """A Python script (this interpreter) under aon-run: run_program."""
    return run_program(job, [sys.executable, *args], extra_env, aon_args)


def col(table, name):
    """A column as a list, from a DataFrame or a numpy array; a DataFrame's NA
    (a field's "none" value, aon.reader) as None, so that `if v` means "has a
    value" both ways (numpy keeps the stored 0 / -1)."""
    v = table[name]
    if not hasattr(v, "to_numpy"):
        return list(v)
    na = list(v.isna())
    return [None if missing else x for x, missing in zip(v.to_numpy(), na)]


def marked_steps(test, t, source):
    """The step numbers `source` marked, checking that every other step is a
    time slot that ended before its first one (a loaded machine's slow start-up
    can take more than a slot before the loop's first step)."""
    rows = list(zip(col(t.steps, "step"), col(t.steps, "source_name"),
                    col(t.steps, "start_ns"), col(t.steps, "end_ns")))
    mine = [r for r in rows if r[1] == source]
    test.assertTrue(mine, rows)
    first = min(r[2] for r in mine)
    for r in rows:
        if r[1] != source:
            test.assertEqual(r[1], "time slot", rows)
            test.assertLessEqual(r[3], first, rows)
    return [r[0] for r in mine]
