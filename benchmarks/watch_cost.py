"""What watching a fine-tune costs: the same `minitx train --init` at the fine-tuning defaults,
whole processes timed from launch to exit, with the watching (three held-out probes, --general
pairs, numerics: the defaults plus a general-domain sample) and without it (--no-watch), side by
side in one run, taking turns.

    .venv/bin/python benchmarks/watch_cost.py [--repeats 3] [--model reverse] [--smoke]

The fine-tune: MODEL (default the bundled reverse model, 236k parameters) taught to copy
(1,000 pairs of 4-10 digits, 100 of them held out), 1,000 steps of 16 pairs at its family's
defaults, evaluated every 200 steps (six evaluations with step 0's); the watched run's
--general is 500 reversal pairs (what the model knew; the most a run at the defaults
measures, its --eval-size). Reported per run: the whole process, and the --json timings'
training and evaluation seconds (the watching's time counts as evaluation's); then the
medians and the cost as ratios: (watched - unwatched) / unwatched whole process, in wall
seconds and in the processes' CPU seconds (user and system: what a busy machine's other work
does not add to), and the watching's seconds over the training seconds. Goal: at most 10% of
the training time.
--smoke: 20 steps, one repeat (checks it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the pairs files come from the tests that use them too
from tests.core.digit_pair_files import digit_pairs  # noqa: E402

MINITX = str(Path(sys.executable).parent / "minitx")


def one(model: str, data: Path, general: Path, out: Path, steps: int, watch: bool) -> dict:
    argv = [MINITX, "train", "--init", model, "--data", str(data), "--steps", str(steps), "--out", str(out),
            "--force", "--json", "--threads", "1"]
    argv += ["--general", str(general)] if watch else ["--no-watch"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "PYTHONHASHSEED": "0"})
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {run.stderr.strip()[-500:]}")
    timings = json.loads(run.stdout)["timings"]
    return {"process": seconds, "cpu": cpu, "training": timings["training"],
            "evaluation": timings["evaluation"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="reverse")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    steps, repeats = (20, 1) if args.smoke else (1000, args.repeats)
    runs: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = digit_pairs(tmp / "copy.tsv", 1000, 0, reverse=False, longest=10)
        general = digit_pairs(tmp / "reverse.tsv", 500, 1, reverse=True, longest=10)
        print(f"minitx train --init {args.model} --data copy.tsv --steps {steps} --json --threads 1, "
              f"with --general reverse.tsv (watched) or --no-watch; load average "
              f"{os.getloadavg()[0]:.1f} at the start")
        print("| run | watched | process s | process CPU s | training s | evaluation s |")
        print("|---|---|---:|---:|---:|---:|")
        for i in range(repeats):
            for watch in ((True, False) if i % 2 == 0 else (False, True)):  # taking turns
                r = one(args.model, data, general, tmp / "ft.safetensors", steps, watch)
                runs[watch].append(r)
                print(f"| {i + 1} | {'yes' if watch else 'no'} | {r['process']:.1f} | {r['cpu']:.1f} | "
                      f"{r['training']:.1f} | {r['evaluation']:.1f} |", flush=True)
    fields = ("process", "cpu", "training", "evaluation")
    med = {w: {k: statistics.median(r[k] for r in runs[w]) for k in fields} for w in runs}
    extra = med[True]["process"] - med[False]["process"]
    watching = med[True]["evaluation"] - med[False]["evaluation"]
    print(f"medians: watched {med[True]['process']:.1f} s, unwatched {med[False]['process']:.1f} s "
          f"(whole process); training {med[True]['training']:.1f} s and {med[False]['training']:.1f} s")
    print(f"cost: whole process {extra / med[False]['process']:+.1%} (wall), "
          f"{med[True]['cpu'] / med[False]['cpu'] - 1:+.1%} (CPU seconds: {med[True]['cpu']:.1f} against "
          f"{med[False]['cpu']:.1f}); the watching's seconds "
          f"({watching:.1f} s) over the training seconds: {watching / med[False]['training']:.1%} "
          f"(goal <= 10%)")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
