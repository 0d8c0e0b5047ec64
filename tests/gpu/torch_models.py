#!/usr/bin/env python3
"""Deterministic PyTorch training loops of different kinds, for AON's operator
and module attribution check (tests/gpu/check_torch_ops.py). No AON code in
them: under aon-run the hook loads by itself.

    python3 tests/gpu/torch_models.py --model cnn --steps 30
    python3 tests/gpu/torch_models.py --model rnn --steps 30 --torch-profiler trace.json

Models (each with its own optimizer, so the optimizer kernels differ too):
  cnn          convolutions, batch norm, pooling; SGD with momentum
  rnn          an embedding, a 2-layer LSTM (cuDNN) and a linear head; SGD with momentum
  transformer  a 4-layer transformer encoder; AdamW (foreach)
Variants:
  --checkpoint      the transformer's layers under torch.utils.checkpoint (recomputed in
                    backward)
  --fused           the optimizer's fused kernels (AdamW(fused=True) / SGD(fused=True))
  --graphs          forward and backward as CUDA graphs (torch.cuda.make_graphed_callables)
  --compile         torch.compile(model)
With --torch-profiler, torch.profiler (CPU + CUDA, with_stack) records the whole
run, from before the model is built (ProfilerStep#0 holds the set-up and the
first iteration, ProfilerStep#i iteration i) and writes its Chrome trace.
Prints STEPS <n> at the end.
"""
import argparse

import torch
import torch.utils.checkpoint


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layers = []
        c = 3
        for width in (32, 64, 64):
            layers += [torch.nn.Conv2d(c, width, 3, padding=1, bias=False),
                       torch.nn.BatchNorm2d(width), torch.nn.ReLU()]
            c = width
        layers.append(torch.nn.MaxPool2d(2))
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(64 * 16 * 16, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class Rnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 128)
        self.lstm = torch.nn.LSTM(128, 256, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(256, 1000)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out[:, -1])


class Encoder(torch.nn.Module):
    def __init__(self, checkpoint):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                             dropout=0.0, batch_first=True) for _ in range(4))
        self.checkpoint = checkpoint

    def forward(self, x):
        for layer in self.layers:
            if self.checkpoint:
                x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return x


def build(name, dev, checkpoint=False):
    """The model, one input batch and a loss function (seeded: every run alike)."""
    torch.manual_seed(0)
    if name == "cnn":
        model = Cnn().to(dev)
        x = torch.randn(16, 3, 32, 32, device=dev)
        y = torch.randint(0, 10, (16,), device=dev)
        return model, x, lambda out: torch.nn.functional.cross_entropy(out, y)
    if name == "rnn":
        model = Rnn().to(dev)
        x = torch.randint(0, 1000, (16, 32), device=dev)
        y = torch.randint(0, 1000, (16,), device=dev)
        return model, x, lambda out: torch.nn.functional.cross_entropy(out, y)
    model = Encoder(checkpoint).to(dev)
    x = torch.randn(8, 64, 256, device=dev)
    target = torch.randn(8, 64, 256, device=dev)
    return model, x, lambda out: torch.nn.functional.mse_loss(out, target)


def optimizer(name, model, fused):
    if name == "transformer":
        return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused or None)
    return torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, fused=fused or None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["cnn", "rnn", "transformer"], required=True)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--checkpoint", action="store_true")
    p.add_argument("--fused", action="store_true")
    p.add_argument("--graphs", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--torch-profiler", default="")
    args = p.parse_args()
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    prof = None
    if args.torch_profiler:
        from torch.profiler import ProfilerAction, ProfilerActivity, profile
        # A schedule makes profile.step() mark ProfilerStep#i ranges (without
        # one it marks none); this one records every step.
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True,
                       schedule=lambda step: ProfilerAction.RECORD)
        prof.start()
    dev = torch.device("cuda", 0)
    model, x, loss_of = build(args.model, dev, args.checkpoint)
    opt = optimizer(args.model, model, args.fused)
    step_model = model
    if args.compile:
        step_model = torch.compile(model)
    if args.graphs:
        # The RNN's input is integer tokens: graphs need a float input with grad
        # off, which make_graphed_callables allows (requires_grad False).
        step_model = torch.cuda.make_graphed_callables(model, (x,))
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=not args.graphs)
        loss = loss_of(step_model(x))
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
