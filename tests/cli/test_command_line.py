#!/usr/bin/env python3
"""CI test of the command-line conventions every AON tool follows (cli/,
docs/command-line.md) and of the `aon` front end: --version and --help on every
tool, help without the parser's type tags, one error line and exit code 2 for a
bad command line (aon-run: 125), the front end's dispatch, help, near-miss
suggestion and exit codes, and a job directory taken wherever a timeline is (a
real aon-run job of the labeled SYNTHETIC GPU through `aon run`).

usage: test_command_line.py BIN_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
# The front end's commands (cli/tools/aon_main.cc) and the tools behind them,
# plus the node collector (started by the agent, run by hand for --trigger).
COMMANDS = ["run", "report", "stats", "diff", "export", "inspect", "merge", "ctl"]
TOOLS = ["aon"] + ["aon-" + c for c in COMMANDS] + ["aon-collector"]
# What CLI11 prints when a tool does not name its values: the C++ type
# (TEXT, INT ...), a check's description after a colon (DIR:DIR, INT in [1 - 4096]),
# REQUIRED, Excludes:/Needs: lists.
PARSER_TAGS = re.compile(r"\b(TEXT|UINT|INT|FLOAT|BOOLEAN|REQUIRED|Excludes|Needs)\b|"
                         r"[A-Z]:(DIR|FILE|PATH|INT|UINT|FLOAT|NUMBER|POSITIVE|NONNEGATIVE|\{)|"
                         r"in \[[-0-9.e+ ]+\]")
# Arguments that get a tool past its required positionals to the bad option.
BAD_LINE = {"aon-diff": ["--no-such-option", "x", "y"], "aon-ctl": ["steps", "--no-such-option", "x"]}
DIR = None


def call(*args, timeout=120):
    cmd = list(args)
    cmd[0] = os.path.join(BIN, cmd[0])
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)


def version():
    p = call("aon", "--version")
    m = re.fullmatch(r"aon (\d+\.\d+\.\d+)\n", p.stdout)
    assert p.returncode == 0 and m, (p.returncode, p.stdout, p.stderr)
    return m.group(1)


def setUpModule():
    global DIR
    DIR = tempfile.mkdtemp(prefix="aon-cli-")


def tearDownModule():
    shutil.rmtree(DIR, ignore_errors=True)


class EveryTool(unittest.TestCase):
    def test_version_is_the_same_everywhere(self):
        v = version()
        for tool in TOOLS:
            with self.subTest(tool=tool):
                p = call(tool, "--version")
                self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "%s %s\n" % (tool, v), ""))

    def test_help_names_values_without_parser_tags(self):
        for tool in TOOLS:
            with self.subTest(tool=tool):
                p = call(tool, "--help")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("--version", p.stdout)
                bad = [l for l in p.stdout.splitlines() if PARSER_TAGS.search(l)]
                self.assertEqual(bad, [], "CLI11 type tags in %s --help" % tool)
                long = [l for l in p.stdout.splitlines() if len(l) > 100]
                self.assertEqual(long, [], "lines over 100 columns in %s --help" % tool)

    def test_bad_option_is_one_error_line_and_exit_2(self):
        for tool in TOOLS:
            with self.subTest(tool=tool):
                p = call(tool, *BAD_LINE.get(tool, ["--no-such-option", "x"]))
                want = 125 if tool == "aon-run" else 2
                self.assertEqual(p.returncode, want, p.stderr)
                self.assertEqual(p.stdout, "")
                self.assertRegex(p.stderr, r"^%s: error: .*no-such-option" % re.escape(tool))
                if tool != "aon":
                    self.assertIn("run '%s --help' for usage" % tool, p.stderr)


class FrontEnd(unittest.TestCase):
    def test_every_command_runs_its_tool_under_the_typed_name(self):
        listing = call("aon", "--help")
        self.assertEqual(listing.returncode, 0)
        for c in COMMANDS:
            with self.subTest(command=c):
                self.assertRegex(listing.stdout, r"\n  %s +\S" % c)
                p = call("aon", c, "--help")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertRegex(p.stdout, r"Usage: aon %s " % c)
                self.assertEqual(call("aon", "help", c).stdout, p.stdout)
                v = call("aon", c, "--version")
                self.assertEqual(v.stdout, "aon %s %s\n" % (c, version()))
                bad = call("aon", c, *BAD_LINE.get("aon-" + c, ["--no-such-option", "x"]))
                self.assertEqual(bad.returncode, 125 if c == "run" else 2)
                self.assertRegex(bad.stderr, r"^aon %s: error: .*no-such-option" % c)

    def test_no_command_unknown_command_and_options_before_it(self):
        p = call("aon")
        self.assertEqual((p.returncode, p.stdout), (2, ""))
        self.assertIn("Usage: aon <command>", p.stderr)
        p = call("aon", "reprot", "x")
        self.assertEqual(p.returncode, 2)
        self.assertIn("'reprot' is not an aon command; did you mean 'report'?", p.stderr)
        p = call("aon", "frobnicate")
        self.assertEqual(p.returncode, 2)
        self.assertNotIn("did you mean", p.stderr)
        p = call("aon", "-o", "x", "run")
        self.assertEqual(p.returncode, 2)
        self.assertIn("options go after the command", p.stderr)
        p = call("aon", "help", "nope")
        self.assertEqual(p.returncode, 2)

    def test_run_exits_with_the_applications_status(self):
        job = os.path.join(DIR, "status")
        p = call("aon", "run", "--no-merge", "-o", job, "/bin/sh", "-c", "exit 7")
        self.assertEqual(p.returncode, 7, p.stderr)
        p = call("aon", "run", "--no-merge", "-o", job + "2", "/no/such/program")
        self.assertEqual(p.returncode, 127, p.stderr)
        self.assertRegex(p.stderr, r"aon run: error: ")

    def test_a_failure_exits_1_and_names_the_input(self):
        missing = os.path.join(DIR, "no-such-job")
        for c in ["report", "stats", "export", "inspect"]:
            with self.subTest(command=c):
                p = call("aon", c, missing)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertRegex(p.stderr, r"^aon %s: error: .*no-such-job" % c)


class JobDirectory(unittest.TestCase):
    """A job directory wherever a timeline is taken: every reader of a timeline
    gives the same answer for the directory as for its timeline.h5."""

    @classmethod
    def setUpClass(cls):
        cls.job = os.path.join(DIR, "job")
        p = call("aon", "run", "--source", "synthetic", "--no-report", "-o", cls.job,
                 os.path.join(BIN, "aon-synthetic-app"), "--iterations", "40", timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        cls.timeline = os.path.join(cls.job, "timeline.h5")
        assert os.path.isfile(cls.timeline), os.listdir(cls.job)

    def test_readers_take_the_directory(self):
        for args in (["inspect", "--json"], ["stats", "-r", "kernels", "--format", "csv"],
                     ["report", "--no-html"]):
            with self.subTest(command=args[0]):
                by_dir = call("aon", args[0], self.job, *args[1:])
                by_file = call("aon", args[0], self.timeline, *args[1:])
                self.assertEqual(by_dir.returncode, 0, by_dir.stderr)
                self.assertEqual(by_dir.stdout, by_file.stdout)
                self.assertGreater(len(by_dir.stdout), 100)
        # The HTML goes next to the timeline either way.
        html = os.path.join(self.job, "report.html")
        p = call("aon", "report", self.job, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.getsize(html) > 1000)

    def test_export_and_diff_take_the_directory(self):
        out = os.path.join(DIR, "window.json")
        p = call("aon", "export", self.job, "--window", "0:1", "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.getsize(out) > 0)
        p = call("aon", "diff", self.job, self.job)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_an_unmerged_directory_is_said(self):
        unmerged = os.path.join(DIR, "unmerged")
        os.mkdir(unmerged)
        for name in os.listdir(self.job):
            if name.startswith("rank-") and name.endswith(".h5"):
                shutil.copy(os.path.join(self.job, name), unmerged)
        p = call("aon", "inspect", unmerged)
        self.assertEqual(p.returncode, 1)
        self.assertIn("without timeline.h5 (not merged yet", p.stderr)
        ranks = [n for n in os.listdir(unmerged) if n.startswith("rank-")]
        p = call("aon", "inspect", os.path.join(unmerged, ranks[0]))
        self.assertEqual(p.returncode, 0, p.stderr)


class CtlTrigger(unittest.TestCase):
    """aon ctl trigger on a running job: a flight-mode job's collector writes its
    window with the reason and answers; the merge carries the dump into the
    timeline (capture_events) and the report says it. A budgeted job answers
    that there is nothing to dump, and the command fails."""

    def start(self, name, *mode):
        job = os.path.join(DIR, name)
        # About 6 s of steps: long enough for the request to be read (the
        # collector looks about once a second) while the job runs.
        proc = subprocess.Popen(
            [os.path.join(BIN, "aon"), "run", "--source", "synthetic", *mode, "-o", job,
             os.path.join(BIN, "aon-synthetic-app"), "--iterations", "3000", "--host-us", "2000"],
            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(100):  # the rank's file appears once the collector serves it
            if os.path.isdir(job) and any(n.startswith("rank-") for n in os.listdir(job)):
                break
            time.sleep(0.05)
        return job, proc

    def test_flight_job_dumps_with_the_reason_and_the_report_says_it(self):
        job, proc = self.start("flight", "--mode", "flight", "--window", "30")
        p = call("aon", "ctl", "trigger", "--wait", "20", job, "loss", "spike")
        out, err = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"flight recorder dump 1: \d+ records of 1 rank\(s\) written")
        self.assertIn("(loss spike): 1 of 1 node(s) dumped their flight window", p.stdout)
        events = call("aon", "inspect", "--json", job)
        self.assertEqual(events.returncode, 0, events.stderr)
        self.assertRegex(events.stdout, r'"capture_events":"rank 0: flight recorder dump 1: '
                                        r'requested \(aon ctl trigger: loss spike\): \d+ records')
        report = call("aon", "report", job, "--no-html")
        self.assertEqual(report.returncode, 0, report.stderr)
        said = " ".join(report.stdout.split())  # the terminal text is wrapped
        self.assertIn("The flight recorder wrote its window 1 time: dump 1: requested (aon ctl "
                      "trigger: loss spike) (rank 0).", said)

    def test_budgeted_job_has_nothing_to_dump(self):
        job, proc = self.start("budgeted")
        p = call("aon", "ctl", "trigger", "--wait", "20", job)
        proc.communicate(timeout=300)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("nothing to dump: the job runs in budgeted mode, not flight", p.stdout)
        self.assertIn("0 of 1 node(s) dumped", p.stdout)

    def test_no_collector_answers_is_said(self):
        lonely = os.path.join(DIR, "lonely")
        os.mkdir(lonely, 0o700)
        p = call("aon", "ctl", "trigger", "--wait", "1", lonely)
        self.assertEqual(p.returncode, 1)
        self.assertIn("no node collector answered within 1 s", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
