#!/usr/bin/env python3
"""Compares an AON job directory with what the example programs say they did.

usage: check_trace.py cuda|ddp LOG JOB_DIR

LOG holds the program's AON_EXPECT lines; JOB_DIR its rank-*.h5 files and
timeline.h5. Prints one row per rank and exits 1 on any mismatch. Reads the
HDF5 files directly (h5py) so the check does not trust AON's own reader.
"""
import glob
import os
import re
import sys

import h5py
import numpy as np


def strings(f):
    data = f["strings/data"][:].tobytes()
    offsets = f["strings/offsets"][:]
    return [data[o:data.index(b"\0", o)].decode("utf-8", "replace") for o in offsets]


def expectations(log):
    out = {}
    for line in open(log, errors="replace"):
        m = re.search(r"AON_EXPECT (.*)", line)
        if not m:
            continue
        fields = dict(kv.split("=", 1) for kv in m.group(1).split())
        out[int(fields["rank"])] = fields
    return out


def rank_files(job):
    files = {}
    for path in sorted(glob.glob(os.path.join(job, "rank-*.h5"))):
        with h5py.File(path, "r") as f:
            files[int(f["meta"].attrs["rank"])] = path
    return files


# Collective names as NCCL's specialized kernels carry them
# ("ncclDevKernel_AllReduce_Sum_f32_RING_LL"); generic kernels name none.
KERNEL_FUNCS = ("ReduceScatter", "AllReduce", "AllGather", "Broadcast", "SendRecv", "Reduce")


def kernel_func(name):
    for f in KERNEL_FUNCS:
        if re.search(r"_" + f + r"(_|\(|$)", name):
            return f
    return None


def misattributed(ops, names, kname):
    """Operations tied to a kernel that names another collective (a launch
    lent to a neighbouring operation)."""
    bad = []
    for r in ops:
        f = kernel_func(kname.get(int(r["correlation_id"]), ""))
        want = "SendRecv" if names[r["func_id"]] in ("Send", "Recv") else names[r["func_id"]]
        if f is not None and f != want:
            bad.append(r)
    return bad


def rank_notes(path):
    with h5py.File(path, "r") as f:
        notes = f["meta"].attrs.get("notes", "")
    notes = notes.decode() if isinstance(notes, bytes) else str(notes)
    return [n for n in notes.split("\n") if n.strip()]


def timeline_nccl(path):
    """One rank's NCCL records and kernel names from the job's timeline.h5.

    The rank files hold NCCL records as NCCL reported them (streamed by the
    collector); tying them to kernels and calibrating channel times happens in
    the merge, so the NCCL checks read the merged timeline (same correlation
    ids, unified string table)."""
    job = os.path.dirname(path)
    with h5py.File(path, "r") as f:
        rank = int(f["meta"].attrs["rank"])
    with h5py.File(os.path.join(job, "timeline.h5"), "r") as t:
        names = strings(t)
        n = t["records/nccl"][:]
        k = t["records/kernels"][:]
        e = t["records/external_correlation"][:]
        ranks = t["meta/ranks"][:]
    row = ranks[ranks["rank"] == rank]
    fields = row.dtype.names or ()
    pairs = int(row["nccl_gpu_clock_pairs"][0]) if len(row) and "nccl_gpu_clock_pairs" in fields else 0
    spread = int(row["nccl_gpu_clock_spread_ns"][0]) if len(row) and "nccl_gpu_clock_spread_ns" in fields else -1
    return dict(names=names, nccl=n[n["rank"] == rank], kernels=k[k["rank"] == rank],
                ext=e[e["rank"] == rank], clock_pairs=pairs, clock_spread=spread)


