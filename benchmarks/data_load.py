"""Loading a data file of pairs: time and peak memory for 1M pairs, against a plain-Python
baseline in the same run; and training examples/s on `dates` against `reverse`.

    .venv/bin/python benchmarks/data_load.py [--pairs 1000000] [--steps 40] [--threads 1] [--smoke]

Each load runs in a fresh process, so its peak RSS (above the process after its imports) is its
own. "minitx" is what `minitx train --data` does: read and check every line, hold out 5%, build
the vocabulary from the training pairs, store ids as flat arrays. The baseline reads the same
file into Python lists of ids per pair, the way a first version would. Training: the default
recipe's reference-size model, dates and reverse trainers taking turns step by step.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _options import add_run_options, apply_run_options

WORDS = ("the", "a", "cat", "dog", "sat", "on", "mat", "red", "green", "blue", "runs", "fast",
         "slowly", "under", "over", "house", "tree", "river", "stone", "light")


def write_file(path: Path, pairs: int) -> None:
    """Sentences of 2-8 words -> the same words reversed: ~45 characters a side."""
    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(pairs):
            words = rng.choices(WORDS, k=rng.randint(2, 8))
            f.write(" ".join(words) + "\t" + " ".join(reversed(words)) + "\n")


def baseline_load(path: Path, level: str) -> int:
    """Python lists of ids per pair, a vocabulary dict grown as tokens come: no checks."""
    ids: dict[str, int] = {}
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            source, target = line.rstrip("\n").split("\t")
            split = list if level == "char" else str.split
            pairs.append(([ids.setdefault(t, len(ids)) for t in split(source)],
                          [ids.setdefault(t, len(ids)) for t in split(target)]))
    return len(pairs)


def minitx_load(path: Path, level: str) -> int:
    from minitx.core.data.pair_task import PairsTask

    task = PairsTask.from_files(str(path), level=level, positions=512)
    return len(task.train) + len(task.heldout)


def child(kind: str, level: str, path: Path) -> None:
    """Run one load in this (fresh) process; print seconds and peak RSS growth in MiB."""
    import minitx.core.data.pair_task  # noqa: F401  imports are not part of the load

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    n = (minitx_load if kind == "minitx" else baseline_load)(path, level)
    seconds = time.perf_counter() - start
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024  # KiB -> MiB
    print(f"{seconds:.3f} {grown:.1f} {n}")


def measure(kind: str, level: str, path: Path) -> tuple[float, float]:
    run = subprocess.run([sys.executable, __file__, "--child", kind, level, str(path)],
                         capture_output=True, text=True, check=True)
    seconds, mib, _ = run.stdout.split()
    return float(seconds), float(mib)


def training_rates(steps: int, device: str) -> dict[str, float]:
    """Examples/s of dates and reverse trainers stepping in turn (so load hits both alike)."""
    from minitx.core.config import fast_recipe
    from minitx.core.training.trainer import Trainer

    recipe = fast_recipe()
    trainers = {task: Trainer(recipe.model, recipe.train.replace(task=task, eval_every=0, until=0.0,
                                                                 steps=10**6, device=device))
                for task in ("reverse", "dates")}
    seconds = dict.fromkeys(trainers, 0.0)
    for step in range(3 + steps):  # 3 warm-up steps
        for task, trainer in trainers.items():
            start = time.perf_counter()
            trainer.train_step()
            if step >= 3:
                seconds[task] += time.perf_counter() - start
    return {task: steps * recipe.train.batch_size / s for task, s in seconds.items()}


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=40, help="timed training steps per task")
    parser.add_argument("--smoke", action="store_true", help="2,000 pairs, 2 training steps")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    pairs, steps = (2000, 2) if args.smoke else (args.pairs, args.steps)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pairs.tsv"
        write_file(path, pairs)
        size = path.stat().st_size / 2**20
        print(f"{pairs:,} pairs, {size:.1f} MiB of TSV; each load in a fresh process")
        print(f"{'tokens':>6} {'loader':>8} {'seconds':>8} {'peak MiB':>9} {'bytes/pair':>10} "
              f"{'time vs baseline':>16} {'memory vs baseline':>18}")
        for level in ("char", "word"):
            results = {kind: measure(kind, level, path) for kind in ("baseline", "minitx")}
            base_s, base_mib = results["baseline"]
            for kind, (s, mib) in results.items():
                print(f"{level:>6} {kind:>8} {s:>8.2f} {mib:>9.1f} {mib * 2**20 / pairs:>10.0f} "
                      f"{s / base_s:>15.2f}x {mib / max(base_mib, 0.1):>17.2f}x")
    print(f"training, default recipe, batch 64, {steps} timed steps each, torch threads "
          f"{torch.get_num_threads()}, {args.device}")
    rates = training_rates(steps, args.device)
    for task, rate in rates.items():
        print(f"{task:>8} {rate:>9,.0f} examples/s {rate / rates['reverse']:>6.2f}x reverse")


if __name__ == "__main__":
    main()
