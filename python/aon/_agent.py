"""The AON agent in this process, seen from Python (ctypes).

The agent is loaded by the CUDA driver (CUDA_INJECTION64_PATH) when the process
first uses CUDA, not by Python: Agent.get() looks for it among the libraries
already loaded (dlopen with RTLD_NOLOAD) and never loads it itself. Before CUDA
starts, or in a process AON does not profile, there is no agent and every call
here is a cheap no-op.
"""
import ctypes
import os

_RTLD_NOLOAD = getattr(os, "RTLD_NOLOAD", 4)


class Agent:
    """The agent's C functions (rank_agent/include/aon/capture_api.h)."""

    def __init__(self, lib):
        self.lib = lib
        lib.aon_step.restype = None
        lib.aon_step.argtypes = []
        lib.aon_capture.restype = ctypes.c_int
        lib.aon_capture.argtypes = [ctypes.c_uint32, ctypes.c_uint32]
        self.has_ops = hasattr(lib, "aon_op_begin")
        if self.has_ops:
            lib.aon_op_begin.restype = ctypes.c_uint64
            lib.aon_op_begin.argtypes = [ctypes.c_char_p, ctypes.c_uint8, ctypes.c_int64,
                                         ctypes.c_uint32, ctypes.c_uint32]
            lib.aon_op_end.restype = None
            lib.aon_op_end.argtypes = [ctypes.c_uint64]
            lib.aon_ops_active.restype = ctypes.c_int
            lib.aon_ops_active.argtypes = []
            lib.aon_framework_step.restype = None
            lib.aon_framework_step.argtypes = []
        # The observer switch the agent calls at window edges (newer agents).
        self.has_listen = hasattr(lib, "aon_ops_listen")
        if self.has_listen:
            lib.aon_ops_listen.restype = None
            lib.aon_ops_listen.argtypes = [ctypes.c_void_p]
        self.has_jax_step = hasattr(lib, "aon_jax_step")
        if self.has_jax_step:
            lib.aon_jax_step.restype = None
            lib.aon_jax_step.argtypes = []
        self.has_graph_capture = hasattr(lib, "aon_graph_capture")
        if self.has_graph_capture:
            lib.aon_graph_capture.restype = None
            lib.aon_graph_capture.argtypes = [ctypes.c_int]
        self.has_host_range = hasattr(lib, "aon_host_range")
        if self.has_host_range:
            lib.aon_host_range.restype = None
            lib.aon_host_range.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64]

    # Kinds of aon_op_begin (AON_OP_* in capture_api.h).
    OPERATOR, BACKWARD, MODULE, USER = 0, 1, 2, 3

    def step(self):
        self.lib.aon_step()

    def framework_step(self):
        if self.has_ops:
            self.lib.aon_framework_step()
        else:
            self.lib.aon_step()

    def jax_step(self):
        if self.has_jax_step:
            self.lib.aon_jax_step()
        else:
            self.framework_step()

    def capture(self, steps, delay_ms):
        return self.lib.aon_capture(steps, delay_ms)

    def graph_capture(self, on):
        """A CUDA graph capture begins (True) or has ended (False) on this thread."""
        if self.has_graph_capture:
            self.lib.aon_graph_capture(1 if on else 0)

    def ops_active(self):
        return self.has_ops and self.lib.aon_ops_active() == 1

    def begin(self, name, kind):
        if not self.has_ops:
            return 0
        return self.lib.aon_op_begin(name.encode("utf-8", "replace"), kind, -1, 0, 0)

    def end(self, op_id):
        if op_id:
            self.lib.aon_op_end(op_id)

    def host_range(self, name, start_ns, end_ns):
        """Framework work from start_ns to end_ns (time.monotonic_ns()) on this
        thread, recorded in or out of capture windows (aon_host_range)."""
        if self.has_host_range:
            self.lib.aon_host_range(name.encode("utf-8", "replace"), start_ns, end_ns)

    _found = None
    _path = None

    @classmethod
    def get(cls):
        """The agent, or None while it is not loaded (checked again next call)."""
        if cls._found is not None:
            return cls._found
        path = os.environ.get("CUDA_INJECTION64_PATH", "")
        if not path:
            return None
        try:
            lib = ctypes.CDLL(path, mode=_RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            return None
        if not hasattr(lib, "aon_step"):
            return None  # another tool's injection library
        cls._found = Agent(lib)
        return cls._found
