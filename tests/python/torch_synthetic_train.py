#!/usr/bin/env python3
"""A small PyTorch training loop on the CPU that launches SYNTHETIC GPU kernels
from inside operators, for CI tests of AON's PyTorch hook (no GPU needed).

Run it under `aon-run --source synthetic`; it plays the CUDA driver's part the
way aon-synthetic-app does (dlopen CUDA_INJECTION64_PATH, InitializeInjection),
and a custom operator aon_test::gpu_work launches one synthetic kernel named
after its argument's tag. The script itself never mentions AON's hook: it must
load by itself (sitecustomize on PYTHONPATH) when torch is imported.

    --steps N        optimizer steps (SGD)
    --no-optimizer   mark steps with aon.step() instead (inference loops)
    --range NAME     run each forward inside aon.range(NAME)
    --capture-at S   after step S, ask for an on-demand window: aon.capture(steps=2)

Prints HOOK <step hook>|none, then DONE steps=<n>.
"""
import argparse
import ctypes
import sys

from synthetic_gpu import start_synthetic_gpu


def synthetic_cuda_graphs(torch, gpu):
    """torch.cuda.CUDAGraph on the SYNTHETIC GPU: CI's torch has no CUDA, so its
    CUDAGraph sits on a dummy base class. torch's own Python class stays (its
    capture_begin/capture_end are what AON's hook wraps); the base's methods,
    the CUDA side, become the synthetic device's capture, instantiation and
    launch of stream 0."""
    base = torch.cuda.CUDAGraph.__mro__[1]

    def init(self, *args, **kwargs):
        self.exec_id = ctypes.c_uint64(0)

    def capture_begin(self, *args, **kwargs):
        if gpu.begin_capture(0) != 0:
            raise RuntimeError("synthetic begin_capture failed")

    def capture_end(self):
        if gpu.end_capture(0, ctypes.byref(self.exec_id)) != 0:
            raise RuntimeError("synthetic end_capture failed")

    def replay(self):
        if gpu.launch_graph(self.exec_id.value, 0) != 0:
            raise RuntimeError("synthetic launch_graph failed")

    try:
        for name, fn in (("__init__", init), ("capture_begin", capture_begin),
                         ("capture_end", capture_end), ("replay", replay)):
            setattr(base, name, fn)
    except TypeError as e:
        sys.exit("FAIL this torch has CUDA graphs of its own (%s): --graph is for CI's CPU torch"
                 % e)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--no-optimizer", action="store_true")
    p.add_argument("--range", default="")
    p.add_argument("--capture-at", type=int, default=-1)
    p.add_argument("--graph", action="store_true",
                   help="capture the model's forward into a CUDA graph (torch.cuda.CUDAGraph on "
                        "the synthetic GPU) before the loop and replay it inside an "
                        "aon.range('replay') every step")
    args = p.parse_args()
    gpu = start_synthetic_gpu()

    import torch  # AON's hook installs itself here

    hook = sys.modules.get("aon._hook")
    current = hook.current() if hook is not None else None
    print("HOOK", getattr(current, "step_hook", "none") if current else "none", flush=True)

    lib = torch.library.Library("aon_test", "DEF")
    lib.define("gpu_work(Tensor x, int tag) -> Tensor")

    def gpu_work(x, tag):
        gpu.launch_kernel(0, ("synthetic_kernel_%d" % tag).encode(), 2000, 1, 32)
        return x * 1.0

    lib.impl("gpu_work", gpu_work, "CPU")

    class Work(torch.autograd.Function):
        """Forward and backward each launch one synthetic kernel (tag 2 / 3)."""

        @staticmethod
        def forward(ctx, x):
            return torch.ops.aon_test.gpu_work(x, 2)

        @staticmethod
        def backward(ctx, grad):
            return torch.ops.aon_test.gpu_work(grad, 3)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            return Work.apply(self.linear(x))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.head(torch.ops.aon_test.gpu_work(self.block(x), 1))

    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    y = torch.randn(4, 1)
    if args.no_optimizer or args.range or args.capture_at >= 0 or args.graph:
        import aon  # on PYTHONPATH under aon-run
    import contextlib
    graph = None
    if args.graph:
        synthetic_cuda_graphs(torch, gpu)
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin()
        with torch.no_grad():
            net(x)  # kernels 2 (Net.block) and 1 (Net) become graph nodes
        graph.capture_end()
    for i in range(args.steps):
        if args.graph:
            with aon.range("replay"):
                graph.replay()
        if i == args.capture_at:
            print("CAPTURE", aon.capture(steps=2), flush=True)
        scope = aon.range(args.range) if args.range else contextlib.nullcontext()
        if args.no_optimizer:
            with torch.no_grad(), scope:
                net(x)
            aon.step()
            continue
        opt.zero_grad()
        with scope:
            out = net(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
    gpu.synchronize(0xFFFFFFFF)
    print("DONE steps=%d" % args.steps, flush=True)


if __name__ == "__main__":
    main()
