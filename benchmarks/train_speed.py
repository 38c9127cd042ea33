"""Training throughput: steps/s and examples/s, explicit vs fused attention, side by side.

    .venv/bin/python benchmarks/train_speed.py [--steps 60] [--smoke]

Explicit and fused trainers of the reference-size model (235,981 parameters) take turns, step
by step on the same data, after a short warm-up; fused is reported as a ratio to explicit. Two kinds
of batch: the reference recipe's (mixed lengths, so padding masks, dropout 0.1) and the default
recipe's (one length per batch, no padding, dropout 0), where fused attention needs no mask and
runs scaled_dot_product_attention's is_causal path.
"""

from __future__ import annotations

import argparse
import time

import torch
from _options import add_run_options, apply_run_options

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.training.trainer import Trainer

BATCH_KINDS = {
    "padded": ({"dropout": 0.1}, {}),  # the reference recipe's data and dropout
    "one-length": ({"dropout": 0.0}, {"bucket_lengths": True}),  # the default recipe's
}


def make_trainer(attention: str, batch_size: int, kind: str, device: str) -> Trainer:
    model_changes, train_changes = BATCH_KINDS[kind]
    return Trainer(ModelConfig(attention=attention, **model_changes),
                   TrainConfig(batch_size=batch_size, eval_every=0, device=device, steps=10**6,
                               **train_changes))


def steps_per_second(batch_size: int, steps: int, kind: str, device: str) -> dict[str, float]:
    """Explicit and fused trainers step in turn on the same data, so a burst of load on a
    shared machine slows both alike; each one's own step times are summed."""
    trainers = {a: make_trainer(a, batch_size, kind, device) for a in ("explicit", "fused")}
    seconds = dict.fromkeys(trainers, 0.0)
    for step in range(5 + steps):  # the first 5: warm-up (allocator, first-call overheads)
        for attention, trainer in trainers.items():
            start = time.perf_counter()
            trainer.train_step()
            if step >= 5:
                seconds[attention] += time.perf_counter() - start
    return {attention: steps / s for attention, s in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--smoke", action="store_true", help="3 steps, batch 64 only")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    steps = 3 if args.smoke else args.steps
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}, "
          f"{steps} timed steps each")
    print(f"{'batches':>10} {'batch':>5} {'attention':>9} {'steps/s':>8} {'examples/s':>11} "
          f"{'vs explicit':>12}")
    for kind in BATCH_KINDS:
        for batch in [64] if args.smoke else [64, 256]:
            rates = steps_per_second(batch, steps, kind, args.device)
            for attention, rate in rates.items():
                print(f"{kind:>10} {batch:>5} {attention:>9} {rate:>8.1f} {rate * batch:>11.0f} "
                      f"{rate / rates['explicit']:>11.2f}x")


if __name__ == "__main__":
    main()
