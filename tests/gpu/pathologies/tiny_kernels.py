#!/usr/bin/env python3
"""tiny_kernels: launch-bound; the host issues tiny kernels slower than they run.

Planted: every step runs --ops tiny elementwise ops (h * a, h + b, sin, tanh in
turn) on --elems-element float32 tensors back to back, then hands the
result to a tiny torch.optim.SGD step as the gradient of the parameter the chain
started from. There is no host work besides launching: each kernel runs in a
couple of microseconds, and PyTorch's eager dispatch plus the launch take
longer, so the GPU idles between kernels.

A correct profiler says first: launch-bound (GPU gaps while the host issued CUDA
calls back to back), about launch_overhead_ms per step; the cure is CUDA graphs
or fusion.

Truth (TRUTH line): eager_step_ms = median wall of a measured eager step;
graph_step_ms = the same step's GPU work captured once in a torch.cuda.CUDAGraph
(the SGD update written as the one foreach-add kernel it launches) and replayed
--replays times back to back after the last step, Event-timed, divided by the
replays: the step's time when launching costs nothing; launch_overhead_ms =
eager_step_ms - graph_step_ms. On an H200 host at the defaults, without a
profiler: eager 4.5 ms (about 11 us a kernel), graph 0.49 ms (1.2 us a kernel).
NVTX: "step" > "tiny", "optimizer".
"""
import common


def main():
    p = common.parser(__doc__, steps=500)
    p.add_argument("--ops", type=int, default=400, help="tiny elementwise ops per step")
    p.add_argument("--elems", type=int, default=1024, help="elements per tensor")
    p.add_argument("--replays", type=int, default=200, help="graph replays timed for the truth")
    args = p.parse_args()

    import torch
    nvtx = torch.cuda.nvtx
    dev = common.cuda_device(torch)
    torch.manual_seed(args.seed)
    lr = 1e-3
    base = torch.rand(args.elems, device=dev)
    a = torch.rand(args.elems, device=dev).mul_(0.5).add_(0.75)
    b = torch.rand(args.elems, device=dev).sub_(0.5)
    w = torch.nn.Parameter(torch.ones(args.elems, device=dev))
    w.grad = torch.zeros_like(w)
    opt = torch.optim.SGD([w], lr=lr)

    def chain():
        """The planted launches, plain eager code: h = f_ops(...f_1(base * w)),
        then grad := h (one kernel each)."""
        with torch.no_grad():
            h = base * w
            for k in range(args.ops):
                op = k % 4
                if op == 0:
                    h = h * a
                elif op == 1:
                    h = h + b
                elif op == 2:
                    h = torch.sin(h)
                else:
                    h = torch.tanh(h)
            w.grad.copy_(h)

    clock = common.StepClock()
    for _ in range(clock.warmup + args.steps):
        clock.begin()
        nvtx.range_push("step")
        nvtx.range_push("tiny")
        chain()
        nvtx.range_pop()
        nvtx.range_push("optimizer")
        opt.step()
        nvtx.range_pop()
        nvtx.range_pop()
        clock.end()
    torch.cuda.synchronize()

    # Reference, after the last step: the same GPU work as a CUDA graph. SGD's
    # step (no momentum, one CUDA parameter) is one foreach add of -lr * grad;
    # capturing opt.step() itself would also run AON's optimizer hook.
    def graph_body():
        chain()
        with torch.no_grad():
            torch._foreach_add_([w], [w.grad], alpha=-lr)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            graph_body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:  # only this thread is held to capture's rules (a profiler's threads run on)
        capture = torch.cuda.graph(graph, capture_error_mode="thread_local")
    except TypeError:  # a torch without the option
        capture = torch.cuda.graph(graph)
    with capture:
        graph_body()
    graph.replay()
    timer = common.EventPairs(torch)
    timer.start()
    for _ in range(args.replays):
        graph.replay()
    timer.stop()
    graph_ms = timer.ms()[0] / args.replays

    truth = clock.figures()
    eager_ms = truth["step_ms"]
    truth.update({
        "ops": args.ops,
        "kernels_per_step": args.ops + 3,
        "eager_step_ms": eager_ms,
        "graph_step_ms": graph_ms,
        "launch_overhead_ms": eager_ms - graph_ms,
        "elems": args.elems,
    })
    common.print_truth(truth)


if __name__ == "__main__":
    main()
