"""AON's PyTorch hook: step boundaries from the optimizer, and operator and
module ranges inside capture windows (docs/pytorch.md).

Installed by sitecustomize.py once `torch` has been imported by the script (a
process that never imports torch is not touched). It keeps, all the time:
  - an optimizer step hook: after each step of the first optimizer that steps,
    a step boundary for the agent (source "pytorch"), then a check whether the
    agent opened or closed a capture window;
  - Dynamo's compilation callbacks, registered when the program first calls
    torch.compile: each compilation (and Inductor's autotuning where Dynamo
    reports it) becomes an "AON" NVTX range "torch.compile ...", so the report
    tells compile time from the program's own work in every mode; after each,
    Inductor's compiled graphs are wrapped so that in windows each call of one
    is a range "## Call CompiledFxGraph <key> ##" (its kernels' operator);
  - CUDAGraph.capture_begin/capture_end wrapped: a graph captured outside a
    window is captured with operators and modules recorded, so its replays in
    later windows are attributed (aon_graph_capture);
and, only while a window is open (or a CUDA graph is being captured):
  - a RecordFunction observer (python/aon/_torch_observer.cc) for every aten operator,
    autograd node and user range (record_function, aon.range), switched by the
    agent itself at the window's edges (aon_ops_listen), whichever source
    marked the boundary;
  - global module forward hooks giving each nn.Module call its path
    ("TransformerEncoder.layers.3.self_attn"), switched at step boundaries the
    hook sees (optimizer steps, aon.step()).
Both are also switched when CUDA initializes (torch.cuda's lazy-init queue, the
moment the agent loads): with --mode full, from before the first kernel.
Outside windows nothing of AON runs per operator or per module.
"""
import ctypes
import os
import sys
import threading
import time
import weakref

from aon._agent import Agent

_EXTENSION = "_aon_torch.so"


def _say(text):
    sys.stderr.write("AON: " + text + "\n")


class _Modules:
    """Global module forward hooks, registered only while a window is open;
    once the program uses torch.compile they stay registered and a flag turns
    them on and off: Dynamo guards compiled code on the module hooks there are,
    so registering and removing them at every window edge would recompile."""

    def __init__(self, torch):
        self.module = torch.nn.modules.module
        self.handles = []
        self.active = False
        self.keep = False  # set by the first torch.compile call
        # Under Dynamo's tracing the hooks do nothing: a range begun while
        # tracing would mean nothing when the compiled code runs, and reading
        # this hook's state (the stack, the agent) would make Dynamo guard on
        # it and recompile at every change. Compiled modules get no module
        # ranges; their kernels still get the ops around the compiled region.
        compiler = getattr(torch, "compiler", None)
        self.compiling = getattr(compiler, "is_compiling", None)
        self.local = threading.local()
        # id(root module) -> {id(submodule): path}, from named_modules() once
        # per root; roots die with the model (weak references).
        self.paths = {}
        self.roots = weakref.WeakValueDictionary()

    def on(self):
        self.active = True
        if self.handles:
            return
        pre = self.module.register_module_forward_pre_hook(self._pre)
        try:
            post = self.module.register_module_forward_hook(self._post, always_call=True)
        except TypeError:  # torch < 2.0: no always_call; _pre recovers the stack
            post = self.module.register_module_forward_hook(self._post)
        self.handles = [pre, post]

    def keep_registered(self):
        self.keep = True

    def off(self):
        self.active = False
        if self.keep:
            return
        for h in self.handles:
            h.remove()
        self.handles = []

    def _stack(self):
        s = getattr(self.local, "stack", None)
        if s is None:
            s = self.local.stack = []
        return s

    def _path(self, stack, module):
        if stack:
            root_id = stack[0][0]
            table = self.paths.get(root_id)
            if table is not None:
                p = table.get(id(module))
                if p is not None:
                    return p
            return stack[-1][1] + "." + type(module).__name__
        root_id = id(module)
        if root_id not in self.paths or self.roots.get(root_id) is not module:
            name = type(module).__name__
            self.paths[root_id] = {id(m): (name + "." + n if n else name)
                                   for n, m in module.named_modules()}
            self.roots[root_id] = module
        return self.paths[root_id][root_id]

    def _idle(self):
        """Whether the hooks do nothing now: Dynamo tracing, or no window."""
        return (self.compiling is not None and self.compiling()) or not self.active

    def _pre(self, module, args):
        if self._idle():
            return
        agent = Agent.get()
        if agent is None:
            return
        stack = self._stack()
        path = self._path(stack, module)
        stack.append((stack[0][0] if stack else id(module), path, id(module),
                      agent.begin(path, Agent.MODULE)))

    def _post(self, module, args, output):
        if self._idle():
            return
        stack = self._stack()
        agent = Agent.get()
        # Pop up to this module: an exception in a child left its entry behind
        # (torch < 2.0 calls no forward hook then).
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][2] == id(module):
                for entry in reversed(stack[i:]):
                    if agent is not None:
                        agent.end(entry[3])
                del stack[i:]
                return


