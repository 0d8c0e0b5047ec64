"""Reads a merged AON job (timeline.h5) into tables (docs/pytorch.md).

    tables = aon.load("aon-12345")          # or the timeline.h5 path
    tables["kernels"]                        # pandas.DataFrame, or numpy
    tables.kernels.groupby("module")...      # when pandas is installed

One table per record kind of the timeline (kernels, memcpy, memset, sync, api,
nvtx, nccl, steps, counters, ops, external_correlation, ...) plus "ranks" and
"devices". Every table has a `rank` and a `host` column; string ids are
resolved into a column named without "_id" (name_id -> name); enum fields get
a "<field>_name" column; flag fields a boolean column per bit, named after it
(steps: `captured`, `window_tail`, `on_demand`; memcpy/memset: `async`;
host_samples: `python`, `truncated`, `partial`; with pandas, `steps.flags` is
DataFrame's own attribute: read the bits that way, or `steps["flags"]`); times (*_ns) are on the job's clock, as the merge put
them. Attribution (PyTorch runs, format 1.8): `kernels`, `memcpy` and `memset`
get `op_id`, `op` (the innermost operator or range that launched them; 0 / ""
when none), `module` (the nn.Module path of that op, for backward ops the
module of the forward op with the same sequence number) and `phase` (forward,
backward, optimizer or other); `ops` gets `module` and `phase` too.

XLA (JAX) runs (docs/jax.md): `kernels`, `memcpy` and `memset` get `hlo_op`
(the HLO instruction whose thunk launched them), `jax_op` (the JAX operation
XLA names for it, "jit(step)/transpose(jvp())/dot_general") and `hlo_module`
(the XLA module executing), from the NVTX ranges XLA's GPU runtime emits
around each thunk and each execution, on the thread that made the launch
call; "" when none.

Every table with start_ns and end_ns also gets `duration_ns`, and every table
with start_ns gets `t`: seconds from the job's start (the merge's start_ns).
The result's `meta` is the job's metadata (job_id, world_size, source,
start_ns, end_ns, records and drops per kind, ...), and its repr lists the
tables and their rows.

Tables are pandas DataFrames when pandas can be imported, else numpy
structured arrays (string columns of dtype object). In DataFrames a field's
value that means none or unknown (the "none" column of the format's tables in
docs/trace-format.md: -1 for a root rank, 0 for no parent op, UINT32_MAX for
no stream, ...; `aon._schema.NONE`) is NA, in a nullable integer column of the
field's width (pandas' UInt32, Int64, ...) or NaN for floats; numpy arrays keep
the stored values.
"""
import os
import re

import numpy as np

from aon import _schema

_OP_OPERATOR, _OP_BACKWARD, _OP_MODULE, _OP_USER = 0, 1, 2, 3
_CUSTOM0 = 3  # CUpti_ExternalCorrelationKind of AON's framework ops


class Tables(dict):
    """A dict of tables that also reads as attributes (tables.kernels); `meta`
    holds the job's metadata."""

    meta = {}

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        job = self.meta.get("job_id", "")
        rows = ", ".join("%s %d" % (name, len(t)) for name, t in sorted(self.items()) if len(t))
        return "<aon job %r: %s ranks; rows: %s>" % (job, self.meta.get("world_size", "?"),
                                                    rows or "none")


def _kind_names(kinds):
    """The table names `kinds` asks for: one name or an iterable of them,
    each a table of the format (or ranks, devices); anything else is refused
    by name."""
    if kinds is None:
        return None
    if isinstance(kinds, (str, bytes)):
        kinds = [kinds]
    try:
        names = [k.decode() if isinstance(k, bytes) else k for k in kinds]
    except TypeError:
        raise TypeError("aon.load: kinds must be a table name or a list of them, not %r"
                        % (kinds,)) from None
    known = set(getattr(_schema, "TABLES", [])) | {"ranks", "devices"}
    for k in names:
        if not isinstance(k, str) or (known and k not in known):
            raise ValueError("aon.load: unknown kind %r (known: %s)"
                             % (k, ", ".join(sorted(known))))
    return set(names)


