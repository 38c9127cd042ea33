"""Regenerate the bundled deliberately-broken checkpoints, one per bug preset (docs/checks.md).

    .venv/bin/python tools/make_bug_checkpoints.py                 # all five shipped ones
    .venv/bin/python tools/make_bug_checkpoints.py no-shift --steps 1500    # just one

no-warmup is not shipped: its symptom is an oscillating loss curve, which a finished model
does not show.

Each is the reference model and recipe (docs/model.md, docs/training.md) trained with one
`--bug` preset on the CPU with seed 0, saved inference-only in float32 (no training state:
nobody resumes a broken run) with the run's history (its curves and attention snapshots: the
doctor's history checks and the app's replay read them).
The same as `minitx train --recipe reference --bug NAME --device cpu --seed 0` then
`minitx export --history`. About 3 minutes per model on a quiet CPU core (10-20 on a busy one).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from minitx.core.checkpoint import save_checkpoint
from minitx.core.config import BUGS, reference_recipe
from minitx.core.training.trainer import Trainer

SHIPPED = ("no-shift", "no-causal-mask", "no-reverse", "swap-cross", "no-scale")
OUT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"  # next to the bundled models


def make(bug: str, steps: int, seed: int = 0, out_dir: Path = OUT_DIR) -> Path:
    # Pinned to the reference recipe (not the default one), like make_bundled.sh, so the broken
    # models differ from the bundled `reverse` by the bug alone.
    ref = reference_recipe()
    cfg = ref.train.replace(bug=bug, steps=steps, seed=seed, device="cpu", eval_every=steps)
    trainer = Trainer(ref.model, cfg)
    start = time.perf_counter()
    last = trainer.run()
    trainer.measure_weights()  # the accuracy the file states is of the weights it holds
    path = save_checkpoint(out_dir / f"reverse-{bug}.safetensors", trainer.model, trainer.task,
                           trainer.summary(), history=trainer.history.for_sharing())
    path.chmod(0o644)  # package data: readable by everyone (atomic writes start private)
    print(f"{path.name}: {steps} steps, loss {last.loss:.4f}, held-out reverse accuracy "
          f"{last.accuracy:.1%}, {time.perf_counter() - start:.0f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bugs", nargs="*", metavar="BUG",
                        help=f"presets of {', '.join(BUGS)} (default: {' '.join(SHIPPED)})")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (machines are shared)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    for bug in args.bugs or SHIPPED:
        make(bug, args.steps, args.seed)


if __name__ == "__main__":
    main()
