"""How fast the circuit tools are on the bundled reverse model: head roles, attribution patching,
exact patching and the circuit, as whole processes and in one process; attribution as a ratio to
exact patching of the same heads.

    .venv/bin/python benchmarks/circuit_speed.py [--rounds 3] [--threads 1] [--smoke]

Whole processes: each command timed from launch to exit, so they include starting Python,
importing torch and loading the checkpoint; `minitx inspect reverse` is timed alongside as that
start-up alone. In process: the same work after the model is loaded (median of the rounds):
- roles: head_roles on 500 fresh sequences;
- attribution: one clean and one corrupted forward and one backward for every head's output,
  every residual stream position and every cross-attention input (`patch --method attribution`);
- exact heads: every head patched alone, one forward each, on the same pair;
- exact patching: all `patch --method exact` measures (heads, cross-attention inputs, streams);
- circuit: `minitx circuit` (32 pairs, 200 sequences for the exact match), and the same with an
  exact match of one sequence (how much of it is the exact match).
The commands take turns, round after round, so a burst of load on a shared machine hits them all.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from _options import add_run_options, apply_run_options

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PAIR = ["--clean", "3 1 4 1 5 9 2 6", "--corrupt", "2 7 1 8 2 8 1 8"]


def commands(smoke: bool, threads: int) -> dict[str, list[str]]:
    small = ["--n-pairs", "4", "--n", "10"] if smoke else []
    common = ["--json", "--threads", str(threads or 1)]
    return {
        "start-up (inspect)": ["inspect", "reverse", "--json"],
        "roles": ["heads", "reverse", "--roles", *common],
        "attribution": ["patch", "reverse", *PAIR, "--method", "attribution", *common],
        "exact patching": ["patch", "reverse", *PAIR, "--method", "exact", *common],
        "circuit": ["circuit", "reverse", *small, *common],
    }


def process_seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    run = subprocess.run([str(BIN / "minitx"), *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    took = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"minitx {' '.join(argv)} failed: {run.stderr.strip()[-300:]}")
    return took


def in_process(smoke: bool, device: str) -> dict[str, float]:
    from minitx.checkpoints import load
    from minitx.core.interp.attribution import attribute
    from minitx.core.interp.circuit import find_circuit
    from minitx.core.interp.interventions import all_heads
    from minitx.core.interp.pairs import draw_pairs
    from minitx.core.interp.patching import Patcher, sweep
    from minitx.core.interp.roles import head_roles

    ckpt = load("reverse", device=device)
    model, task = ckpt.model, ckpt.task
    clean, corrupt = (task.parse(PAIR[1]), task.parse(PAIR[3]))

    def seconds(work) -> float:
        start = time.perf_counter()
        work()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    patcher = Patcher(model, task, clean, corrupt)

    def exact_heads() -> None:
        for head in all_heads(model):
            patcher.recovered(patcher.patches([head]))

    pairs = draw_pairs(task, 4 if smoke else 32, 1234, model.cfg.eos_id)
    return {
        "roles": seconds(lambda: head_roles(model, task)),
        "attribution": seconds(lambda: attribute(Patcher(model, task, clean, corrupt))),
        "exact heads": seconds(exact_heads),
        "exact patching": seconds(lambda: sweep(Patcher(model, task, clean, corrupt))),
        "circuit": seconds(lambda: find_circuit(model, task, pairs, accuracy_n=10 if smoke else 200)),
        "circuit, exact match of 1": seconds(lambda: find_circuit(model, task, pairs, accuracy_n=1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every measurement")
    parser.add_argument("--smoke", action="store_true", help="one round, a small circuit: check it runs")
    add_run_options(parser)
    args = parser.parse_args()
    apply_run_options(parser, args)
    rounds = 1 if args.smoke else args.rounds
    runs = commands(args.smoke, args.threads)
    whole: dict[str, list[float]] = {name: [] for name in runs}
    inside: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, argv in runs.items():
            whole[name].append(process_seconds(argv))
        for name, took in in_process(args.smoke, args.device).items():
            inside.setdefault(name, []).append(took)
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}, "
          f"{rounds} round(s), medians")
    print(f"{'what':<26} {'process s':>9} {'in process s':>13}")
    for name in runs:
        own = inside.get(name)
        shown = f"{statistics.median(own):>13.3f}" if own else f"{'':>13}"
        print(f"{name:<26} {statistics.median(whole[name]):>9.2f} {shown}")
    for name in ("exact heads", "circuit, exact match of 1"):
        print(f"{name:<26} {'':>9} {statistics.median(inside[name]):>13.3f}")
    ratio_process = statistics.median(a / e for a, e in zip(whole["attribution"], whole["exact patching"]))
    ratio_heads = statistics.median(a / e for a, e in zip(inside["attribution"], inside["exact heads"]))
    ratio_all = statistics.median(a / e for a, e in zip(inside["attribution"], inside["exact patching"]))
    print(f"ratio attribution / exact patching: whole process {ratio_process:.2f}x, "
          f"in process {ratio_all:.3f}x (every measure), {ratio_heads:.3f}x (heads only)")


if __name__ == "__main__":
    main()