class _Compilations:
    """torch.compile's compilations as AON host ranges, from Dynamo's start and
    end callbacks (torch._dynamo.callback), registered on the first
    torch.compile call: importing Dynamo costs a second, so a program that never
    compiles never pays it. The callbacks run once per compilation, never per
    operator or step."""

    def __init__(self, torch, on_compile, compiled=None):
        self.torch = torch
        self.on_compile = on_compile  # run at every torch.compile call
        self.compiled = compiled  # run at the end of every compilation
        self.lock = threading.Lock()
        self.open = None  # (name, start) of the compilation in flight
        self.registered = False
        self.error = None

    def wrap_compile(self):
        original = getattr(self.torch, "compile", None)
        if original is None or getattr(original, "_aon_wrapped", False):
            return
        compilations = self

        def compile(*args, **kwargs):
            compilations.on_compile()
            compilations.register()
            return original(*args, **kwargs)

        compile._aon_wrapped = True
        compile.__wrapped__ = original
        compile.__name__ = getattr(original, "__name__", "compile")
        compile.__doc__ = getattr(original, "__doc__", None)
        self.torch.compile = compile

    def register(self):
        if self.registered or self.error is not None:
            return
        try:
            from torch._dynamo.callback import callback_handler
            callback_handler.register_start_callback(self._start)
            callback_handler.register_end_callback(self._end)
            self.registered = True
        except Exception as e:  # noqa: BLE001 - an older torch: no callbacks, no ranges
            self.error = e
            _say("torch.compile compilations are not marked (%r)" % (e,))

    @staticmethod
    def _what(args):
        # torch >= 2.6 passes CallbackArgs(callback_trigger, compile_id); older
        # ones nothing. The compile id "<frame>/<attempt>" tells a recompilation
        # (attempt > 0) from a first one: the report reads it from the name.
        if not args:
            return "torch.compile"
        trigger = getattr(getattr(args[0], "callback_trigger", None), "name", None)
        name = "torch.compile (%s)" % trigger.lower() if trigger else "torch.compile"
        compile_id = getattr(args[0], "compile_id", None)
        return name + " " + str(compile_id) if compile_id is not None else name

    # Dynamo counts compilations in flight over the whole process: the start
    # callback runs when the first thread begins compiling, the end callback
    # when the last one finishes, possibly on another thread. So one open start
    # for the process, not one per thread.
    def _start(self, *args):
        with self.lock:
            self.open = (self._what(args), time.monotonic_ns())

    def _end(self, *args):
        with self.lock:
            opened, self.open = self.open, None
        if self.compiled is not None:
            try:
                self.compiled()
            except Exception as e:  # noqa: BLE001 - never fail the program's compilation
                _say("compiled graphs are not marked (%r)" % (e,))
                self.compiled = None
        if opened is None:
            return
        agent = Agent.get()  # CUDA may have started during the compilation
        if agent is not None:
            agent.host_range(opened[0], opened[1], time.monotonic_ns())


class _CompiledGraphs:
    """The kernels of a torch.compile'd region tied to the Inductor graph that
    launched them: while a window records operators, each call of a compiled
    graph (CompiledFxGraph) is a user range named as torch.profiler names it,
    "## Call CompiledFxGraph <graph key> ##" (Inductor opens that range itself
    only while torch.profiler runs; the key is the hash of the graph in its FX
    graph cache, the same in every run of the same program, or None when the
    cache was bypassed). Likewise the autotuner's benchmarks at a graph's first
    call. Outside windows a call costs one check of the agent's state. The class is wrapped after each compilation, once
    Inductor's module is loaded: a program that never compiles imports
    nothing."""

    # (module, class, method, the range's name: a function of the instance).
    # Inductor's graph calls; and its autotuner's benchmarks, which run a
    # kernel's configurations at the first call of a graph and which torch
    # names in a dynamo_timed range opened only under torch.profiler.
    _TARGETS = (
        ("torch._inductor.output_code", "CompiledFxGraph", "__call__",
         lambda graph: "## Call CompiledFxGraph %s ##" % (
             # Inductor's own name, key and all: None when its FX graph
             # cache was not consulted (torch.profiler then says None too).
             getattr(graph, "_fx_graph_cache_key", None),)),
        ("torch._inductor.codecache", "CompiledFxGraph", "__call__",
         lambda graph: "## Call CompiledFxGraph %s ##" % (
             getattr(graph, "_fx_graph_cache_key", None),)),
        ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner",
         "benchmark_all_configs",
         lambda tuner: "CachingAutotuner.benchmark_all_configs (dynamo_timed)"),
    )

    def __init__(self, torch, opened=None):
        self.torch = torch
        # The range: record_function, which PyTorch dispatches to AON's
        # operator observer as a user range (a test passes its own).
        self.opened = opened or torch.autograd.profiler.record_function

    def wrap_loaded(self):
        for module, cls_name, method, name in self._TARGETS:
            cls = getattr(sys.modules.get(module), cls_name, None)
            if cls is not None:
                self.wrap(cls, method, name)

    def wrap(self, cls, method="__call__", name=None):
        original = cls.__dict__.get(method)
        if original is None or getattr(original, "_aon_wrapped", False):
            return
        name = name or self._TARGETS[0][3]
        profiler = self.torch.autograd.profiler
        opened = self.opened

        def call(obj, *args, **kwargs):
            agent = Agent.get()
            if (agent is None or getattr(profiler, "_is_profiler_enabled", False) or
                    not agent.ops_active()):
                return original(obj, *args, **kwargs)
            with opened(name(obj)):
                return original(obj, *args, **kwargs)

        call._aon_wrapped = True
        call.__wrapped__ = original
        call.__name__ = getattr(original, "__name__", method)
        setattr(cls, method, call)


