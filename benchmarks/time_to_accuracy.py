"""Time to accuracy: wall-clock training seconds until exact match >= 99.8% on 1,000 fresh
sequences (lengths 4-10), for the reference recipe (docs/training.md) and minitx's default recipe.

    .venv/bin/python benchmarks/time_to_accuracy.py [--seeds 0 1 2] [--smoke]

Both recipes run in this one process, alternating per seed, with the same evaluation (every
--eval-every steps, its time excluded from the clock). Reported: per-seed seconds and steps,
the median per recipe, and default/reference as a ratio (the target is <= 0.25).
"""

from __future__ import annotations

import argparse
import statistics

from _options import add_run_options, apply_run_options

from minitx.core.config import DEFAULT_RECIPE, recipe
from minitx.core.training.evaluation import evaluate
from minitx.core.training.trainer import Trainer

TARGET = 0.998


def time_to_accuracy(name: str, seed: int, eval_every: int, eval_n: int, max_steps: int, device: str):
    r = recipe(name)
    # The recipe's own `steps` stays: its schedule depends on it. Past it, training goes on at
    # the schedule's final learning rate until the target or max_steps.
    trainer = Trainer(r.model, r.train.replace(seed=seed, eval_every=0, until=0.0, device=device))
    accuracy = 0.0
    while trainer.step_count < max_steps:
        trainer.train_step()  # trainer.seconds counts training time only
        if trainer.step_count % eval_every == 0:
            accuracy = evaluate(trainer.model, trainer.task, eval_n, seed=10_000 + seed,
                                batch_size=eval_n, min_len=4, max_len=10).accuracy
            if accuracy >= TARGET:
                return trainer.seconds, trainer.step_count, accuracy
    return float("inf"), trainer.step_count, accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--max-steps", type=int, default=6000)
    parser.add_argument("--recipes", nargs=2, default=["reference", DEFAULT_RECIPE],
                        metavar=("BASELINE", "CANDIDATE"))
    parser.add_argument("--smoke", action="store_true", help="20 steps, 1 seed: checks it runs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    if args.smoke:
        args.seeds, args.eval_every, args.max_steps = [0], 10, 20
    baseline, candidate = args.recipes
    results: dict[str, list[float]] = {baseline: [], candidate: []}
    print(f"target: exact match >= {TARGET:.1%} on 1,000 fresh sequences, eval every {args.eval_every}")
    for seed in args.seeds:
        for name in (baseline, candidate):
            seconds, steps, acc = time_to_accuracy(name, seed, args.eval_every, 1000, args.max_steps,
                                                 args.device)
            results[name].append(seconds)
            print(f"seed {seed}  {name:>10}: {seconds:7.1f} s  {steps:5d} steps  accuracy {acc:.3f}",
                  flush=True)
    base, cand = (statistics.median(results[n]) for n in (baseline, candidate))
    print(f"median {baseline}: {base:.1f} s   median {candidate}: {cand:.1f} s   "
          f"ratio {candidate}/{baseline} = {cand / base:.3f}  (target <= 0.25)")


if __name__ == "__main__":
    main()