def check_cuda(exp, path):
    """Exact counts of the example's own work; NCCL's own kernels/copies counted apart."""
    problems = []
    with h5py.File(path, "r") as f:
        names = strings(f)
        rec = f["records"]
        kernels = rec["kernels"][:]
        own_names = exp["kernel_names"].split(",")
        kname = [names[i] for i in kernels["name_id"]]
        own = sum(1 for n in kname if any(n == k or n.startswith(k + "(") for k in own_names))
        nccl = sum(1 for n in kname if "nccl" in n.lower())
        memcpy = rec["memcpy"][:]
        memset = rec["memset"][:]
        nvtx = rec["nvtx"][:]
        # The example's own copies/memsets: those whose API call (same
        # correlation id) was made inside one of its top-level NVTX ranges
        # (default domain) on the same thread. NCCL's own copies and memsets,
        # made during communicator setup, fall outside them.
        api = rec["api"][:]
        api_by_corr = {int(a["correlation_id"]): a for a in api}
        top = [(int(n["start_ns"]), int(n["end_ns"]), int(n["thread_id"])) for n in nvtx
               if n["domain_id"] == 0 and n["depth"] == 0 and n["type"] == 1]

        def own_work(records, nccl_local=False):
            count = 0
            for r in records:
                # One rank: NCCL's local copies standing for collectives are
                # device-to-device; the example makes none itself (example.cu).
                dtod = ONE_RANK and "copy_kind" in r.dtype.names and int(r["copy_kind"]) == DTOD
                if dtod != nccl_local:
                    continue
                a = api_by_corr.get(int(r["correlation_id"]))
                if a is None:
                    continue
                t, tid = int(a["start_ns"]), int(a["thread_id"])
                count += any(s <= t <= e and tid == th for s, e, th in top)
            return count

        mc = own_work(memcpy)
        # One rank: NCCL's local copies made by the example's collective calls.
        nccl_copies = own_work(memcpy, nccl_local=True) if ONE_RANK else 0
        ms = own_work(memset)
        unmatched = sum(1 for r in list(memcpy) + list(memset) + list(kernels)
                        if int(r["correlation_id"]) not in api_by_corr)
        nv = int((nvtx["domain_id"] == 0).sum())
        meta = f["meta"].attrs
        row = dict(rank=int(meta["rank"]), kernels=own, nccl_kernels=nccl, memcpy=mc, memset=ms,
                   nvtx=nv, api=len(rec["api"]), all_kernels=len(kernels),
                   all_memcpy=len(memcpy), all_memset=len(memset), no_api_record=unmatched,
                   source=meta["source"].decode() if isinstance(meta["source"], bytes) else meta["source"],
                   devices=len(f["meta/devices"]), bytes=os.path.getsize(path))
        if ONE_RANK:
            row.update(nccl_local_copies=nccl_copies)
    if "nccl_ops" in exp:
        row, p = check_nccl(exp, path, row)
        problems += p
    for key, want in (("kernels", "kernels"), ("memcpy", "memcpy"), ("memset", "memset"), ("nvtx", "nvtx")):
        if row[key] != int(exp[want]):
            problems.append(f"{key}: trace {row[key]} != program {exp[want]}")
    if ONE_RANK and "nccl_ops" in exp:
        collectives = sum(int(v) for k, v in (x.split(":") for x in exp["nccl_ops"].split(","))
                          if k not in ("Send", "Recv"))
        if not 0 < row["nccl_local_copies"] <= collectives:
            problems.append(f"one rank: {row['nccl_local_copies']} device-to-device copies for "
                            f"{collectives} collectives (NCCL's local copies: 1..{collectives})")
    elif "nccl_allreduce" in exp and row["nccl_kernels"] < int(exp["nccl_allreduce"]):
        problems.append(f"nccl kernels {row['nccl_kernels']} < all-reduces {exp['nccl_allreduce']}")
    if row["source"] != "cupti":
        problems.append(f"source is {row['source']}, not cupti")
    if row["devices"] < 1:
        problems.append("no GPU in /meta/devices")
    return row, problems


