"""Pairs files of digits for fine-tuning the bundled digit models: copies or reversals, the two
tasks a model can be taught one after the other (tests/core/test_watching.py,
benchmarks/watch_cost.py)."""

from __future__ import annotations

import random
from pathlib import Path


def digit_pairs(path: Path, count: int, seed: int, reverse: bool, longest: int = 8) -> Path:
    """`count` lines 'source<TAB>target' of 4 to `longest` digits, each target the source copied
    or reversed."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        s = [str(rng.randrange(10)) for _ in range(rng.randint(4, longest))]
        lines.append(" ".join(s) + "\t" + " ".join(s[::-1] if reverse else s) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path
