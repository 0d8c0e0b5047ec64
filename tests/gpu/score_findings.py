#!/usr/bin/env python3
"""Scores aon-report's findings against the planted problems of tests/gpu/pathologies/.

    python3 tests/gpu/score_findings.py --bin build-gpu/bin --out /tmp/score
        [--modes budgeted,full] [--programs input_python,item_sync] [--variants all|0,2]
        [--corpus tests/findings/synthetic_corpus.json]

Each program of tests/gpu/pathologies/corpus.json runs under aon-run in each mode
(budgeted, the default, and --mode full); its TRUTH line says what it measured
about itself. The report's first finding must be the planted kind, and state the
planted figure within the tolerance. Every finding of every run must also be
possible: a gain no longer than the run, a per-step gain no longer than a step.
Prints one table (program | variant | mode | planted | first finding | stated vs
truth | result), writes <out>/score.json, and exits 1 unless every row passes.
A program whose framework is not installed is listed as SKIP, not scored.

--corpus picks another corpus of the same form: tests/findings/synthetic_corpus.json
holds the same planted problems on AON's synthetic GPU (examples/synthetic/
pathology.cc), for CI; its entries name a `program` of --bin (with `args`)
instead of a Python `script`, need nothing ("needs": "synthetic"), and a missing
program is a FAIL there, never a SKIP; so is a missing program of the GPU
corpus ("needs": "build": AON's own build has it).

An entry (or one of its variants) may name a `launcher` (["mpirun", "-np", "2"]:
the program runs under it, under aon-run) and `gpus`, the GPUs it needs: on a GPU host with fewer it is a
SKIP that says so (the synthetic GPU has as many as asked). `expect.rank` names
the TRUTH key of the rank the first finding must be about.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "pathologies", "corpus.json")
# A finding may round; a gain stated a few percent over the run is still impossible
# once it is more than this.
SLACK = 1.05


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def have(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def truth_of(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith("TRUTH "):
            return json.loads(line[len("TRUTH "):])
    return None


def stated(finding, figure, unit):
    """The finding's figure in the truth's unit, or None."""
    if finding is None or figure is None:
        return None
    if figure in finding:
        value = finding[figure]
    else:
        value = finding.get("numbers", {}).get(figure)
    if value is None:
        return None
    if figure.endswith("_ns"):
        return value / (1e6 if unit == "ms" else 1e9)
    return value


def impossible(findings, truth):
    """The findings whose numbers the run cannot support. A gain extrapolated from
    a per-step figure is held to the steps (run_s: first step's start to last
    step's end); a whole-run figure (a compilation's gain, a phase's seconds) to
    the program's wall time from its start-up to its TRUTH line (process_s), since
    what happens before the first step, JAX compiling the initialization say, is
    part of the run too."""
    bad = []
    steps_ns = truth.get("run_s", 0) * 1e9
    process_ns = max(steps_ns, truth.get("process_s", 0) * 1e9)
    step_ns = truth.get("step_ms", 0) * 1e6
    for f in findings:
        per_step = f.get("gain_per_step_ns", 0) > 0
        run_ns, what = (steps_ns, "the steps") if per_step else (process_ns, "run")
        if run_ns > 0 and f.get("gain_ns", 0) > SLACK * run_ns:
            bad.append(f"{f['kind']}: gain {f['gain_ns'] / 1e9:.2f} s > {what} {run_ns / 1e9:.2f} s")
        if step_ns > 0 and f.get("gain_per_step_ns", 0) > SLACK * step_ns:
            bad.append(f"{f['kind']}: {f['gain_per_step_ns'] / 1e6:.2f} ms/step > step "
                       f"{step_ns / 1e6:.2f} ms")
        seconds = f.get("numbers", {}).get("seconds")
        if seconds is not None and process_ns > 0 and seconds * 1e9 > SLACK * process_ns:
            bad.append(f"{f['kind']}: {seconds:.2f} s > run {process_ns / 1e9:.2f} s")
    return bad


def verdict_problems(truth, report, mode):
    """A program whose TRUTH names expected_verdicts ({phase: verdict}) gets
    them for its NVTX phases: in --mode full each one exactly; in the budgeted
    mode each one, or no verdict ("too short", "unknown") with the reason
    said, where no capture window's PM samples covered the phase."""
    want = truth.get("expected_verdicts") or {}
    got = {p["name"]: p for p in report.get("counters", {}).get("phases", [])}
    bad = []
    for name, verdict in sorted(want.items()):
        p = got.get(name)
        if p is None:
            bad.append(f"phase {name}: not in the report")
        elif p["verdict"] != verdict and not (
                mode == "budgeted" and p["verdict"] in ("too short", "unknown") and p.get("why")):
            bad.append(f"phase {name}: {p['verdict']}, want {verdict} ({p.get('why', '')})")
    return bad


def score(entry, truth, report, mode="full"):
    """(first finding text, stated vs truth text, PASS/FAIL, why)."""
    expect = entry["expect"]
    findings = report.get("findings", [])
    first = findings[0] if findings else None
    first_text = first["kind"] if first else "(none)"
    problems = impossible(findings, truth) + verdict_problems(truth, report, mode)
    want = expect.get("first")
    if want is None:
        # No planted problem: the first finding is none of the kinds this program
        # must not get, and it claims no sizeable share of the step unless it is a
        # kind the program may rightly get (a one-off start-up compilation).
        allowed = expect.get("allowed", [])
        if first is not None and first["kind"] in expect.get("not_first", []):
            problems.append(f"first finding {first['kind']} on a problem-free program")
        elif first is not None and first["kind"] not in allowed and truth.get("step_ms") and \
                first.get("gain_per_step_ns", 0) > 0.1 * truth["step_ms"] * 1e6:
            problems.append(f"first finding {first['kind']} claims "
                            f"{first['gain_per_step_ns'] / 1e6:.2f} ms/step of a problem-free program")
    elif first is None or first["kind"] != want:
        problems.append(f"first finding {first_text}, want {want}")
    elif expect.get("rank") and first.get("rank") != truth.get(expect["rank"]):
        problems.append(f"first finding about rank {first.get('rank')}, want rank "
                        f"{truth.get(expect['rank'])}")
    about = expect.get("not_about")
    if about:
        for f in findings:
            if f'"{about}"' in f.get("action", "") + f.get("evidence", ""):
                problems.append(f"finding {f['kind']} is about \"{about}\", which has no problem")
    figure_text = "-"
    if expect.get("figure") and expect.get("truth"):
        unit = expect.get("unit", "ms")
        value = stated(first if first and first["kind"] == want else None, expect["figure"], unit)
        true = truth.get(expect["truth"])
        if true is None:
            problems.append(f"the program measured no {expect['truth']}")
        elif value is None:
            figure_text = f"- vs {true:.3g} {unit}"
            problems.append("no figure stated")
        else:
            figure_text = f"{value:.3g} vs {true:.3g} {unit}"
            if abs(value - true) > expect.get("tolerance", 0.25) * true:
                problems.append(f"{expect['figure']} {value:.3g} {unit} is not within "
                                f"{expect.get('tolerance', 0.25):.0%} of {true:.3g}")
    return first_text, figure_text, "FAIL" if problems else "PASS", "; ".join(problems)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True, help="directory of aon-run and aon-report")
    p.add_argument("--out", required=True)
    p.add_argument("--modes", default="budgeted,full")
    p.add_argument("--programs", default="", help="comma-separated names (default: all)")
    p.add_argument("--variants", default="all", help="'all' or comma-separated indexes")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--corpus", default=CORPUS, help="the corpus (default: the GPU programs')")
    args = p.parse_args()
    corpus = json.load(open(args.corpus))
    chosen = set(filter(None, args.programs.split(",")))
    modes = args.modes.split(",")
    os.makedirs(args.out, exist_ok=True)
    available = {}
    gpus = None
    rows, results = [], []

    def record(row):
        """Adds a row, says it, and keeps score.json current (a run cut short keeps its rows)."""
        rows.append(row)
        print(f"{row['program']} v{row['variant']} {row['mode']}: {row['result']} "
              f"(first {row['first']}, {row['figure']}) {row['why']}", flush=True)
        with open(os.path.join(args.out, "score.json"), "w") as f:
            json.dump({"rows": rows, "runs": results}, f, indent=1)
    for entry in corpus:
        if chosen and entry["name"] not in chosen:
            continue
        need = entry.get("needs", "torch")
        if need not in available:
            available[need] = need in ("synthetic", "build") or have(need)
        gpus_short = None
        if need != "synthetic" and entry.get("gpus", 1) > 1:
            if gpus is None:
                gpus = gpu_count()
            if gpus < entry["gpus"]:
                gpus_short = f"needs {entry['gpus']} GPUs, {gpus} here"
        variants = list(enumerate(entry["variants"]))
        if args.variants != "all":
            keep = {int(v) for v in args.variants.split(",")}
            variants = [(i, v) for i, v in variants if i in keep]
        for index, variant in variants:
            for mode in modes:
                row = {"program": entry["name"], "variant": index, "mode": mode,
                       "planted": entry["expect"].get("first") or "(no problem)"}
                if not available[need] or gpus_short:
                    row.update(first="-", figure="-", result="SKIP",
                               why=gpus_short or f"no {need} here")
                    record(row)
                    continue
                job = os.path.join(args.out, f"job-{entry['name']}-v{index}-{mode}")
                shutil.rmtree(job, ignore_errors=True)  # this scorer's own, from a run before
                run = [os.path.join(args.bin, "aon-run")]
                if mode != "budgeted":
                    run += ["--mode", mode]
                run += ["-o", job] + variant.get("launcher", entry.get("launcher", []))
                if "program" in entry:
                    run += [os.path.join(args.bin, entry["program"])] + entry.get("args", [])
                else:
                    run += [sys.executable, os.path.join(ROOT, entry["script"])]
                run += [str(a) for a in variant["args"]]
                log = job + ".log"
                try:
                    done = subprocess.run(run, capture_output=True, text=True, timeout=args.timeout)
                    output = done.stdout + done.stderr
                except subprocess.TimeoutExpired as e:
                    done, output = None, (e.stdout or "") if isinstance(e.stdout, str) else ""
                with open(log, "w") as f:
                    f.write(" ".join(run) + "\n" + output)
                truth = truth_of(output)
                if done is None or done.returncode != 0 or truth is None:
                    why = "timed out" if done is None else (
                        f"exit {done.returncode}" if done.returncode != 0 else "no TRUTH line")
                    row.update(first="-", figure="-", result="FAIL", why=f"{why} (see {log})")
                    record(row)
                    # The log stays on the GPU host with the job dirs: say its end here.
                    print("\n".join("    | " + line for line in output.splitlines()[-25:]),
                          flush=True)
                    continue
                report_json = job + ".report.json"
                rep = subprocess.run([os.path.join(args.bin, "aon-report"), "--json", report_json,
                                      "--no-html", "-q", job], capture_output=True, text=True)
                if rep.returncode != 0 or not os.path.exists(report_json):
                    row.update(first="-", figure="-", result="FAIL",
                               why=f"aon-report exit {rep.returncode}: {rep.stderr.strip()[:200]}")
                    record(row)
                    continue
                report = json.load(open(report_json))
                first, figure, result, why = score(entry, truth, report, mode)
                row.update(first=first, figure=figure, result=result, why=why)
                results.append({"row": row, "truth": truth,
                                "findings": report.get("findings", [])})
                record(row)
    with open(os.path.join(args.out, "score.json"), "w") as f:
        json.dump({"rows": rows, "runs": results}, f, indent=1)
    widths = [18, 2, 8, 16, 18, 24, 6]
    head = ["program", "v", "mode", "planted", "first finding", "stated vs truth", "result"]
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths)))
    for r in rows:
        cells = [r["program"], str(r["variant"]), r["mode"], r["planted"], r["first"], r["figure"],
                 r["result"]]
        print(" | ".join(str(c)[:w].ljust(w) for c, w in zip(cells, widths)))
    for r in rows:
        if r["result"] == "FAIL":
            print(f"  {r['program']} v{r['variant']} {r['mode']}: {r['why']}")
    scored = [r for r in rows if r["result"] != "SKIP"]
    passed = sum(r["result"] == "PASS" for r in scored)
    print(f"score: {passed}/{len(scored)} PASS"
          + (f", {len(rows) - len(scored)} SKIP" if len(rows) != len(scored) else ""))
    return 0 if scored and passed == len(scored) else 1


if __name__ == "__main__":
    sys.exit(main())