def _meta(f):
    out = {}
    for key, value in f["meta"].attrs.items() if "meta" in f else []:
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif hasattr(value, "item") and getattr(value, "shape", None) == ():
            value = value.item()
        out[key] = value
    return out


def _times(cols, start):
    """duration_ns and t (seconds from the job's start) where a table has the times."""
    if "start_ns" not in cols:
        return
    s = cols["start_ns"]
    if "end_ns" in cols:
        cols["duration_ns"] = np.where(cols["end_ns"] >= s, cols["end_ns"] - s, 0).astype(np.uint64)
    cols["t"] = (s.astype(np.float64) - float(start)) / 1e9


def _strings(f):
    data = f["strings/data"][:].tobytes()
    offsets = f["strings/offsets"][:]
    out = []
    for o in offsets:
        o = int(o)
        end = data.find(b"\0", o)
        out.append(data[o:end if end >= 0 else len(data)].decode("utf-8", "replace"))
    return out


def _columns(name, rows, strings, hosts):
    cols = {}
    for field in rows.dtype.names:
        cols[field] = rows[field]
    for field in _schema.STRING_FIELDS.get(name, []):
        if field in cols:
            label = field[:-3] if field.endswith("_id") else field + "_text"
            cols[label] = np.array([strings[i] if i < len(strings) else "" for i in rows[field]],
                                   dtype=object)
    for field, values in _schema.ENUMS.get(name, {}).items():
        if field in cols:
            cols[field + "_name"] = np.array([values.get(int(v), str(int(v))) for v in rows[field]],
                                             dtype=object)
    # A boolean column per flag bit, named after it (steps: captured,
    # window_tail, on_demand; copies: async; host samples: python, ...): with
    # pandas, `steps.flags` is DataFrame.flags, `steps.captured` the column.
    for field, bits in getattr(_schema, "FLAGS", {}).get(name, {}).items():
        if field not in cols:
            continue
        for bit, bit_name in sorted(bits.items()):
            label = re.sub(r"[^a-z0-9_]", "_", bit_name.lower())
            if label and label not in cols:
                cols[label] = (np.asarray(rows[field]).astype(np.uint64) & np.uint64(bit)) != 0
    if "rank" in cols and hosts is not None:
        cols["host"] = np.array([hosts.get(int(r), "") for r in rows["rank"]], dtype=object)
    return cols


