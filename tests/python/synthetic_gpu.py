"""The SYNTHETIC GPU of AON's agent, driven from Python for CI tests of the
framework hooks (no GPU needed). Under `aon-run --source synthetic` the script
plays the CUDA driver's part the way aon-synthetic-app does: it dlopens
CUDA_INJECTION64_PATH, calls InitializeInjection, and launches kernels through
the agent's synthetic device (aonSyntheticDeviceV1)."""
import ctypes
import os
import sys


class Device(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32),
                ("launch_kernel", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p,
                                                   ctypes.c_uint64, ctypes.c_int, ctypes.c_int)),
                ("memcpy", ctypes.c_void_p), ("memset", ctypes.c_void_p),
                ("synchronize", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32)),
                ("set_kernel_profile", ctypes.c_void_p),
                ("begin_capture", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32)),
                ("end_capture", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint32,
                                                 ctypes.POINTER(ctypes.c_uint64))),
                ("launch_graph", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32))]


def start_synthetic_gpu():
    lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"], mode=os.RTLD_NOW | os.RTLD_LOCAL)
    lib.InitializeInjection.restype = ctypes.c_int
    lib.InitializeInjection()
    lib.aonSyntheticDeviceV1.restype = ctypes.POINTER(Device)
    dev = lib.aonSyntheticDeviceV1()
    if not dev:
        sys.exit("FAIL the agent gave no synthetic device (AON_SOURCE=synthetic?)")
    return dev.contents
