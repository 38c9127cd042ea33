"""Checkpoint load-to-ready time for the bundled models (torch already imported).

    .venv/bin/python benchmarks/checkpoint_load.py [--repeats 20]

"Ready" means the model is built, weights verified (names, shapes, finiteness) and loaded, in
eval mode. Side by side: building a fresh model of the same config without any file (the floor
that loading cannot beat); the ratio shows what reading and checking the file costs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from minitx.checkpoints import bundled_names, load, resolve
from minitx.core.model.transformer import Seq2Seq


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"torch {torch.__version__}; median of {args.repeats} loads (target < 100 ms)")
    print(f"{'checkpoint':<28} {'load ms':>8} {'fresh model ms':>15} {'ratio':>6}")
    for name in bundled_names():
        ckpt = load(name)
        fresh = median_ms(lambda cfg=ckpt.model_config: Seq2Seq(cfg).eval(), args.repeats)
        loaded = median_ms(lambda n=name: load(n), args.repeats)
        size_kb = resolve(name).stat().st_size / 1024
        print(f"{name:<28} {loaded:>8.1f} {fresh:>15.1f} {loaded / fresh:>5.2f}x  ({size_kb:.0f} KB)")


if __name__ == "__main__":
    main()
