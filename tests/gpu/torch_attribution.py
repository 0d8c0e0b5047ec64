#!/usr/bin/env python3
"""A deterministic PyTorch training loop for AON's op/module attribution check
(tests/gpu/check_torch_ops.py). No AON code in it: under aon-run the hook
loads by itself.

    python3 tests/gpu/torch_attribution.py --steps 40
    python3 tests/gpu/torch_attribution.py --steps 40 --torch-profiler trace.json \
        --profile-steps 20:23

The model is bench/always_on/train_loop.py's (4-layer transformer encoder,
AdamW). With --torch-profiler, torch.profiler (CPU + CUDA, with_stack) records
iterations [a, b) and writes its Chrome trace. Prints STEPS <n> at the end.
"""
import argparse

import torch


def build(dev):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).to(dev)
    return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--torch-profiler", default="")
    p.add_argument("--profile-steps", default="20:23")
    args = p.parse_args()
    dev = torch.device("cuda", 0)
    model = build(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 64, 256, device=dev)
    target = torch.randn(8, 64, 256, device=dev)
    prof = None
    if args.torch_profiler:
        a, b = (int(v) for v in args.profile_steps.split(":"))
        from torch.profiler import ProfilerActivity, profile, schedule
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True,
                       schedule=schedule(wait=a - 1, warmup=1, active=b - a, repeat=1))
        prof.start()
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        if prof is not None:
            prof.step()
    torch.cuda.synchronize()
    if prof is not None:
        prof.stop()
        prof.export_chrome_trace(args.torch_profiler)
    print("STEPS %d" % args.steps, flush=True)


if __name__ == "__main__":
    main()
