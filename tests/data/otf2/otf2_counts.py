#!/usr/bin/env python3
"""Reads an OTF2 archive with otf2-print (Debian's otf2-tools) and checks it.

usage: otf2_counts.py ARCHIVE/traces.otf2 [OTF2_PRINT]

Prints "key<TAB>value" lines: every ENTER counted per (rank, AON record kind)
("count/<rank>/<kind>"), every calling-context sample per (rank, stack read
back from the calling-context definitions, hex: "sample_stack/<rank>/<hex>")
("count/<rank>/<kind>": the region's description is the record kind; METRIC
events are "counters"), the problems found ("problem/<name>" and their sum
"problems": otf2-print failing or warning, a LEAVE that does not match its
ENTER, a location left with open regions, time going backwards on a location,
a location whose events differ from its definition's count, an event on an
undefined region or location, a collective event outside a region, nested in
another collective or on a location that is not a member of its communicator),
and the archive's structure: ranks, hosts,
locations, communicators with their members, collective events by operation.
Used by tests/unit/merge/otf2_trace_test.cc, the Slurm tests and tests/gpu.
"""
import collections
import re
import subprocess
import sys

archive = sys.argv[1]
tool = sys.argv[2] if len(sys.argv) > 2 else "otf2-print"
problems = collections.Counter()
errors = []


