"""What guided alignment costs a training step: the Trainer's step with a head taught its pairs'
word links (`--alignments --guided-head`) against the same step without, side by side in one run.

    .venv/bin/python benchmarks/guided_step.py [--steps 200] [--pairs 2000] [--smoke]

Two Trainers of the same model (d_model 64, 4 heads, 2+2 layers, batch 64, same seed, same
pairs: tools/make_swapped_language.py's made-up language, words as tokens) take turns step by
step; one guides head 2:1 at the default weight. Reported: milliseconds per training step for
each (median and mean, evaluations off) and the ratio guided / plain. The unguided step runs the
loop it ran before guided alignment existed (the Trainer takes the guided path only when a head
is named).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _options import add_run_options, apply_run_options

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.training.trainer import Trainer

TOOL = Path(__file__).parents[1] / "tools" / "make_swapped_language.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--smoke", action="store_true", help="5 timed steps on 300 pairs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    steps, pairs = (5, 300) if args.smoke else (args.steps, args.pairs)
    spec = importlib.util.spec_from_file_location("make_swapped_language", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with tempfile.TemporaryDirectory() as folder:
        data, links = Path(folder) / "pairs.tsv", Path(folder) / "pairs.talp"
        tool.write(data, links, pairs)
        model = ModelConfig(d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2,
                            dropout=0.1)
        cfg = TrainConfig(task="data", data=str(data), tokens="word", steps=10**6, batch_size=64,
                          eval_every=0, device=args.device)
        trainers = {"plain": Trainer(model, cfg),
                    "guided": Trainer(model, cfg.replace(alignments=str(links), guided_head="2:1"))}
        times: dict[str, list[float]] = {name: [] for name in trainers}
        for step in range(10 + steps):  # the first 10: warm-up
            for name, trainer in trainers.items():
                start = time.perf_counter()
                trainer.train_step()
                if step >= 10:
                    times[name].append(time.perf_counter() - start)
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}, {steps} timed steps "
          f"each, {pairs} pairs, batch {cfg.batch_size}")
    for name, values in times.items():
        print(f"{name:>7}: {statistics.median(values) * 1e3:6.2f} ms a step (median), "
              f"{sum(values) / len(values) * 1e3:6.2f} ms (mean)")
    print(f"ratio guided / plain = {sum(times['guided']) / sum(times['plain']):.3f}")


if __name__ == "__main__":
    main()
