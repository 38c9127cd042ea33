"""Default threads on a busy machine: `minitx train`, `minitx eval` and the app's training with
one core kept busy by another process, at minitx's default thread count and at each --threads.

    .venv/bin/python benchmarks/busy_machine.py [--rounds 3] [--idle] [--smoke]

Every figure is a whole process, timed from launch to exit (the app: steps/s of its worker over
a window, turned into seconds per 100 steps), so it includes what a person waits for. The
variants take turns, round after round, so a change in the shared machine's load hits them all
alike; each variant's median is reported, and the default's as a ratio to the best variant
(target: <= 1.5). "spinning" is --threads at the core count with OpenMP's own waiting, as
before minitx asked for passive waiting (OMP_WAIT_POLICY=PASSIVE, core/training/threads.py).

The busy process is `python -c "while 1: pass"`, started here and ended by its PID. --idle
measures without it as well (the cost of the default on an idle machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
BIN = Path(sys.executable).parent
TIMEOUT = 180.0  # a collapsed variant is reported as "over" this, not waited for


def usable_cores() -> int:
    from minitx.core.training.threads import usable_cores as cores

    return cores()


def variants(cores: int) -> dict[str, dict]:
    """name -> {"threads": --threads or None, "env": extra environment}."""
    out = {"default": {"threads": None, "env": {}}}
    for n in sorted({1, cores}):
        out[f"--threads {n}"] = {"threads": n, "env": {}}
    if cores > 1:  # libgomp takes an unknown value as unset, its own spin-then-sleep policy
        out[f"--threads {cores} spinning"] = {"threads": cores, "env": {"OMP_WAIT_POLICY": "unset"}}
    return out


def clean_env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    return {**env, **extra}


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    try:
        run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return float("inf")
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {run.stderr.strip()[-500:]}")
    return time.perf_counter() - start


def train_seconds(variant: dict, steps: int, folder: str) -> float:
    argv = [str(BIN / "minitx"), "train", "--steps", str(steps), "--eval-every", "0", "--quiet",
            "--out", os.path.join(folder, "busy.safetensors"), "--force"]
    if variant["threads"]:
        argv += ["--threads", str(variant["threads"])]
    return timed(argv, clean_env(variant["env"]))


def eval_seconds(variant: dict, n: int) -> float:
    argv = [str(BIN / "minitx"), "eval", "reverse", "--n", str(n)]
    if variant["threads"]:
        argv += ["--threads", str(variant["threads"])]
    return timed(argv, clean_env(variant["env"]))


def app_seconds_per_100(variant: dict, window: float, tiny: bool) -> float:
    """The app has no --threads: OMP_NUM_THREADS is how a person sets its count."""
    env = dict(variant["env"])
    if variant["threads"]:
        env["OMP_NUM_THREADS"] = str(variant["threads"])
    argv = [sys.executable, str(ROOT / "benchmarks" / "_app_training_rate.py"), str(window)]
    run = subprocess.run(argv + (["--tiny"] if tiny else []), cwd=ROOT, env=clean_env(env),
                         capture_output=True, text=True, timeout=TIMEOUT + window)
    if run.returncode != 0:
        raise SystemExit(f"the app's training failed: {run.stderr.strip()[-500:]}")
    rate = float(run.stdout.split()[-1])
    return 100 / rate if rate > 0 else float("inf")


def measure(args, names: dict[str, dict], folder: str) -> dict[str, dict[str, list[float]]]:
    jobs = {
        f"minitx train --steps {args.steps}": lambda v: train_seconds(v, args.steps, folder),
        f"minitx eval reverse --n {args.n}": lambda v: eval_seconds(v, args.n),
        "app training, s per 100 steps": lambda v: app_seconds_per_100(v, args.window, args.smoke),
    }
    times = {job: {name: [] for name in names} for job in jobs}
    order = list(names)
    for r in range(args.rounds):
        for job, run in jobs.items():
            for name in order[r % len(order):] + order[: r % len(order)]:  # rotate who goes first
                times[job][name].append(run(names[name]))
    return times


def report(title: str, times: dict[str, dict[str, list[float]]]) -> None:
    print(title)
    width = max(len(n) for job in times.values() for n in job)
    for job, by_variant in times.items():
        medians = {n: statistics.median(t) for n, t in by_variant.items()}
        best_name = min((n for n in medians if n != "default"), key=medians.get)
        best = medians[best_name]
        print(f"  {job}")
        for name, m in medians.items():
            shown = f">{TIMEOUT:.0f} s" if m == float("inf") else f"{m:6.2f} s"
            print(f"    {name:<{width}} {shown:>9}  {m / best:5.2f}x the best"
                  + ("  <- default" if name == "default" else ""))
        print(f"    default / best ({best_name}) = {medians['default'] / best:.2f}  (target <= 1.5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100, help="steps of each minitx train")
    parser.add_argument("--n", type=int, default=1000, help="sequences of each minitx eval")
    parser.add_argument("--window", type=float, default=6.0, help="seconds the app trains")
    parser.add_argument("--idle", action="store_true", help="also measure without the busy process")
    parser.add_argument("--smoke", action="store_true",
                        help="1 round, tiny runs, 2 variants: checks it runs")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.steps, args.n, args.window = 1, 3, 20, 0.5
    cores = usable_cores()
    from minitx.core.training.threads import cores_but_one

    names = variants(cores)
    if args.smoke:  # two variants cover both ways in: --threads and the environment
        names = {n: v for n, v in names.items() if n == "default" or "spinning" in n} \
            if cores > 1 else names
    print(f"{cores} usable cores; the default is {cores_but_one()} thread(s), passive waiting; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        if args.idle:
            report("no busy process:", measure(args, names, folder))
        busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
        try:
            time.sleep(0.5)
            report("one core kept busy by another process:", measure(args, names, folder))
        finally:
            busy.kill()  # by its PID: only the process started here
            busy.wait()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