def check_nccl(exp, path, row):
    """Every NCCL operation the program issued is a record, tied to its kernel."""
    problems = []
    t = timeline_nccl(path)
    names, n, kernels = t["names"], t["nccl"], t["kernels"]
    clock_pairs, clock_spread = t["clock_pairs"], t["clock_spread"]
    ext = {int(e["external_id"]): int(e["correlation_id"]) for e in t["ext"]}
    kname = {int(k["correlation_id"]): names[k["name_id"]] for k in kernels}
    all_ops = n[(n["event_type"] == 1) | (n["event_type"] == 2)]
    replays = all_ops[all_ops["graph_replay"] > 0]
    captured_ids = set(int(x) for x in replays["external_id"])
    # Calls the program made: records of replay 0 (a captured call is one of them).
    calls = all_ops[all_ops["graph_replay"] == 0]
    captured = np.isin(calls["external_id"], list(captured_ids)) if captured_ids else np.zeros(len(calls), bool)
    # Operations that ran on the GPU: uncaptured calls, and every graph replay.
    ops = np.concatenate([calls[~captured], replays])
    got = {}
    for r in calls:
        got[names[r["func_id"]]] = got.get(names[r["func_id"]], 0) + 1
    want = {k: int(v) for k, v in (x.split(":") for x in exp["nccl_ops"].split(","))}
    if ONE_RANK:
        # A one-rank communicator's collectives never reach the profiler plugin.
        want = {k: v for k, v in want.items() if k in ("Send", "Recv")}
    if got != want:
        problems.append(f"nccl ops: trace {got} != program {want}")
    if EXPECT_API:
        problems += check_nccl_api(n, names, calls, captured, want, row)
    else:
        # --nccl coll records no API calls.
        n_api = int(np.isin(n["event_type"], [GROUP_API, COLL_API, P2P_API]).sum())
        row.update(nccl_api_calls=n_api)
        if n_api:
            problems.append(f"{n_api} NCCL API records, but this mode records none")
    if "nccl_graph_replays" in exp and not ONE_RANK and len(replays) != int(exp["nccl_graph_replays"]):
        problems.append(f"graph replays: trace {len(replays)} != program {exp['nccl_graph_replays']}")
    # Each captured operation's replays are numbered 1..n, once each.
    for cid in sorted(captured_ids):
        numbers = sorted(int(x) for x in replays[replays["external_id"] == cid]["graph_replay"])
        if numbers != list(range(1, len(numbers) + 1)):
            problems.append(f"captured operation external_id={cid}: replays numbered {numbers}")
    # What the agent saw of NCCL's event order and of CUDA graphs (diagnostics).
    for note in rank_notes(path):
        if note.startswith("NCCL") or "graph" in note:
            print(f"[nccl] rank {row['rank']} note: {note}")
    comms = n[n["event_type"] == 5]
    if len(comms) != int(exp["nccl_comms"]):
        problems.append(f"nccl communicators: trace {len(comms)} != program {exp['nccl_comms']}")
    uncorrelated = [r for r in ops if int(r["correlation_id"]) not in kname
                    or "nccl" not in kname[int(r["correlation_id"])].lower()]
    if uncorrelated:
        problems.append(f"{len(uncorrelated)} of {len(ops)} NCCL operations not tied to an NCCL kernel")
        first = int(all_ops["start_ns"].min())
        for r in uncorrelated[:4]:
            e = int(r["external_id"])
            print(f"[nccl] uncorrelated: {names[r['func_id']]} type={int(r['event_type'])} "
                  f"seq={int(r['seq_number'])} replay={int(r['graph_replay'])} "
                  f"t={(int(r['start_ns']) - first) / 1e6:.3f}ms external_id={e} in_ext_table={e in ext} "
                  f"corr={int(r['correlation_id'])} kernel={kname.get(int(r['correlation_id']))} "
                  f"timing={int(r['gpu_timing'])}")
    wrong = misattributed(ops, names, kname)
    if wrong:
        problems.append(f"{len(wrong)} of {len(ops)} NCCL operations tied to a kernel of another collective")
        for r in wrong[:4]:
            print(f"[nccl] misattributed: {names[r['func_id']]} seq={int(r['seq_number'])} "
                  f"replay={int(r['graph_replay'])} external_id={int(r['external_id'])} "
                  f"kernel={kname.get(int(r['correlation_id']))}")
    # 2 = channel timing calibrated against CUPTI, 4 = the span of its CUPTI kernel.
    untimed = int((~np.isin(ops["gpu_timing"], [2, 4])).sum())
    if untimed:
        problems.append(f"{untimed} NCCL operations without GPU timing")
    bad_span = int(((ops["gpu_start_ns"] > ops["end_ns"]) | (ops["gpu_start_ns"] == 0)).sum())
    if bad_span:
        problems.append(f"{bad_span} NCCL operations with an empty or inverted GPU span")
    row.update(nccl_calls=len(calls), nccl_replays=len(replays), nccl_ran=len(ops),
               nccl_channels=int((n["event_type"] == 3).sum()),
               nccl_correlated=len(ops) - len(uncorrelated),
               nccl_timing="channels" if (ops["gpu_timing"] == 2).any() else "kernel",
               nccl_clock_pairs=clock_pairs, nccl_clock_spread_ns=clock_spread)
    if row["nccl_timing"] == "channels" and clock_pairs == 0:
        problems.append("NCCL channel times not calibrated (0 pairs)")
    return row, problems