class _GraphCaptures:
    """CUDA graphs captured between windows (budgeted mode): a graph's kernel
    nodes are made once, at its capture, and replayed at every later step, so
    the operators and modules behind its replays exist only at the capture.
    CUDAGraph.capture_begin and capture_end (what torch.cuda.graph,
    make_graphed_callables and torch.compile's CUDA graph trees call) are
    bracketed by aon_graph_capture: from before the capture starts to after the
    graph is instantiated, the agent records ranges and ties the graph's nodes
    to them, and `switched` turns the module hooks on and off with it."""

    def __init__(self, torch, switched):
        self.torch = torch
        self.switched = switched

    def wrap(self):
        cls = getattr(getattr(self.torch, "cuda", None), "CUDAGraph", None)
        if cls is None:
            return False
        begin = getattr(cls, "capture_begin", None)
        end = getattr(cls, "capture_end", None)
        if begin is None or end is None or getattr(begin, "_aon_wrapped", False):
            return False
        bracket = self.bracket

        def capture_begin(graph, *args, **kwargs):
            bracket(True)
            try:
                return begin(graph, *args, **kwargs)
            except BaseException:
                bracket(False)
                raise

        def capture_end(graph, *args, **kwargs):
            try:
                return end(graph, *args, **kwargs)
            finally:
                bracket(False)

        for wrapped, original in ((capture_begin, begin), (capture_end, end)):
            wrapped._aon_wrapped = True
            wrapped.__wrapped__ = original
            wrapped.__name__ = getattr(original, "__name__", wrapped.__name__)
            wrapped.__doc__ = getattr(original, "__doc__", None)
        cls.capture_begin = capture_begin
        cls.capture_end = capture_end
        return True

    def bracket(self, on):
        """Never raises: the capture must go on whatever AON does."""
        try:
            agent = Agent.get()
            if agent is None or not agent.has_graph_capture:
                return
            agent.graph_capture(on)
            self.switched()
        except Exception as e:  # noqa: BLE001
            _say("CUDA graph capture bracket: %r" % (e,))


