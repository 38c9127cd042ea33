"""Training throughput: steps/s and examples/s, explicit vs fused attention, side by side.

    .venv/bin/python benchmarks/train_speed.py [--steps 60] [--smoke]

Each configuration trains the reference-size model (235,981 parameters) for the same number of
steps after a short warm-up; the fused path is reported as a ratio to the explicit one.
"""

from __future__ import annotations

import argparse
import time

import torch

from core.config import ModelConfig, TrainConfig
from core.train import Trainer


def steps_per_second(attention: str, batch_size: int, steps: int, dropout: float = 0.1) -> float:
    trainer = Trainer(ModelConfig(attention=attention, dropout=dropout),
                      TrainConfig(batch_size=batch_size, eval_every=0, device="cpu", steps=10**6))
    for _ in range(5):  # warm-up: allocator, first-call overheads
        trainer.train_step()
    start = time.perf_counter()
    for _ in range(steps):
        trainer.train_step()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--smoke", action="store_true", help="3 steps, batch 64 only")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    steps = 3 if args.smoke else args.steps
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {steps} timed steps each")
    print(f"{'batch':>5} {'attention':>9} {'steps/s':>8} {'examples/s':>11} {'vs explicit':>12}")
    for batch in [64] if args.smoke else [64, 256]:
        base = None
        for attention in ("explicit", "fused"):
            rate = steps_per_second(attention, batch, steps)
            base = base or rate
            print(f"{batch:>5} {attention:>9} {rate:>8.1f} {rate * batch:>11.0f} {rate / base:>11.2f}x")


if __name__ == "__main__":
    main()
