"""Whole-process time to accuracy: `minitx train` on its defaults, timed from launch to exit,
against the reference recipe as a plain training script, side by side in one run.

    .venv/bin/python benchmarks/process_time_to_accuracy.py [--seeds 0 1 2] [--smoke]

For each seed the two take turns (which goes first alternates):
- the reference: benchmarks/_reference_recipe.py, a plain script of the reference recipe that
  stops at 99.8% exact match on 1,000 fresh sequences (evaluated every 50 steps). Its figure is
  its own clock of training seconds, evaluations and start-up excluded: the strict baseline.
  Its launch-to-exit time is shown too.
- minitx: `minitx train --seed SEED --out FILE --json` and nothing else, timed from launch to
  exit. Its --json timings split the time into training, evaluation and saving; the rest is
  start-up (imports, building the model) and exit.
- the check, outside both clocks: `minitx eval FILE --n 1000 --lengths 4-10 --seed 98765`,
  greedy decoding of 1,000 fresh sequences (lengths 4-10, both ends included). A run that falls
  short of 99.8% there is reported as a miss and its time does not count.

Reported: each run, the medians, and minitx's process seconds over the reference's training
seconds (target: <= 0.20). --smoke: 20 steps each, one seed, no accuracy asked (checks it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MINITX = str(Path(sys.executable).parent / "minitx")
TARGET = 0.998
CHECK = ["--n", "1000", "--lengths", "4-10", "--seed", "98765"]  # a stream neither run saw


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {run.stderr.strip()[-500:]}")
    return seconds, run.stdout


def reference(seed: int, max_steps: int, device: str) -> dict:
    seconds, out = timed([sys.executable, str(ROOT / "benchmarks" / "_reference_recipe.py"),
                          str(seed), "--max-steps", str(max_steps), "--device", device])
    result = json.loads(out.strip().splitlines()[-1])
    return {"seconds": result["train_seconds"], "process": seconds, "steps": result["steps"],
            "accuracy": result["accuracy"]}


def minitx(seed: int, folder: str, extra: list[str]) -> dict:
    out_file = os.path.join(folder, f"default-{seed}.safetensors")
    seconds, out = timed([MINITX, "train", "--seed", str(seed), "--out", out_file, "--json", *extra])
    data = json.loads(out)
    t = data["timings"]
    _, check = timed([MINITX, "eval", out_file, *CHECK, "--json"])
    return {"seconds": seconds, "steps": data["summary"]["steps"],
            "accuracy": json.loads(check)["accuracy"],
            "parts": {"start-up and exit": seconds - t["loop"] - t["saving"],
                      "training": t["training"], "evaluation": t["evaluation"],
                      "saving": t["saving"]}}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=6000, help="the reference's limit")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="both runs' device (minitx train --device)")
    parser.add_argument("--smoke", action="store_true", help="20 steps, 1 seed: checks it runs")
    args = parser.parse_args()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA GPU is available on this machine")
    extra = ["--device", args.device]
    target = TARGET
    if args.smoke:
        args.seeds, args.max_steps, target = args.seeds[:1], 20, 0.0
        extra += ["--steps", "20"]
    print(f"target: exact match >= {TARGET:.1%} on 1,000 fresh sequences (lengths 4-10); "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    ref_times, ref_process, ours, parts = [], [], [], []
    with tempfile.TemporaryDirectory() as folder:
        for i, seed in enumerate(args.seeds):
            runs = {}
            for name in (("reference", "minitx") if i % 2 == 0 else ("minitx", "reference")):
                runs[name] = (reference(seed, args.max_steps, args.device) if name == "reference"
                              else minitx(seed, folder, extra))
            ref, own = runs["reference"], runs["minitx"]
            ref_times.append(ref["seconds"])
            ref_process.append(ref["process"])
            met = own["accuracy"] >= target
            if met:
                ours.append(own["seconds"])
                parts.append(own["parts"])
            print(f"seed {seed}  reference: {ref['seconds']:6.1f} s training ({ref['process']:.1f} s "
                  f"process), {ref['steps']} steps, {ref['accuracy']:.1%}   minitx train: "
                  f"{own['seconds']:5.1f} s process, {own['steps']} steps, "
                  f"{own['accuracy']:.1%} on the check" + ("" if met else "  MISS"), flush=True)
    base, cand = median(ref_times), median(ours)
    print(f"median reference: {base:.1f} s training ({median(ref_process):.1f} s process)   "
          f"median minitx train: {cand:.1f} s process ({len(ours)}/{len(args.seeds)} met the check)")
    if parts:
        split = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
        print("minitx train's time: " + ", ".join(f"{k} {v:.1f} s" for k, v in split.items()))
    print(f"ratio minitx process / reference training = {cand / base:.3f}  (target <= 0.20); "
          f"/ reference process = {cand / median(ref_process):.3f}")


if __name__ == "__main__":
    main()
