#!/usr/bin/env python3
"""Sorts a fuzzer finding into a known libhdf5 bug or a finding of ours.

    triage.py KNOWN_BUGS REPORT

REPORT is the output of the libFuzzer process that found the reproducer: the
sanitizer's (or libFuzzer's) report.
KNOWN_BUGS (libhdf5_known_bugs.txt) lists crashes that happen inside libhdf5 on
crafted files, where nothing our reader could check first would refuse the file.
A report matches an entry when:
  * its error kind is one of the entry's kinds;
  * the frames between the fault and the first frame of AON's code (an aon::
    function or the fuzz target) are libhdf5's, or the C library's and the
    sanitizer runtime's, with at least one of libhdf5;
  * the entry's libhdf5 functions appear among those frames, innermost first.
A report that ends nowhere in AON's code, or that has AON frames inside, is
never known. Prints "known: <kind> in <functions>" and the entry's explanation
(exit 0), or "finding: <why>" (exit 1).
"""
import re
import sys

FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ (?:in (?P<fn>.+?) )?(?P<where>\(.*\)|/\S+)\s*$")
KIND = re.compile(r"ERROR: (?:AddressSanitizer|LeakSanitizer|libFuzzer): ([\w-]+)")


def parse_report(text):
    """Error kind and the frames of the first stack: (function, where)."""
    m = KIND.search(text)
    if m:
        kind = m.group(1)
    elif "runtime error:" in text:
        kind = "undefined-behavior"
    else:
        kind = "unknown"
    frames, started = [], False
    for line in text.splitlines():
        f = FRAME.match(line)
        if f:
            number = int(f.group(1))
            if started and number == 0:
                break  # the next stack (allocation, free): not the fault's
            started = True
            frames.append((f.group("fn") or "", f.group("where")))
        elif started and line.strip() == "":
            break
    return kind, frames


def is_ours(fn):
    return fn.startswith("aon::") or "LLVMFuzzerTestOneInput" in fn


def is_hdf5(where):
    return "libhdf5" in where


def load_known(path):
    """Entries: (kinds, functions, the comment above the entry)."""
    entries, why = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                why = []
            elif line.startswith("#"):
                why.append(line.lstrip("# "))
            else:
                kinds, functions = (part.strip() for part in line.split("|", 1))
                entries.append(({k.strip() for k in kinds.split(",")},
                                [fn.strip() for fn in functions.split("<")], " ".join(why)))
                why = []
    return entries


def hdf5_part(frames):
    """The frames from the fault up to AON's code, if they are libhdf5's."""
    for i, (fn, _) in enumerate(frames):
        if is_ours(fn):
            inner = frames[:i]
            break
    else:
        return None, "the stack never reaches AON's code"
    if not any(is_hdf5(where) for _, where in inner):
        return None, "the fault is in AON's code, not in libhdf5"
    # Past the sanitizer's and libFuzzer's own frames (an out-of-memory or a
    # timeout is reported from inside them), only libhdf5 and the C library.
    for fn, where in inner:
        if not (is_hdf5(where) or "libc.so" in where or "libz.so" in where or
                fn.startswith(("__interceptor_", "__sanitizer", "__asan", "__lsan", "fuzzer::",
                               "__mem", "mem", "str", "malloc", "calloc", "realloc", "free",
                               "operator new", "__libc"))):
            return None, "frame '%s %s' between libhdf5 and AON's code" % (fn, where)
    return [fn for fn, where in inner if is_hdf5(where) and fn], ""


def main():
    known = load_known(sys.argv[1])
    with open(sys.argv[2], errors="replace") as f:
        kind, frames = parse_report(f.read())
    if kind == "unknown" and not frames:
        # The process died without a report: killed from outside (the
        # machine's OOM killer), or libFuzzer's own limits; REPORT has the rest.
        print("finding: no sanitizer report (see the report file)")
        return 1
    functions, why = hdf5_part(frames)
    if functions is None:
        print("finding: %s (%s)" % (kind, why))
        return 1
    for kinds, wanted, reason in known:
        if kind not in kinds:
            continue
        at = 0
        for fn in functions:
            if at < len(wanted) and fn == wanted[at]:
                at += 1
        if at == len(wanted):
            print("known: %s in %s\n  %s" % (kind, " < ".join(wanted), reason))
            return 0
    print("finding: %s inside libhdf5 (%s), not a known libhdf5 bug" %
          (kind, " < ".join(functions[:6])))
    return 1


if __name__ == "__main__":
    sys.exit(main())
