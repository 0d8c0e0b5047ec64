#!/usr/bin/env python3
"""Every part of AON may include only the parts its README allows, and no two files of one
part include each other's headers, directly or around a circle.

    layering_test.py [REPO_ROOT]     check REPO_ROOT (default: this script's repository)
    layering_test.py --self-test     check that planted violations are found

A part is a top-level folder whose README.md has a line

    **May depend on:** format, base; outside AON: HDF5, ...

The comma-separated names before the first ';' (or the end of the line; "nothing" for none)
are the parts it may include. What is checked, in every .h/.cc/.c/.cu file of a part:
  1. `#include "aon/<sub>/x.h"` belongs to the part whose include/aon/<sub>/ holds it, and
     `#include "aon/x.h"` to the part whose include/aon/ holds it: that part must be the
     includer's own or one it may depend on;
  2. a quoted include that is not under aon/ resolves inside the includer's own part (no
     "../../other/src/x.h");
  3. no part's CMakeLists.txt adds another part's folder as an include directory (the
     workaround that hides an arrow from rule 1);
  4. inside a part, files are grouped into units by stem (`src/x.cc`, `src/x.h` and
     `include/aon/<sub>/x.h` are the unit x); a unit including another unit's header is an
     arrow, and the arrows must not close a circle: a circle is two units that need each other,
     which one should not. Circles known and not yet cut are listed, each with its issue, in
     layering_known_circles.txt beside this script; a listed circle that is gone fails too, so
     the list only shrinks.
tests/, bench/, examples/, docs/ and scripts/ are not parts: they may include everything.
"""
import os
import re
import sys
import tempfile

MARKER = '**May depend on:**'
SOURCE_EXT = ('.h', '.hpp', '.cc', '.c', '.cu')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return f.read()


def parts_of(root):
    """{part: set of parts it may depend on} from the READMEs; problems for bad lines."""
    parts, problems = {}, []
    for name in sorted(os.listdir(root)):
        readme = os.path.join(root, name, 'README.md')
        if name.startswith('.') or not os.path.isfile(readme):
            continue
        lines = [l for l in read(readme).splitlines() if MARKER in l]
        if not lines:
            continue
        if len(lines) > 1:
            problems.append(f'{name}/README.md: {MARKER} appears {len(lines)} times; say it once')
        allowed_text = lines[0].split(MARKER, 1)[1].split(';', 1)[0].strip().rstrip('.')
        allowed = set()
        if allowed_text.lower() not in ('nothing of aon', 'nothing', '-', ''):
            allowed = {w.strip().strip('`') for w in allowed_text.split(',') if w.strip()}
        parts[name] = allowed
    for name, allowed in parts.items():
        for dep in sorted(allowed - set(parts)):
            problems.append(f'{name}/README.md: may depend on "{dep}", which is not a part '
                            f'(parts: {", ".join(sorted(parts))})')
    return parts, problems


def owner_of(root, parts, include):
    """The part that provides an "aon/..." include, or None."""
    rest = include[len('aon/'):]
    for part in parts:
        if os.path.isfile(os.path.join(root, part, 'include', 'aon', rest)):
            return part
    return None


def unit_of(relpath):
    """src/x.cc, src/x.h, include/aon/<sub>/x.h, tools/x.cc -> a unit name inside the part."""
    stem = os.path.splitext(relpath)[0]
    parts = stem.split('/')
    if parts[0] == 'include':
        return parts[-1]
    if parts[0] == 'src':
        return '/'.join(parts[1:])
    return stem