class TorchHook:
    def __init__(self, torch):
        self.torch = torch
        self.observing = False
        self.first_optimizer = None
        self.modules = _Modules(torch)
        self.graphs = _CompiledGraphs(torch)
        self.captures = _GraphCaptures(torch, self.sync)
        self.compilations = _Compilations(torch, self.modules.keep_registered,
                                          self.graphs.wrap_loaded)
        self.extension = None
        self.extension_error = None
        self.warned = False
        self.bound = False
        self.listening = False
        self._load_extension()

    def _load_extension(self):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _EXTENSION)
        if not os.path.exists(path):
            self.extension_error = "AON was built without PyTorch's headers (%s is missing)" % path
            return
        try:
            ext = ctypes.CDLL(path)
        except OSError as e:
            self.extension_error = "cannot load %s: %s" % (path, e)
            return
        ext.aon_torch_built_for.restype = ctypes.c_char_p
        built = ext.aon_torch_built_for().decode()
        if built != self.torch.__version__:
            self.extension_error = ("%s was built for torch %s, this process runs torch %s" %
                                    (_EXTENSION, built, self.torch.__version__))
            return
        ext.aon_torch_bind.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        ext.aon_torch_observe.argtypes = [ctypes.c_int]
        self.extension = ext
        self.bound = False

    def _attach(self, agent):
        """Binds the observer to the agent's range functions and hands the agent
        its switch (aon_ops_listen: the agent then calls it at once with the
        state now, and at every window edge). Once per process."""
        ext = self.extension
        if ext is None or self.listening:
            return
        if not self.bound:
            begin = ctypes.cast(agent.lib.aon_op_begin, ctypes.c_void_p).value
            end = ctypes.cast(agent.lib.aon_op_end, ctypes.c_void_p).value
            ext.aon_torch_bind(begin, end)
            self.bound = True
        switch = getattr(ext, "aon_torch_switch", None)
        if agent.has_listen and switch is not None:
            agent.lib.aon_ops_listen(ctypes.cast(switch, ctypes.c_void_p).value)
            self.listening = True

    def _observe(self, agent, on):
        ext = self.extension
        if ext is None:
            if on and not self.warned:
                self.warned = True
                _say("operator ranges are off (" + str(self.extension_error) +
                     "); module ranges and steps still work")
            return
        if self.listening:
            return  # the agent switches the observer itself
        ext.aon_torch_observe(1 if on else 0)

    def sync(self):
        """Switches the per-module (and, with an agent that has no
        aon_ops_listen, the per-operator) observers on or off as the agent's
        window is."""
        agent = Agent.get()
        if agent is None:
            return
        if self.extension is not None and not self.listening and agent.has_ops:
            self._attach(agent)
        active = agent.ops_active()
        if active == self.observing:
            return
        self.observing = active
        self._observe(agent, active)
        if active:
            self.modules.on()
        else:
            self.modules.off()

    def optimizer_stepped(self, optimizer):
        if self.first_optimizer is None:
            self.first_optimizer = weakref.ref(optimizer)
        elif self.first_optimizer() is not optimizer:
            if self.first_optimizer() is not None:
                return  # several optimizers: the first one that steps marks steps
            self.first_optimizer = weakref.ref(optimizer)
        agent = Agent.get()
        if agent is None:
            return
        agent.framework_step()
        self.sync()

    def _cuda_ready(self):
        """Run by torch.cuda's lazy initialization right after CUDA starts (the
        agent has just been loaded by the driver): observers on from the first
        kernel when ops are recorded from the start (--mode full). Never raises:
        torch would turn it into an error of the program's first CUDA call."""
        try:
            self.sync()
        except Exception as e:  # noqa: BLE001
            _say("PyTorch hook: %r" % (e,))

    def install(self):
        self.compilations.wrap_compile()
        self.captures.wrap()
        lazy_call = getattr(getattr(self.torch, "cuda", None), "_lazy_call", None)
        if lazy_call is not None:
            lazy_call(self._cuda_ready)
        optim = self.torch.optim
        register = getattr(getattr(optim, "optimizer", None), "register_optimizer_step_post_hook",
                           None)
        if register is not None:
            register(lambda opt, args, kwargs: self.optimizer_stepped(opt))
            self.step_hook = "register_optimizer_step_post_hook"
        else:
            self._wrap_optimizer_classes(optim.Optimizer)
            self.step_hook = "Optimizer.step wrapped (torch < 2.0)"

    def _wrap_optimizer_classes(self, base):
        """torch < 2.0 has no global optimizer hook: wrap step() of every
        optimizer class, those defined now and those defined later."""
        hook = self

        def wrap(cls):
            step = cls.__dict__.get("step")
            if step is None or getattr(step, "_aon_wrapped", False):
                return

            def stepped(opt, *args, **kwargs):
                out = step(opt, *args, **kwargs)
                hook.optimizer_stepped(opt)
                return out

            stepped._aon_wrapped = True
            stepped.__wrapped__ = step
            stepped.__name__ = getattr(step, "__name__", "step")
            stepped.__doc__ = getattr(step, "__doc__", None)
            cls.step = stepped

        def walk(cls):
            for sub in cls.__subclasses__():
                wrap(sub)
                walk(sub)

        walk(base)
        previous = base.__dict__.get("__init_subclass__")

        def init_subclass(cls, **kwargs):
            if previous is not None:
                previous.__func__(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            wrap(cls)

        base.__init_subclass__ = classmethod(init_subclass)


_hook = None


def install(torch):
    """Called once torch is imported (sitecustomize.py). Never raises: the
    profiler must not take the job down."""
    global _hook
    if _hook is not None:
        return _hook
    try:
        _hook = TorchHook(torch)
        _hook.install()
        _hook.sync()  # the agent may already be there, its window open (--mode full)
    except Exception as e:  # noqa: BLE001 - any failure leaves the job untouched
        _say("PyTorch hook not installed: %r" % (e,))
        _hook = None
    return _hook


def current():
    return _hook
