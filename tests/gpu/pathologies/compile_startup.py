#!/usr/bin/env python3
"""compile_startup: torch.compile and cuDNN autotuning make the first step slow.

Planted: a small conv + MLP classifier. The conv runs eagerly with
torch.backends.cudnn.benchmark = True (cuDNN times its algorithms on the first
forward and backward of each shape); the MLP is torch.compile'd, so the first
step traces it with Dynamo and compiles forward and backward with Inductor
(Triton kernels). That first step takes seconds; later steps take about a
millisecond. By default the run gets fresh, empty Inductor and Triton caches (a
temporary directory, removed at the end), so the compile really happens every
run; --warm-cache keeps the user's caches (a shorter compile on a rerun).

A correct profiler says first: compilation (the first step's seconds are
compilation/autotuning on the host, not GPU work), about compile_s.

Truth (TRUTH line): compile_s = wall of the first step - steady_step_ms (the
median wall of the measured steps); first_step_s; backend: "inductor", or
"aot_eager" where Triton or a C compiler is missing (then the compile is
shorter and the figure says so). NVTX: "step" > "forward", "backward".
"""
import os
import shutil
import sys
import tempfile

import common


def pick_backend(torch):
    """inductor when it can build Triton kernels here, else aot_eager."""
    try:
        from torch.utils._triton import has_triton
        triton = has_triton()
    except Exception:  # noqa: BLE001 - a private helper; absent means no
        triton = False
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    return "inductor" if triton and cc else "aot_eager"


def main():
    p = common.parser(__doc__, steps=200)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--image", type=int, default=16, help="image side (pixels)")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=3, help="Linear layers of the MLP (>= 2)")
    p.add_argument("--warm-cache", action="store_true",
                   help="use the existing Inductor/Triton caches instead of fresh ones")
    args = p.parse_args()

    cache = None
    if not args.warm_cache:  # before torch is imported: Inductor reads these at use
        cache = tempfile.mkdtemp(prefix="aon-compile-startup-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    try:
        run(args)
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)


def run(args):
    import torch
    nn = torch.nn
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    backend = pick_backend(torch)
    if backend != "inductor":
        sys.stderr.write("compile_startup: no Triton or C compiler; using backend %s\n" % backend)

    conv = nn.Conv2d(3, 8, 3, padding=1).to(dev)
    layers = [nn.Flatten(), nn.Linear(8 * args.image * args.image, args.hidden), nn.GELU()]
    for _ in range(max(0, args.layers - 2)):
        layers += [nn.Linear(args.hidden, args.hidden), nn.GELU()]
    layers.append(nn.Linear(args.hidden, 10))
    mlp = nn.Sequential(*layers).to(dev)
    compiled = torch.compile(mlp, backend=backend)
    opt = torch.optim.SGD(list(conv.parameters()) + list(mlp.parameters()), lr=1e-2)
    x = torch.randn(args.batch, 3, args.image, args.image, device=dev)
    target = torch.randint(0, 10, (args.batch,), device=dev)
    torch.cuda.synchronize()

    clock = common.StepClock()
    for _ in range(clock.warmup + args.steps):
        clock.begin()
        nvtx.range_push("step")
        nvtx.range_push("forward")
        logits = compiled(torch.relu(conv(x)))
        loss = nn.functional.cross_entropy(logits, target)
        nvtx.range_pop()
        nvtx.range_push("backward")
        loss.backward()
        nvtx.range_pop()
        opt.step()
        opt.zero_grad(set_to_none=True)
        nvtx.range_pop()
        clock.end()
    torch.cuda.synchronize()

    walls = clock.walls_ms()
    truth = clock.figures()
    steady = truth["step_ms"]
    truth.update({
        "compile_s": (walls[0] - steady) / 1e3,
        "first_step_s": walls[0] / 1e3,
        "steady_step_ms": steady,
        "warmup_steps_ms": walls[:clock.warmup],
        "backend": backend,
        "fresh_cache": not args.warm_cache,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