def run(args):
    p = subprocess.run([tool] + args + [archive], capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        problems["otf2_print_failed"] += 1
    if p.stderr.strip():
        problems["otf2_print_stderr"] += 1
        errors.append(" | ".join(p.stderr.strip().splitlines()[:3]))
    return p.stdout.splitlines()


KIND = {"kernel": "kernels", "cuda_runtime": "api", "cuda_driver": "api"}
group_rank, group_name, loc_group, loc_events, loc_type, region_kind = {}, {}, {}, {}, {}, {}
hosts, comms, comm_group, group_members = [], {}, {}, {}
region_name, code_location, context = {}, {}, {}
for line in run(["-G"]):
    m = re.match(r'REGION\s+(\d+)\s+Name: "(.*)" <\d+> \(Aka\.', line)
    if m:
        region_name[m[1]] = m[2]
    m = re.match(r'SOURCE_CODE_LOCATION\s+(\d+)\s+File: "(.*)" <\d+>, Line Number: (\d+)$', line)
    if m:
        code_location[m[1]] = (m[2], int(m[3]))
        continue
    m = re.match(r'CALLING_CONTEXT\s+(\d+)\s+Region: ".*" <(\d+)>, Source code location: '
                 r'(?:UNDEFINED|".*" <(\d+)>), Parent: (?:UNDEFINED|".*" <(\d+)>)$', line)
    if m:
        context[m[1]] = (m[2], m[3], m[4])
        continue
    m = re.match(r'LOCATION_GROUP\s+(\d+)\s+Name: "rank (\d+)', line)
    if m:
        group_rank[m[1]] = int(m[2])
        continue
    m = re.match(r'LOCATION\s+(\d+)\s+Name: ".*" <\d+>, Type: (\w+), # Events: (\d+), Group: ".*" <(\d+)>$', line)
    if m:
        loc_type[m[1]], loc_events[m[1]], loc_group[m[1]] = m[2], int(m[3]), m[4]
        continue
    m = re.match(r'REGION\s+(\d+)\s+Name: .*, Descr\.: "([^"]*)" <\d+>, Role: ', line)
    if m:
        d = m[2]
        region_kind[m[1]] = "nvtx" if d.startswith(("nvtx:", "compile:")) else KIND.get(d, d)
        continue
    m = re.match(r'SYSTEM_TREE_NODE\s+\d+\s+Name: "([^"]*)" <\d+>, Class: "node"', line)
    if m:
        hosts.append(m[1])
        continue
    m = re.match(r'GROUP\s+(\d+)\s+Name: .*Type: COMM_GROUP, .*?(\d+) Members?: (.*)$', line)
    if m:
        # each member: its index in the COMM_LOCATIONS group, then ("name" <location>)
        group_members[m[1]] = [x for x in re.findall(r'\(".*?" <(\d+)>\)', m[3])]
        continue
    m = re.match(r'COMM\s+(\d+)\s+Name: ".*" <\d+>, Group: ".*" <(\d+)>', line)
    if m:
        comm_group[m[1]] = m[2]



def context_stack(ctx):
    """A calling context as the host sample's stack text (docs/host-sampling.md):
    frames outermost first, one per line; a frame with a source code location
    reads "function (file:line)"."""
    frames = []
    while ctx is not None:
        if ctx not in context or context[ctx][0] not in region_name:
            problems["undefined_calling_context"] += 1
            return None
        region, where, parent = context[ctx]
        name = region_name[region]
        if where is not None:
            if where not in code_location:
                problems["undefined_source_code_location"] += 1
                return None
            f, n = code_location[where]
            name = "%s (%s%s)" % (name, f, ":%d" % n if n else "")
        frames.append(name)
        ctx = parent
    return "\n".join(reversed(frames))


counts = collections.Counter()
samples = collections.Counter()
per_loc = collections.Counter()
stacks = collections.defaultdict(list)
last_ts = {}
collectives = collections.Counter()
in_collective = collections.defaultdict(bool)
for line in run([]):
    m = re.match(r'([A-Z_]+)\s+(\d+)\s+(\d+)\s*(.*)$', line)
    if not m:
        continue
    ev, loc, ts, rest = m[1], m[2], int(m[3]), m[4]
    if loc not in loc_group:
        problems["undefined_location"] += 1
        continue
    per_loc[loc] += 1
    if ts < last_ts.get(loc, 0):
        problems["time_backwards"] += 1
    last_ts[loc] = ts
    rank = group_rank.get(loc_group[loc])
    if rank is None:
        # an accelerator group: "rank R ... GPU d" also starts with the rank
        problems["location_without_rank"] += 1
        continue
    if ev in ("ENTER", "LEAVE"):
        r = re.search(r'Region: ".*" <(\d+)>$', rest)
        if not r or r[1] not in region_kind:
            problems["undefined_region"] += 1
            continue
        if ev == "ENTER":
            stacks[loc].append(r[1])
            counts[(rank, region_kind[r[1]])] += 1
        elif not stacks[loc] or stacks[loc].pop() != r[1]:
            problems["leave_without_enter"] += 1
    elif ev == "METRIC":
        counts[(rank, "counters")] += 1
    elif ev == "CALLING_CONTEXT_SAMPLE":
        c = re.search(r'Calling Context: ".*" <(\d+)>, Unwind Distance: (\d+)', rest)
        stack = context_stack(c[1]) if c else None
        if stack is not None:
            samples[(rank, stack)] += 1
    elif ev == "MPI_COLLECTIVE_BEGIN":
        collectives["begin"] += 1
        if not stacks[loc]:
            problems["collective_outside_a_region"] += 1
        if in_collective[loc]:
            problems["nested_collective"] += 1
        in_collective[loc] = True
    elif ev == "MPI_COLLECTIVE_END":
        in_collective[loc] = False
        op = re.search(r'Operation: (\w+), Communicator: ".*" <(\d+)>', rest)
        if not op or op[2] not in comm_group:
            problems["collective_on_undefined_comm"] += 1
            continue
        if loc not in group_members.get(comm_group[op[2]], []):
            problems["collective_on_a_location_outside_its_communicator"] += 1
        collectives["end"] += 1
        collectives["op/" + op[1]] += 1
    else:
        collectives["other/" + ev] += 1
problems["open_regions_at_end"] += sum(1 for s in stacks.values() if s)
problems["events_differ_from_definition"] += sum(
    1 for loc, n in loc_events.items() if per_loc[loc] != n)

for (rank, kind), n in sorted(counts.items()):
    print("count/%d/%s\t%d" % (rank, kind, n))
for (rank, stack), n in sorted(samples.items()):
    print("sample_stack/%d/%s\t%d" % (rank, stack.encode("utf-8", "replace").hex(), n))
for k, n in sorted(problems.items()):
    print("problem/%s\t%d" % (k, n))
for kind, n in sorted(collections.Counter(region_kind.values()).items()):
    print("regiondefs/%s\t%d" % (kind, n))
print("problems\t%d" % sum(problems.values()))
for e in errors:
    print("problem/otf2_print_says\t" + e.replace("\t", " "))
print("ranks\t" + ",".join(str(r) for r in sorted(set(group_rank.values()))))
print("hosts\t" + ",".join(sorted(hosts)))
print("locations\t%d" % len(loc_group))
print("events\t%d" % sum(per_loc.values()))
print("location_types\t" + ",".join("%s=%d" % kv for kv in sorted(collections.Counter(loc_type.values()).items())))
print("comms\t%d" % len(comm_group))
for c, g in sorted(comm_group.items()):
    print("comm/%s/members\t%d" % (c, len(group_members.get(g, []))))
for k, n in sorted(collectives.items()):
    print("collective/%s\t%d" % (k, n))