def _attribute(t):
    """Ties kernels, copies and memsets to ops, and ops to modules and phases."""
    ops = t.get("ops")
    if ops is None or len(ops["op_id"]) == 0:
        return
    n = len(ops["op_id"])
    key = {(int(r), int(i)): k for k, (r, i) in enumerate(zip(ops["rank"], ops["op_id"]))}
    parent = np.array([key.get((int(r), int(p)), -1) for r, p in zip(ops["rank"], ops["parent_id"])])
    kind = ops["kind"].astype(int)
    names = ops["name"]
    # The nearest module above each op (itself for a module), and the phase.
    module = np.empty(n, dtype=object)
    phase = np.empty(n, dtype=object)
    order = np.argsort(ops["start_ns"], kind="stable")  # parents begin before children
    for k in order:
        p = parent[k]
        if kind[k] == _OP_MODULE:
            module[k] = names[k]
        else:
            module[k] = module[p] if p >= 0 else ""
        if kind[k] == _OP_BACKWARD:
            phase[k] = "backward"
        elif p >= 0 and phase[p] in ("backward", "optimizer"):
            phase[k] = phase[p]
        elif kind[k] == _OP_USER and str(names[k]).startswith("Optimizer."):
            phase[k] = "optimizer"  # PyTorch's own "Optimizer.step#AdamW.step" range
        elif module[k]:
            phase[k] = "forward"
        else:
            phase[k] = phase[p] if p >= 0 else "other"
    # Backward ops take the module of the forward op with their sequence number
    # (same rank; the forward op's thread is the backward op's forward thread).
    fwd = {}
    for k in order:
        if kind[k] == _OP_OPERATOR and int(ops["sequence_nr"][k]) >= 0 and module[k]:
            fwd[(int(ops["rank"][k]), int(ops["framework_thread"][k]),
                 int(ops["sequence_nr"][k]))] = module[k]
    for k in order:
        if kind[k] == _OP_BACKWARD:
            m = fwd.get((int(ops["rank"][k]), int(ops["forward_thread"][k]),
                         int(ops["sequence_nr"][k])))
            if m is None:  # forward thread unknown: any forward thread of the rank
                for (r, _, s), mod in fwd.items():
                    if r == int(ops["rank"][k]) and s == int(ops["sequence_nr"][k]):
                        m = mod
                        break
            module[k] = m or ""
        elif phase[k] == "backward" and parent[k] >= 0:
            module[k] = module[parent[k]]
    ops["module"] = module
    ops["phase"] = phase
    ext = t.get("external_correlation")
    links = {}
    if ext is not None:
        for r, c, e, kd in zip(ext["rank"], ext["correlation_id"], ext["external_id"],
                               ext["external_kind"]):
            if int(kd) == _CUSTOM0:
                links[(int(r), int(c))] = key.get((int(r), int(e)), -1)
    # Kernels replayed from a CUDA graph: the op open when their node was
    # captured (graph_ops, format 1.13), before the op that launched the graph.
    nodes = {}
    g = t.get("graph_ops")
    if g is not None:
        for r, n, o in zip(g["rank"], g["node_id"], g["op_id"]):
            nodes[(int(r), int(n))] = key.get((int(r), int(o)), -1)
    for kind_name in ("kernels", "memcpy", "memset"):
        tab = t.get(kind_name)
        if tab is None:
            continue
        idx = np.array([links.get((int(r), int(c)), -1)
                        for r, c in zip(tab["rank"], tab["correlation_id"])], dtype=np.int64)
        if nodes and "graph_node_id" in tab:
            for i, (r, n) in enumerate(zip(tab["rank"], tab["graph_node_id"])):
                o = nodes.get((int(r), int(n)), -1) if int(n) != 0 else -1
                if o >= 0:
                    idx[i] = o
        has = idx >= 0
        tab["op_id"] = np.where(has, ops["op_id"][np.maximum(idx, 0)], 0).astype(np.uint64)
        tab["op"] = np.array([names[i] if i >= 0 else "" for i in idx], dtype=object)
        tab["module"] = np.array([module[i] if i >= 0 else "" for i in idx], dtype=object)
        tab["phase"] = np.array([phase[i] if i >= 0 else "" for i in idx], dtype=object)


# XLA's GPU runtime names its NVTX ranges "<Kind>:#key=value,key=value#":
# "XlaModule:#hlo_module=jit_step,program_id=3#" around each execution of a
# module, "Thunk:#name=jit(step)/dot_general,hlo_op=gemm_fusion_dot.4,...#"
# around each thunk it runs (a kernel launch, a command buffer, a collective).
_XLA_KINDS = ("Thunk", "XlaModule")
# A value may hold commas (a JAX name's parameters): a new field starts only
# where a comma is followed by "key=".
_XLA_FIELD = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_]*=)")


def xla_annotation(text):
    """("Thunk" | "XlaModule", {key: value}) for one of XLA's range names, else
    None."""
    text = str(text)
    if text.startswith("TSL:"):
        text = text[4:]
    head, sep, body = text.partition(":#")
    if not sep or head not in _XLA_KINDS or not body.endswith("#"):
        return None
    fields = {}
    for part in _XLA_FIELD.split(body[:-1]):
        key, eq, value = part.partition("=")
        if eq:
            fields[key] = value
    return head, fields