# NcclEventType values of the user's NCCL calls and of proxy progress (records.h).
GROUP_API, COLL_API, P2P_API, PROXY_OP, PROXY_STEP = 9, 10, 11, 12, 13
API_GRAPH_CAPTURED = 1  # n_warps flag of API rows


def check_nccl_api(n, names, calls, captured, want, row):
    """The user's NCCL calls (kCollApi/kP2pApi rows): exactly the calls the
    program made, per function, and per communicator and function exactly as
    many as the operations recorded (replay 0); each inside a group-call row
    (kGroupApi) of the same rank; the captured call flagged."""
    problems = []
    api = n[(n["event_type"] == COLL_API) | (n["event_type"] == P2P_API)]
    groups = n[n["event_type"] == GROUP_API]
    got = {}
    for r in api:
        got[names[r["func_id"]]] = got.get(names[r["func_id"]], 0) + 1
    if got != want:
        problems.append(f"nccl API calls: trace {got} != program {want}")
    per_op, per_call = {}, {}
    for r in calls:
        key = (int(r["comm_hash"]), names[r["func_id"]])
        per_op[key] = per_op.get(key, 0) + 1
    for r in api:
        key = (int(r["comm_hash"]), names[r["func_id"]])
        per_call[key] = per_call.get(key, 0) + 1
    if per_op != per_call:
        problems.append(f"nccl API calls per (comm, func) {per_call} != operations {per_op}")
    starts, ends = groups["start_ns"].astype(np.int64), groups["end_ns"].astype(np.int64)
    outside = sum(1 for r in api if not ((starts <= int(r["start_ns"])) & (int(r["end_ns"]) <= ends)).any())
    if outside:
        problems.append(f"{outside} of {len(api)} NCCL API calls not inside a group-call record")
    if len(groups) == 0 or len(groups) > len(api):
        problems.append(f"{len(groups)} group-call records for {len(api)} NCCL API calls")
    bad_span = int((api["end_ns"] < api["start_ns"]).sum() + (groups["end_ns"] < groups["start_ns"]).sum())
    if bad_span:
        problems.append(f"{bad_span} NCCL API records end before they start")
    flagged = int(((api["n_warps"] & API_GRAPH_CAPTURED) != 0).sum())
    if flagged != int(captured.sum()):
        problems.append(f"graph-captured API calls {flagged} != captured operations {int(captured.sum())}")
    # Diagnostic: operations NCCL started (host) inside a group call of the same
    # rank (not all must: NCCL reports some from CUDA's host-callback thread).
    inside = sum(1 for r in calls if ((starts <= int(r["start_ns"])) & (int(r["start_ns"]) <= ends)).any())
    print(f"[nccl] rank {row['rank']}: API calls {got}, group calls {len(groups)}, captured calls "
          f"{flagged}; {inside} of {len(calls)} operations start inside a group call; "
          f"API calls == operations per (comm, func): {per_op == per_call}")
    row.update(nccl_api_calls=len(api), nccl_group_calls=len(groups),
               nccl_proxy_ops=int((n["event_type"] == PROXY_OP).sum()),
               nccl_proxy_steps=int((n["event_type"] == PROXY_STEP).sum()))
    return problems


