"""Where a fine-tune's memory goes: one `minitx train --init` run in this process, its resident
memory sampled every 5 ms, and the peak of each stage it passes through (the base's evaluation,
its greedy decodes and its loss, the watching, each training step) beside the memory before it.

    .venv/bin/python benchmarks/fine_tune_stages.py [--shape nllb-600m] [--folder DIR]
                                                    [--steps 1] [--batch-size 4] [-- TRAIN OPTIONS]

The folder and the pairs are benchmarks/fine_tune_memory.py's (that script compares whole
processes with transformers + peft; this one says which stage made minitx's peak). What
follows `--` goes to `minitx train` as it is (`-- --lora=16 --gradient-checkpointing`).
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import threading
import time
from pathlib import Path

from fine_tune_memory import SHAPES, shaped_folder, write_pairs

from minitx.core.training import evaluation
from minitx.core.training.trainer import Trainer
from minitx.tui.cli.main import main as minitx

# what is timed: a training step (the base's evaluation and watching happen in the first), an
# evaluation's greedy decodes and its loss
STAGES = {Trainer: ("train_step", "evaluate", "watch", "snapshot"),
          evaluation: ("greedy_decode", "target_loss")}
SAMPLE_SECONDS = 0.005


def resident_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


class Recorder:
    """The process's resident memory every few milliseconds, and each stage's start and end."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (time, MiB)
        self.stages: list[tuple[str, float, float]] = []  # (name, start, end)
        self._done = threading.Event()

    def stop(self) -> None:
        self._done.set()

    def sample(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.perf_counter(), resident_mib()))
            time.sleep(SAMPLE_SECONDS)

    def wrap(self, owner, name: str) -> None:
        real = getattr(owner, name)

        @functools.wraps(real)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.stages.append((name, start, time.perf_counter()))

        setattr(owner, name, timed)

    def peak(self, start: float, end: float) -> float:
        """The highest sample within the stage (a stage shorter than a sample: at its start)."""
        return max((mib for t, mib in self.samples if start <= t <= end), default=self.at(start))

    def at(self, moment: float) -> float:
        return min(self.samples, key=lambda s: abs(s[0] - moment))[1]

    def report(self, began: float) -> None:
        print(f"peak of the whole run: {max(mib for _, mib in self.samples):,.0f} MiB")
        print(f"{'stage':16} {'seconds':>15} {'at its start':>13} {'its peak':>10}")
        for name, start, end in sorted(self.stages, key=lambda s: s[1]):
            print(f"{name:16} {start - began:7.1f}-{end - began:7.1f} {self.at(start):>9,.0f} MiB "
                  f"{self.peak(start, end):>6,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="opus-mt")
    parser.add_argument("--folder", type=Path, help="make (or reuse) the folder here")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="a tiny model: checks the script runs")
    parser.add_argument("train", nargs="*", help="after --: more options of minitx train")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        folder = shaped_folder(args.folder or scratch / f"{args.shape}-shaped", args.shape, args.smoke)
        train, held = write_pairs(scratch)
        recorder = Recorder()
        for owner, names in STAGES.items():
            for name in names:
                recorder.wrap(owner, name)
        threading.Thread(target=recorder.sample, daemon=True).start()
        began = time.perf_counter()
        try:
            minitx(["train", "--init", str(folder), "--data", str(train), "--valid", str(held),
                    "--no-memory-check", "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                    "--eval-every", "0", "--threads", "1", "--quiet", "--force",
                    "--out", str(scratch / "ft.safetensors"), *args.train], standalone_mode=False)
        finally:
            recorder.stop()
    print(f"memory by stage, {'smoke, ' if args.smoke else ''}{args.shape} shape, "
          f"minitx train {' '.join(args.train)}".rstrip())
    recorder.report(began)


if __name__ == "__main__":
    main()