def _innermost(starts, ends, parents, t):
    """Index of the innermost range containing t among properly nested ranges
    sorted by start (parents: each one's enclosing range, -1), or -1."""
    i = int(np.searchsorted(starts, t, side="right")) - 1
    while i >= 0 and ends[i] < t:
        i = parents[i]
    return i


def _nesting(starts, ends):
    parents = np.full(len(starts), -1, dtype=np.int64)
    stack = []
    for i in range(len(starts)):
        while stack and ends[stack[-1]] < starts[i]:
            stack.pop()
        parents[i] = stack[-1] if stack else -1
        stack.append(i)
    return parents


def _attribute_xla(t):
    """Ties kernels, copies and memsets to the XLA thunk and module ranges open
    on the thread of their launch call, when it ran."""
    nv, api = t.get("nvtx"), t.get("api")
    if nv is None or api is None or len(nv["name"]) == 0:
        return
    parsed = [xla_annotation(n) for n in nv["name"]]
    if not any(parsed):
        return
    # (rank, thread, kind) -> the ranges sorted by start, with their nesting.
    groups = {}
    for k, a in enumerate(parsed):
        if a is not None:
            groups.setdefault((int(nv["rank"][k]), int(nv["thread_id"][k]), a[0]), []).append(k)
    index = {}
    for key, ks in groups.items():
        # By start, an enclosing range before a nested one that starts with it.
        ks = sorted(ks, key=lambda k: (int(nv["start_ns"][k]), -int(nv["end_ns"][k])))
        starts = np.array([int(nv["start_ns"][k]) for k in ks], dtype=np.int64)
        ends = np.array([int(nv["end_ns"][k]) for k in ks], dtype=np.int64)
        index[key] = (ks, starts, ends, _nesting(starts, ends))
    calls = {(int(r), int(c)): (int(th), int(s)) for r, c, th, s in
             zip(api["rank"], api["correlation_id"], api["thread_id"], api["start_ns"])}

    def find(rank, thread, kind, at):
        """(fields, start) of the innermost range of the kind open at `at`."""
        entry = index.get((rank, thread, kind))
        if entry is None:
            return None, 0
        ks, starts, ends, parents = entry
        i = _innermost(starts, ends, parents, at)
        return (parsed[ks[i]][1], int(starts[i])) if i >= 0 else (None, 0)

    def recorded_for(rank, thread, since, at, kernel):
        """A kernel replayed from a command buffer (a CUDA graph) carries the
        graph launch's call. XLA records the buffer's commands during the
        execution that launches it, each inside the thunk of its instruction
        (nested in the buffer's thunk, or before it the first time), and names
        each kernel it emits after its fusion ('.' -> '_'): the last such thunk
        begun in the execution before the launch."""
        entry = index.get((rank, thread, "Thunk"))
        if entry is None:
            return None
        ks, starts = entry[0], entry[1]
        lo = int(np.searchsorted(starts, since, side="left"))
        hi = int(np.searchsorted(starts, at, side="right"))
        for j in range(hi - 1, lo - 1, -1):
            op = parsed[ks[j]][1].get("hlo_op", "")
            if op and op.replace(".", "_") == kernel:
                return parsed[ks[j]][1]
        return None

    for kind_name in ("kernels", "memcpy", "memset"):
        tab = t.get(kind_name)
        if tab is None:
            continue
        n = len(tab["correlation_id"])
        hlo_op = np.full(n, "", dtype=object)
        jax_op = np.full(n, "", dtype=object)
        module = np.full(n, "", dtype=object)
        names = tab.get("name") if kind_name == "kernels" else None
        nodes = tab.get("graph_node_id") if kind_name == "kernels" else None  # format >= 1.13
        for i, (r, c) in enumerate(zip(tab["rank"], tab["correlation_id"])):
            call = calls.get((int(r), int(c)))
            if call is None:
                continue
            thunk, thunk_start = find(int(r), call[0], "Thunk", call[1])
            execution, execution_start = find(int(r), call[0], "XlaModule", call[1])
            if (thunk is not None and names is not None and nodes is not None and
                    int(nodes[i]) != 0):
                since = execution_start if execution is not None else thunk_start
                thunk = recorded_for(int(r), call[0], since, call[1], str(names[i])) or thunk
            if thunk is not None:
                hlo_op[i] = thunk.get("hlo_op", "")
                jax_op[i] = thunk.get("name", "")
            if execution is not None:
                module[i] = execution.get("hlo_module", "")
        tab["hlo_op"] = hlo_op
        tab["jax_op"] = jax_op
        tab["hlo_module"] = module