def check_nccl_identity(job):
    """In the timeline, each collective (comm, seq) appears once on every rank."""
    path = os.path.join(job, "timeline.h5")
    if not os.path.exists(path):
        return []
    with h5py.File(path, "r") as f:
        n = f["records/nccl"][:]
        nranks = len(f["meta/ranks"])
    colls = n[n["event_type"] == 1]
    per_key = {}
    # NCCL numbers collectives per communicator and function.
    for r in colls:
        key = (int(r["comm_hash"]), int(r["func_id"]), int(r["seq_number"]), int(r["graph_replay"]))
        per_key.setdefault(key, []).append(int(r["rank"]))
    bad = [k for k, ranks in per_key.items() if sorted(ranks) != list(range(nranks))]
    print(f"[nccl] timeline: {len(per_key)} collectives, each on all {nranks} ranks: {len(bad) == 0}")
    return [f"{len(bad)} collectives not seen exactly once on every rank"] if bad else []


def check_ddp(exp, path):
    problems = []
    with h5py.File(path, "r") as f:
        names = strings(f)
        nvtx = f["records/nvtx"][:]
        steps = sum(1 for i, d in zip(nvtx["name_id"], nvtx["domain_id"])
                    if d == 0 and re.fullmatch(r"step \d+", names[i]))
        kernels = f["records/kernels"][:]
        nccl = sum(1 for i in kernels["name_id"] if "nccl" in names[i].lower())
        meta = f["meta"].attrs
        row = dict(rank=int(meta["rank"]), step_ranges=steps, kernels=len(kernels), nccl_kernels=nccl,
                   memcpy=len(f["records/memcpy"]), api=len(f["records/api"]), nvtx=len(nvtx),
                   bytes=os.path.getsize(path))
    t = timeline_nccl(path)
    n = t["nccl"]
    kname = {int(k["correlation_id"]): t["names"][k["name_id"]] for k in t["kernels"]}
    names = t["names"]
    ops = n[(n["event_type"] == 1) | (n["event_type"] == 2)]
    correlated = sum(1 for r in ops if "nccl" in kname.get(int(r["correlation_id"]), "").lower())
    for r in [r for r in ops if "nccl" not in kname.get(int(r["correlation_id"]), "").lower()][:3]:
        print(f"[nccl] ddp uncorrelated: {names[r['func_id']]} seq={int(r['seq_number'])} "
              f"t={(int(r['start_ns']) - int(ops['start_ns'].min())) / 1e6:.3f}ms of "
              f"{(int(ops['start_ns'].max()) - int(ops['start_ns'].min())) / 1e6:.3f}ms "
              f"external_id={int(r['external_id'])} corr={int(r['correlation_id'])} "
              f"kernel={kname.get(int(r['correlation_id']))}")
    wrong = misattributed(ops, names, kname)  # diagnostic only: PyTorch groups collectives
    if wrong:
        print(f"[nccl] ddp: {len(wrong)} of {len(ops)} operations tied to a kernel naming another "
              f"collective (expected only for grouped collectives)")
    for note in rank_notes(path):
        if note.startswith("NCCL"):
            print(f"[nccl] ddp rank {row['rank']} note: {note}")
    row.update(nccl_ops=len(ops), nccl_correlated=correlated)
    if ONE_RANK:
        # DDP on one process: its NCCL calls run on a one-rank communicator, which
        # never reaches the profiler plugin and launches no NCCL kernel.
        if len(ops) or nccl:
            print(f"[ddp] one rank, yet {len(ops)} NCCL operations and {nccl} NCCL kernels")
    elif len(ops) == 0:
        problems.append("no NCCL operations recorded (PyTorch's NCCL did not load the plugin?)")
    elif correlated != len(ops):
        problems.append(f"{len(ops) - correlated} of {len(ops)} NCCL operations not tied to a kernel")
    if steps != int(exp["nvtx_step_ranges"]):
        problems.append(f"step ranges: trace {steps} != program {exp['nvtx_step_ranges']}")
    if row["kernels"] == 0 or (nccl == 0 and not ONE_RANK):
        problems.append("no kernels or no NCCL kernels captured")
    return row, problems


