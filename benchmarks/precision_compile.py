"""Mixed precision and torch.compile: do they pay for training and decoding here?

    .venv/bin/python benchmarks/precision_compile.py [--device cuda] [--model big] [--smoke]

Variants of one training step (batch 64, 40-token sources; fused attention, no dropout) and of
greedy decoding 500 sources, side by side in this process on the same model and batches:
- plain: float32, as minitx runs today (the baseline);
- bf16: the same under torch.autocast(dtype=bfloat16) (weights and optimizer stay float32);
- compile: torch.compile(model) in float32 (its compilation time is reported apart, not in
  the per-step figure); only with --compile, since compiling on a CPU needs a C compiler and
  takes minutes.
Each variant's median and its ratio to plain (below 1: faster), and the bf16 step's loss
against float32's on the same batch (how far the arithmetic moves).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.nn.functional as F
from _options import add_run_options, apply_run_options
from scaling import MODELS, clock

from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.interp.decode import greedy_decode
from minitx.core.model.transformer import Seq2Seq


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(MODELS), default="big")
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="also the torch.compile variant")
    parser.add_argument("--smoke", action="store_true", help="a small model, 1 repeat")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    if args.smoke:
        args.model, args.length, args.repeats = "reference", 8, 1
    device = args.device
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(dropout=0.0, attention="fused", max_len=args.length + 2,
                                **MODELS[args.model])).to(device)
    task, generator = get_task("reverse", args.length, args.length), torch.Generator().manual_seed(0)
    batch = task.batch(64, generator)
    src, dec_in, labels = (t.to(device) for t in (batch.src, batch.decoder_input, batch.labels))
    sources = task.batch(500 if not args.smoke else 16, generator).src.to(device)
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=1e-6)

    def context(variant: str):
        if variant == "bf16":
            return torch.autocast(device_type=device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step(net, variant: str) -> float:
        net.train()
        with context(variant):
            logits = net(src, dec_in)  # (B, T, V)
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(),
                                   ignore_index=model.cfg.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    def decode(variant: str) -> None:
        with context(variant), torch.inference_mode():
            greedy_decode(model.eval(), sources, max_new_tokens=args.length + 1)

    nets = {"plain": model, "bf16": model}
    if args.compile:
        start = time.perf_counter()
        nets["compile"] = torch.compile(model)
        step(nets["compile"], "compile")
        print(f"torch.compile: first step (compilation) {time.perf_counter() - start:.1f} s")
    with torch.no_grad():
        model.eval()
        exact = F.cross_entropy(model(src, dec_in).flatten(0, 1), labels.flatten(),
                                ignore_index=model.cfg.pad_id)
        with context("bf16"):
            low = F.cross_entropy(model(src, dec_in).float().flatten(0, 1), labels.flatten(),
                                  ignore_index=model.cfg.pad_id)
    train_s = {v: clock(lambda v=v: step(nets[v], v), args.repeats, device) for v in nets}
    decode_s = {v: clock(lambda v=v: decode(v), max(1, args.repeats // 3), device)
                for v in ("plain", "bf16")}
    print(f"{args.model} model, {sum(p.numel() for p in params):,} parameters, {args.length}-token "
          f"sources, device {device}, threads {torch.get_num_threads()}")
    for v, s in train_s.items():
        print(f"  train step {v:>8}: {1000 * s:8.1f} ms  ratio to plain {s / train_s['plain']:.2f}")
    for v, s in decode_s.items():
        print(f"  decode {len(sources):>3} {v:>8}: {s:8.2f} s   ratio to plain {s / decode_s['plain']:.2f}")
    print(f"  loss on one batch: float32 {float(exact):.5f}, bf16 autocast {float(low):.5f}")


if __name__ == "__main__":
    main()