def _nullable(pandas, column, value):
    """`column` with `value` (the format's "none": -1, 0, UINT32_MAX ...) as NA:
    integers as pandas' nullable integer of the same width, floats as NaN."""
    values = column.to_numpy()
    kind = values.dtype.kind
    if kind not in "iuf":
        return column
    mask = values == value
    if kind == "f":
        return column.mask(mask)
    out = column.astype("%sInt%d" % ("U" if kind == "u" else "", values.dtype.itemsize * 8))
    out[mask] = pandas.NA
    return out


def _frame(cols, nones=None):
    try:
        import pandas
    except ImportError:
        pandas = None
    if pandas is None:
        n = len(next(iter(cols.values()))) if cols else 0
        dtype = [(k, v.dtype if v.dtype != object else object) for k, v in cols.items()]
        out = np.empty(n, dtype=dtype)
        for k, v in cols.items():
            out[k] = v
        return out
    frame = pandas.DataFrame(cols)
    for field, value in (nones or {}).items():
        if field in frame.columns:
            frame[field] = _nullable(pandas, frame[field], value)
    return frame


def load(job_dir, kinds=None):
    """The tables of a merged job: `job_dir` is the job directory (its
    timeline.h5 is read) or a timeline file; `kinds` limits the record kinds
    read (default: all). Raises FileNotFoundError / ValueError naming the file."""
    import h5py
    path = os.path.join(job_dir, "timeline.h5") if os.path.isdir(job_dir) else job_dir
    if not os.path.exists(path):
        raise FileNotFoundError("aon.load: %s does not exist (run aon-merge on the job first)"
                                % path)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ValueError("aon.load: %s cannot be read as HDF5: %s" % (path, e)) from None
    with f:
        kind_attr = f.attrs.get("aon_file_kind", b"")
        kind_attr = kind_attr.decode() if isinstance(kind_attr, bytes) else str(kind_attr)
        if kind_attr != "aon-timeline":
            raise ValueError("aon.load: %s is not an AON timeline (aon_file_kind %r)"
                             % (path, kind_attr))
        strings = _strings(f)
        raw = {}
        if "meta/ranks" in f:
            raw["ranks"] = f["meta/ranks"][:]
        if "meta/devices" in f:
            raw["devices"] = f["meta/devices"][:]
        want = _kind_names(kinds)
        meta = _meta(f)
        if want is not None and "kernels" in want:
            want |= {"ops", "external_correlation", "graph_ops", "nvtx", "api"}
        for name in f["records"]:
            if want is None or name in want:
                raw[name] = f["records/" + name][:]
    hosts = None
    if "ranks" in raw:
        hosts = {int(r["rank"]): strings[int(r["host_id"])] if int(r["host_id"]) < len(strings)
                 else "" for r in raw["ranks"]}
    cols = {name: _columns(name, rows, strings, hosts) for name, rows in raw.items()}
    _attribute(cols)
    _attribute_xla(cols)
    start = meta.get("start_ns")
    if not start:
        starts = [int(c["start_ns"].min()) for c in cols.values()
                  if "start_ns" in c and len(c["start_ns"])]
        start = min(starts) if starts else 0
    for c in cols.values():
        _times(c, start)
    nones = getattr(_schema, "NONE", {})
    out = Tables({name: _frame(c, nones.get(name)) for name, c in cols.items()})
    out.meta = meta
    return out