def find_cycles(edges):
    """Strongly connected components of more than one unit (Tarjan, iterative)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]
    nodes = set(edges) | {m for vs in edges.values() for m in vs}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    result.append(sorted(comp))
    return result


def known_circles(path):
    """{(part, (units...))} from a list of known circles; missing file = none."""
    known = set()
    if not os.path.isfile(path):
        return known
    for raw in read(path).splitlines():
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        part, units = line.split(':', 1)
        known.add((part.strip(), tuple(sorted(units.split()))))
    return known


def check(root, known=frozenset()):
    parts, problems = parts_of(root)
    seen = set()
    if not parts:
        return [f'{root}: no part has a README with {MARKER}']
    for part, allowed in sorted(parts.items()):
        part_dir = os.path.join(root, part)
        edges = {}
        for dirpath, dirnames, filenames in os.walk(part_dir):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith('.'))
            for fname in sorted(filenames):
                path = os.path.join(dirpath, fname)
                rel = os.path.relpath(path, part_dir)
                if fname == 'CMakeLists.txt':
                    for m in re.finditer(r'\$\{PROJECT_SOURCE_DIR\}/([A-Za-z0-9_]+)', read(path)):
                        if m.group(1) in parts and m.group(1) != part:
                            problems.append(f'{part}/{rel}: names {m.group(1)}/ as a path; link '
                                            f'aon::{m.group(1)} instead (or move the code)')
                    continue
                if not fname.endswith(SOURCE_EXT):
                    continue
                unit = unit_of(rel)
                text = read(path)
                for m in INCLUDE_RE.finditer(text):
                    inc = m.group(1)
                    line = text.count('\n', 0, m.start()) + 1
                    where = f'{part}/{rel}:{line}'
                    if inc.startswith('aon/'):
                        owner = owner_of(root, parts, inc)
                        if owner is None:
                            problems.append(f'{where}: includes "{inc}", which no part provides')
                            continue
                        if owner != part:
                            if owner not in allowed:
                                problems.append(
                                    f'{where}: includes "{inc}" of {owner}/, but {part}/README.md '
                                    f'allows only: {", ".join(sorted(allowed)) or "nothing"}')
                            continue
                        target = os.path.join('include', inc)
                    else:
                        candidates = [os.path.normpath(os.path.join(os.path.dirname(rel), inc)),
                                      os.path.normpath(os.path.join('src', inc))]
                        target = next((c for c in candidates
                                       if not c.startswith('..') and
                                       os.path.isfile(os.path.join(part_dir, c))), None)
                        if target is None:
                            outside = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                            if os.path.isfile(outside):
                                problems.append(f'{where}: includes "{inc}", a file outside '
                                                f'{part}/; include it through its part\'s aon/ name')
                            continue  # a system or generated header
                    other = unit_of(target)
                    if other != unit:
                        edges.setdefault(unit, set()).add(other)
        for comp in find_cycles(edges):
            if (part, tuple(comp)) in known:
                seen.add((part, tuple(comp)))
                continue
            arrows = [f'{a} -> {b}' for a in comp for b in sorted(edges.get(a, ())) if b in comp]
            problems.append(f'{part}/: these units include each other ({", ".join(arrows)}); '
                            f'move what both need below them, or pass it in')
    for part, units in sorted(set(known) - seen):
        problems.append(f'{part}: the known circle of {" ".join(units)} is gone (or changed); '
                        f'delete or correct its line in layering_known_circles.txt')
    return problems


def self_test():
    """Plants each kind of violation in a small tree; each must be found, a clean tree passes."""
    def write(root, rel, text):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)

    def tree(root):
        write(root, 'base/README.md', '**May depend on:** nothing of AON; outside AON: libc.\n')
        write(root, 'base/include/aon/base/status.h', '#pragma once\n')
        write(root, 'format/README.md', '**May depend on:** base; outside AON: HDF5.\n')
        write(root, 'format/include/aon/format/records.h', '#include "aon/base/status.h"\n')
        write(root, 'format/src/records.cc', '#include "aon/format/records.h"\n#include "codec.h"\n')
        write(root, 'format/src/codec.h', '#pragma once\n')
        write(root, 'format/CMakeLists.txt', 'add_library(aon_format src/records.cc)\n')

    failures = []
    cases = {
        'clean': (lambda r: None, None),
        'upward include': (lambda r: write(r, 'base/src/status.cc', '#include "aon/format/records.h"\n'),
                           'includes "aon/format/records.h" of format/'),
        'unknown part': (lambda r: write(r, 'base/README.md', '**May depend on:** common.\n'),
                         '"common", which is not a part'),
        'reach into files': (lambda r: write(r, 'base/src/x.cc', '#include "../../format/src/codec.h"\n'),
                             'a file outside base/'),
        'include dir workaround': (lambda r: write(r, 'base/CMakeLists.txt',
                                                   'target_include_directories(x ${PROJECT_SOURCE_DIR}/format/src)\n'),
                                   'names format/ as a path'),
        'circle': (lambda r: write(r, 'format/src/codec.cc', '#include "aon/format/records.h"\n') or
                   write(r, 'format/include/aon/format/records.h', '#include "codec.h"\n'),
                   'include each other'),
        'known circle listed': (lambda r: write(r, 'format/src/codec.cc', '#include "aon/format/records.h"\n') or
                                write(r, 'format/include/aon/format/records.h', '#include "codec.h"\n'),
                                None, {('format', ('codec', 'records'))}),
        'known circle gone': (lambda r: None, 'is gone', {('format', ('codec', 'records'))}),
        'missing header': (lambda r: write(r, 'format/src/y.cc', '#include "aon/format/nothere.h"\n'),
                           'which no part provides'),
    }
    for name, case in cases.items():
        plant, expected = case[0], case[1]
        known = case[2] if len(case) > 2 else set()
        with tempfile.TemporaryDirectory() as root:
            tree(root)
            plant(root)
            found = check(root, known)
            if expected is None and found:
                failures.append(f'{name}: a clean tree was refused: {found}')
            elif expected is not None and not any(expected in p for p in found):
                failures.append(f'{name}: not found (expected "{expected}", got {found})')
    for f in failures:
        print('layering self-test:', f)
    print(f'layering self-test: {len(cases) - len(failures)} of {len(cases)} cases as expected')
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')
    known = known_circles(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       'layering_known_circles.txt'))
    problems = check(os.path.abspath(root), known)
    for p in problems:
        print(p)
    if problems:
        print(f'layering_test: {len(problems)} problem(s). Each part may include only what its '
              f'README\'s "{MARKER}" line names (README.md, "Layout").')
        return 1
    parts, _ = parts_of(os.path.abspath(root))
    print(f'layering_test: {len(parts)} parts, every include as their READMEs allow, '
          f'no circle but the {len(known)} listed in layering_known_circles.txt')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
