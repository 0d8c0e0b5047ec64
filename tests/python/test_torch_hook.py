#!/usr/bin/env python3
"""CI test of AON's PyTorch hook with Debian's CPU PyTorch and the labeled
SYNTHETIC GPU (docs/pytorch.md). Runs real aon-run jobs of
tests/python/torch_synthetic_train.py, a script that never mentions AON's hook,
and checks what the hook and the reader give.

usage: test_torch_hook.py BIN_DIR   (with the python that has torch)
"""
import os
import shutil
import sys
import tempfile
import unittest

import hook_jobs
from hook_jobs import col, marked_steps

BIN = hook_jobs.configure(sys.argv.pop(1) if len(sys.argv) > 1 else "build/bin")
HERE = hook_jobs.HERE
TRAIN = os.path.join(HERE, "torch_synthetic_train.py")
PYDIR = hook_jobs.PYDIR
run = hook_jobs.run
import aon  # noqa: E402


class TorchHook(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="aon-torch-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_hook_loads_without_a_code_change_and_optimizer_steps_mark_steps(self):
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "7"], aon_args=["--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("DONE steps=7", p.stdout)
        hook = [line for line in p.stdout.splitlines() if line.startswith("HOOK ")]
        self.assertEqual(len(hook), 1, p.stdout)
        self.assertNotEqual(hook[0], "HOOK none", "the hook did not load by itself")
        t = aon.load(job)
        # One boundary after each of the 7 optimizer steps: steps 0..6.
        self.assertEqual(marked_steps(self, t, "pytorch"), list(range(7)))
        # The reader: names resolved, hosts as a column, every kernel of the run.
        names = col(t.kernels, "name")
        self.assertEqual(len(names), 21)  # 3 kernels per iteration, 7 iterations
        self.assertEqual(sorted(set(names)),
                         ["synthetic_kernel_1", "synthetic_kernel_2", "synthetic_kernel_3"])
        self.assertTrue(all(h for h in col(t.kernels, "host")))
        self.assertEqual(set(col(t.kernels, "rank")), {0})

    def test_kernels_are_tied_to_their_operator_module_and_phase(self):
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "4"], aon_args=["--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(job)
        got = list(zip(col(t.kernels, "name"), col(t.kernels, "op"), col(t.kernels, "module"),
                       col(t.kernels, "phase")))
        # Every iteration: kernel 2 in Work.forward inside Net.block, kernel 1 in
        # Net.forward, kernel 3 in Work.backward: autograd's node for Work, whose
        # forward ran in Net.block (linked by its sequence number).
        want = [("synthetic_kernel_2", "aon_test::gpu_work", "Net.block", "forward"),
                ("synthetic_kernel_1", "aon_test::gpu_work", "Net", "forward"),
                ("synthetic_kernel_3", "aon_test::gpu_work", "Net.block", "backward")] * 4
        self.assertEqual(got, want)
        kinds = set(col(t.ops, "kind_name"))
        self.assertEqual(kinds, {"operator", "backward", "module", "user"})
        modules = {n for n, k in zip(col(t.ops, "name"), col(t.ops, "kind_name")) if k == "module"}
        self.assertEqual(modules, {"Net", "Net.block", "Net.block.linear", "Net.head"})

    def test_graph_replays_belong_to_the_ops_and_modules_of_their_capture(self):
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "4", "--graph"], aon_args=["--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(job)
        self.assertIn("graph_ops", t)
        replayed = [(n, o, m, ph) for n, o, m, ph, g in
                    zip(col(t.kernels, "name"), col(t.kernels, "op"), col(t.kernels, "module"),
                        col(t.kernels, "phase"), col(t.kernels, "graph_node_id")) if g]
        # Each replay (one per step, inside the user range "replay") runs the two
        # kernels captured in the forward: their ops and modules are the capture's.
        want = [("synthetic_kernel_2", "aon_test::gpu_work", "Net.block", "forward"),
                ("synthetic_kernel_1", "aon_test::gpu_work", "Net", "forward")] * 4
        self.assertEqual(replayed, want)
        self.assertEqual(len(col(t.graph_ops, "node_id")), 4, "2 nodes created, 2 clones")

    def test_graphs_captured_before_any_window_are_attributed_in_windows(self):
        # The default (budgeted) mode: the graph is captured before the first
        # optimizer step, outside any window; its replays run in windows later.
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "24", "--graph"],
                aon_args=["--capture-period", "8", "--capture-steps", "2"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(job)
        self.assertEqual(len(col(t.graph_ops, "node_id")), 4, "2 nodes created, 2 clones")
        starts, ends = col(t.steps, "start_ns"), col(t.steps, "end_ns")
        flags, numbers = col(t.steps, "flags"), col(t.steps, "step")
        sources = col(t.steps, "source_name")
        captured = {n for n, f, src in zip(numbers, flags, sources) if f & 1 and src == "pytorch"}
        self.assertTrue(captured, "no window opened")

        def step_of(ns):
            for a, b, n in zip(starts, ends, numbers):
                if a <= ns < b:
                    return n
            return None
        replayed = [(n, o, m, ph) for n, o, m, ph, g, ts in
                    zip(col(t.kernels, "name"), col(t.kernels, "op"), col(t.kernels, "module"),
                        col(t.kernels, "phase"), col(t.kernels, "graph_node_id"),
                        col(t.kernels, "start_ns"))
                    if g and step_of(ts) in captured]
        # One replay per captured step, its kernels with the capture's ops and modules.
        want = [("synthetic_kernel_2", "aon_test::gpu_work", "Net.block", "forward"),
                ("synthetic_kernel_1", "aon_test::gpu_work", "Net", "forward")] * len(captured)
        self.assertEqual(replayed, want)
        # The capture recorded its ranges; outside it and the windows, none.
        names = set(col(t.ops, "name"))
        self.assertTrue({"Net", "Net.block", "aon_test::gpu_work"} <= names, names)

    def test_operator_ranges_are_recorded_in_capture_windows_only(self):
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "24"],
                aon_args=["--capture-period", "8", "--capture-steps", "2"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(job)
        starts, ends = col(t.steps, "start_ns"), col(t.steps, "end_ns")
        flags, numbers = col(t.steps, "flags"), col(t.steps, "step")
        sources = col(t.steps, "source_name")
        # Before the first optimizer step (start-up: slow on a loaded machine)
        # the agent may mark time-slot steps and capture one: torch runs no
        # operator there. The optimizer's steps are what the hook follows.
        captured = {n for n, f, src in zip(numbers, flags, sources) if f & 1 and src == "pytorch"}
        self.assertTrue(captured, "no window opened")
        self.assertLess(len(captured), len(numbers))

        def step_of(ns):
            for a, b, n in zip(starts, ends, numbers):
                if a <= ns < b:
                    return n
            return None
        # Operators only inside windows, and in every window the hook followed.
        # (A window that a time-slot step opened during start-up may hold the
        # first iteration's operators: the hook saw it open when it installed.)
        any_window = {n for n, f in zip(numbers, flags) if f & 1}
        op_steps = {step_of(s) for s in col(t.ops, "start_ns")}
        self.assertLessEqual(op_steps, any_window, "ops outside capture windows")
        self.assertLessEqual(captured, op_steps, "a captured step without its ops")
        # Every kernel of those steps is in its operator: three per step. (A
        # window a time-slot step opened before the first optimizer step holds
        # the first iteration's kernels without operators: the hook turns the
        # ranges on at its own step boundaries.)
        in_captured = [(name, op, step_of(ts)) for name, op, ts in
                       zip(col(t.kernels, "name"), col(t.kernels, "op"), col(t.kernels, "start_ns"))
                       if step_of(ts) in captured]
        self.assertEqual(len(in_captured), 3 * len(captured), in_captured)
        for name, op, step in in_captured:
            self.assertEqual(op, "aon_test::gpu_work", (name, step))

    def test_aon_range_is_a_user_range_around_the_ops_it_holds(self):
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "3", "--range", "my_forward"], aon_args=["--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(job)
        ids, parents = col(t.ops, "op_id"), col(t.ops, "parent_id")
        names, kinds = col(t.ops, "name"), col(t.ops, "kind_name")
        ranges = {i for i, n, k in zip(ids, names, kinds) if n == "my_forward" and k == "user"}
        self.assertEqual(len(ranges), 3, "one range per iteration")
        parent = dict(zip(ids, parents))

        def under_range(i):
            while i:
                if i in ranges:
                    return True
                i = parent.get(i, 0)
            return False
        # Forward kernels (1 and 2) are launched under the range; kernel 3
        # (backward) is not.
        for name, op_id in zip(col(t.kernels, "name"), col(t.kernels, "op_id")):
            self.assertEqual(under_range(op_id), name != "synthetic_kernel_3", name)

    def test_aon_capture_opens_a_window_on_demand(self):
        job = os.path.join(self.dir, "job")
        # A period no run this short reaches: the only window is the one asked for.
        p = run(job, [TRAIN, "--steps", "8", "--capture-at", "3"],
                aon_args=["--capture-period", "1024"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("CAPTURE True", p.stdout)
        t = aon.load(job)
        on_demand = [n for n, f in zip(col(t.steps, "step"), col(t.steps, "flags")) if f & 4]
        self.assertEqual(len(on_demand), 2, list(zip(col(t.steps, "step"), col(t.steps, "flags"))))
        self.assertGreater(len(col(t.ops, "op_id")), 0)

    def test_aon_step_marks_steps_without_an_optimizer(self):
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "5", "--no-optimizer"], aon_args=["--mode", "full"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        t = aon.load(job)
        self.assertEqual(marked_steps(self, t, "api"), list(range(5)))

    def test_python_hook_off_leaves_python_alone(self):
        job = os.path.join(self.dir, "job")
        p = run(job, [TRAIN, "--steps", "3"], aon_args=["--python-hook", "off"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("HOOK none", p.stdout)

    def test_a_process_without_torch_is_not_touched_and_the_users_sitecustomize_runs(self):
        site = os.path.join(self.dir, "site")
        os.makedirs(site)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
        job = os.path.join(self.dir, "job")
        probe = ("import os, sys; print('RESULT', 'torch' in sys.modules, 'aon._hook' in sys.modules,"
                 " os.environ.get('USER_SITECUSTOMIZE_RAN'), sys.path.index(%r) < sys.path.index(%r))"
                 % (PYDIR, site))
        p = run(job, ["-c", probe], extra_env={"PYTHONPATH": site}, aon_args=["--no-merge"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("RESULT False False 1 True", p.stdout)

    def test_the_reader_names_a_bad_file(self):
        bad = os.path.join(self.dir, "timeline.h5")
        with open(bad, "wb") as f:
            f.write(b"not hdf5")
        with self.assertRaises(Exception) as e:
            aon.load(bad)
        self.assertIn("timeline.h5", str(e.exception))
        with self.assertRaises(FileNotFoundError) as e:
            aon.load(os.path.join(self.dir, "nowhere"))
        self.assertIn("nowhere", str(e.exception))


class ModuleHooksAndDynamo(unittest.TestCase):
    """The module hooks' switching, in this process (no agent: the hook asks
    for one through Agent.get, which is counted here). CI's torch has no
    Dynamo; the recompilation this prevents is checked on the GPU machine
    (docs/pytorch.md)."""

    def setUp(self):
        import torch
        from aon import _hook
        self.torch, self.hook = torch, _hook
        self.asked = 0
        self.saved_get = _hook.Agent.get

        def get():
            self.asked += 1
            return None
        _hook.Agent.get = staticmethod(get)
        self.modules = _hook._Modules(torch)
        self.model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
        self.registered = lambda: len(torch.nn.modules.module._global_forward_pre_hooks)

    def tearDown(self):
        self.modules.keep = False
        self.modules.off()
        self.hook.Agent.get = self.saved_get

    def forward(self):
        self.asked = 0
        self.model(self.torch.zeros(1, 2))
        return self.asked

    def test_without_torch_compile_the_hooks_are_registered_only_while_on(self):
        before = self.registered()
        self.modules.on()
        self.assertEqual(self.registered(), before + 1)
        self.assertGreater(self.forward(), 0)
        self.modules.off()
        self.assertEqual(self.registered(), before)
        self.assertEqual(self.forward(), 0)

    def test_after_torch_compile_the_hooks_stay_registered_and_a_flag_switches_them(self):
        before = self.registered()
        self.modules.keep_registered()
        for _ in range(3):
            self.modules.on()
            self.assertEqual(self.registered(), before + 1)
            self.assertGreater(self.forward(), 0)
            self.modules.off()
            self.assertEqual(self.registered(), before + 1)  # Dynamo's guards see no change
            self.assertEqual(self.forward(), 0)

    def test_while_dynamo_traces_the_hooks_touch_nothing(self):
        self.modules.compiling = lambda: True
        self.modules.on()
        self.assertEqual(self.forward(), 0)
        self.assertEqual(getattr(self.modules.local, "stack", []), [])
        self.modules.compiling = lambda: False
        self.assertGreater(self.forward(), 0)

    def test_torch_compile_makes_the_hook_keep_its_module_hooks(self):
        calls = []
        original = self.torch.__dict__.get("compile")
        self.torch.compile = lambda *a, **k: calls.append(a) or a[0]
        try:
            hook = self.hook.TorchHook(self.torch)
            hook.compilations.register = lambda: None  # Dynamo's callbacks: not in this torch
            hook.compilations.wrap_compile()
            self.assertFalse(hook.modules.keep)
            self.assertIs(self.torch.compile(self.model), self.model)
            self.assertTrue(hook.modules.keep)
            self.assertEqual(len(calls), 1)
        finally:
            if original is None:
                del self.torch.compile
            else:
                self.torch.compile = original


class CompiledGraphRanges(unittest.TestCase):
    """Calls of Inductor's compiled graphs become "## Call CompiledFxGraph <key>
    ##" ranges while the agent records operators (the kernels' operator under
    torch.compile, as torch.profiler names it). CI's torch has no Inductor: a
    stand-in CompiledFxGraph class in the module where Inductor keeps it; the
    real one is checked on the GPU machine (tests/gpu/run_torch_checks.sh,
    transformer:compile)."""

    class Agent:
        def __init__(self):
            self.active = False
            self.compilations = []

        def ops_active(self):
            return self.active

        def host_range(self, name, start, end):
            self.compilations.append(name)

    def setUp(self):
        import types

        import torch
        from aon import _hook
        self.torch, self.hook = torch, _hook
        self.agent = self.Agent()
        self.saved_get = _hook.Agent.get
        _hook.Agent.get = staticmethod(lambda: self.agent)

        class CompiledFxGraph:  # Inductor's, as far as the hook relies on it
            def __init__(self, key):
                self._fx_graph_cache_key = key

            def __call__(self, inputs):
                return [2 * x for x in inputs]

        self.cls = CompiledFxGraph
        self.module = types.ModuleType("torch._inductor.output_code")
        self.module.CompiledFxGraph = CompiledFxGraph
        self.saved_module = sys.modules.get(self.module.__name__)
        sys.modules[self.module.__name__] = self.module
        self.ranges = []
        outer = self

        class Opened:
            def __init__(self, name):
                self.name = name

            def __enter__(self):
                outer.ranges.append(("begin", self.name))

            def __exit__(self, *exc):
                outer.ranges.append(("end", self.name))
        self.graphs = _hook._CompiledGraphs(torch, opened=Opened)

    def tearDown(self):
        self.hook.Agent.get = self.saved_get
        if self.saved_module is None:
            del sys.modules[self.module.__name__]
        else:
            sys.modules[self.module.__name__] = self.saved_module

    def test_a_call_in_a_window_is_a_range_named_after_its_graph(self):
        self.graphs.wrap_loaded()
        graph = self.cls("fabc123")
        self.agent.active = True
        self.assertEqual(graph([1, 2]), [2, 4])
        self.assertEqual(self.ranges, [("begin", "## Call CompiledFxGraph fabc123 ##"),
                                       ("end", "## Call CompiledFxGraph fabc123 ##")])

    def test_the_autotuners_benchmarks_are_a_range_named_as_torch_names_them(self):
        # Inductor benchmarks a kernel's configurations at a graph's first call,
        # in a range that torch opens only under torch.profiler.
        import types
        name = "torch._inductor.runtime.triton_heuristics"

        class CachingAutotuner:
            def benchmark_all_configs(self, *args):
                return {"config": 1.0}

        module = types.ModuleType(name)
        module.CachingAutotuner = CachingAutotuner
        saved = sys.modules.get(name)
        sys.modules[name] = module
        try:
            self.graphs.wrap_loaded()
            self.graphs.wrap_loaded()  # after every compilation: wrapped once
            self.agent.active = True
            self.assertEqual(CachingAutotuner().benchmark_all_configs(), {"config": 1.0})
            self.agent.active = False
            CachingAutotuner().benchmark_all_configs()
        finally:
            if saved is None:
                del sys.modules[name]
            else:
                sys.modules[name] = saved
        want = "CachingAutotuner.benchmark_all_configs (dynamo_timed)"
        self.assertEqual(self.ranges, [("begin", want), ("end", want)])

    def test_a_graph_without_a_cache_key_is_named_as_inductor_names_it(self):
        # Inductor formats its own range with the key as it is: None when its
        # FX graph cache was bypassed; AON's name must be the same string.
        self.graphs.wrap_loaded()
        graph = self.cls(None)
        self.agent.active = True
        graph([1])
        self.assertEqual(self.ranges, [("begin", "## Call CompiledFxGraph None ##"),
                                       ("end", "## Call CompiledFxGraph None ##")])

    def test_outside_windows_and_under_torch_profiler_no_range(self):
        self.graphs.wrap_loaded()
        graph = self.cls("fabc123")
        self.assertEqual(graph([3]), [6])  # no window
        profiler = self.torch.autograd.profiler
        saved = profiler.__dict__.get("_is_profiler_enabled")
        profiler._is_profiler_enabled = True  # Inductor opens the same range itself
        try:
            self.agent.active = True
            self.assertEqual(graph([3]), [6])
        finally:
            if saved is None:
                del profiler._is_profiler_enabled
            else:
                profiler._is_profiler_enabled = saved
        self.assertEqual(self.ranges, [])

    def test_wrapped_once_after_every_compilation(self):
        compilations = self.hook._Compilations(self.torch, lambda: None, self.graphs.wrap_loaded)
        for _ in range(3):
            compilations._start()
            compilations._end()
        self.agent.active = True
        self.cls("k")([1])
        self.assertEqual(len(self.ranges), 2, self.ranges)
        self.assertTrue(getattr(self.cls.__call__, "_aon_wrapped", False))
        self.assertEqual(self.agent.compilations, ["torch.compile"] * 3)

    def test_a_failing_wrap_never_fails_the_compilation(self):
        def broken():
            raise RuntimeError("Inductor changed")
        compilations = self.hook._Compilations(self.torch, lambda: None, broken)
        compilations._start()
        compilations._end()  # said on stderr, not raised
        self.assertIsNone(compilations.compiled)
        self.assertEqual(self.agent.compilations, ["torch.compile"], "the compilation is marked")

    def test_with_pytorchs_own_record_function(self):
        graphs = self.hook._CompiledGraphs(self.torch)
        graphs.wrap_loaded()
        self.agent.active = True
        self.assertEqual(self.cls("k")([5]), [10])


if __name__ == "__main__":
    unittest.main(verbosity=2)