def check_timeline(job, rank_rows):
    path = os.path.join(job, "timeline.h5")
    if not os.path.exists(path):
        return ["no timeline.h5"]
    problems = []
    with h5py.File(path, "r") as f:
        ranks = f["meta/ranks"][:]
        kern = f["records/kernels"][:]
        for r in rank_rows:
            n = int((kern["rank"] == r["rank"]).sum())
            want = r.get("all_kernels", r["kernels"])
            if n != want:
                problems.append(f"timeline rank {r['rank']}: {n} kernels != rank file {want}")
        bad = [int(x["rank"]) for x in ranks if int(x["status"]) != 0]
        if bad:
            problems.append(f"timeline marks ranks {bad} as not ok")
        starts = kern["start_ns"]
        if len(starts) > 1 and (starts[1:] < starts[:-1]).any():
            problems.append("timeline kernels not time-ordered")
    return problems


EXPECT_API = False  # --nccl-api: the run used a mode that records NCCL API calls (not coll)
ONE_RANK = False    # the job ran one rank (a one-GPU machine)
DTOD = 8            # CUpti_ActivityMemcpyKind: device to device

NEEDS_TWO = ("one rank: NCCL runs a one-rank communicator's collectives as local device copies "
             "without calling its profiler plugin, so this run checks the program's own kernels, "
             "copies, memsets and NVTX ranges exactly, the Send/Recv records and their kernels, "
             "and NCCL's local copies; collective records, their kernels and timing, CUDA-graph "
             "replays of NCCL and cross-rank matching need two GPUs")


def main():
    global EXPECT_API, ONE_RANK
    mode, log, job = sys.argv[1:4]
    EXPECT_API = "--nccl-api" in sys.argv[4:]
    exp = expectations(log)
    ONE_RANK = len(exp) == 1
    if ONE_RANK:
        print(f"[{mode}] {NEEDS_TWO}")
    files = rank_files(job)
    check = check_cuda if mode == "cuda" else check_ddp
    problems, rows = [], []
    if not exp:
        problems.append(f"no AON_EXPECT lines in {log}")
    for rank, e in sorted(exp.items()):
        if rank not in files:
            problems.append(f"rank {rank}: no rank file in {job}")
            continue
        row, p = check(e, files[rank])
        rows.append(row)
        problems += [f"rank {rank}: {x}" for x in p]
    problems += check_timeline(job, rows)
    # Every collective once on every rank (DDP: PyTorch's own NCCL 2.28.9).
    problems += check_nccl_identity(job)
    for row in rows:
        print(f"[{mode}] " + " ".join(f"{k}={v}" for k, v in row.items()))
    for p in problems:
        print(f"[{mode}] FAIL {p}")
    print(f"[{mode}] {'PASS' if not problems else 'FAIL'}: {len(rows)} ranks checked")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
