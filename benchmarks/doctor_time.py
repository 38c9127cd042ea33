"""How long `minitx doctor` takes on the reference size, as a whole process, beside a baseline.

    .venv/bin/python benchmarks/doctor_time.py [--rounds 3] [--threads N] [--model NAME] [--smoke]

Each figure is a process timed from launch to exit: what a person waits for after typing the
command, torch's import and the checkpoint's load included. The baseline is `minitx decode` of
the same checkpoint (the same start-up, import and load, and one decode), so the ratio is what
the checks themselves cost on top of any minitx command. The commands take turns, round after
round, so a change in the shared machine's load hits them all alike; medians are reported.
Targets (the doctor's issue): the full doctor at most 30 s, --quick at most 10 s.

--model picks the checkpoint (a bundled name or a path; default reverse, the reference size).
--smoke: one round, --quick only: checks that the script runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGETS = {"quick": 10.0, "full": 30.0}  # seconds, whole process


def timed(argv: list[str], codes: tuple[int, ...]) -> float:
    start = time.perf_counter()
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    if run.returncode not in codes:
        raise SystemExit(f"{' '.join(argv)} exited with {run.returncode}: {run.stderr.strip()[-500:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="passed to every command")
    parser.add_argument("--model", default="reverse", help="checkpoint: a bundled name or a path")
    parser.add_argument("--smoke", action="store_true", help="one round, --quick only")
    args = parser.parse_args()
    rounds = 1 if args.smoke else args.rounds
    threads = ["--threads", str(args.threads)] if args.threads else []
    minitx = str(BIN / "minitx")
    # (label, argv, exit codes that mean "it ran": the doctor exits 1 when it finds a problem)
    jobs = [
        (f'minitx decode {args.model} "3 1 4 1 5"', [minitx, "decode", args.model, "3 1 4 1 5", *threads],
         (0,)),
        (f"minitx doctor {args.model} --quick", [minitx, "doctor", args.model, "--quick", *threads], (0, 1)),
    ]
    if not args.smoke:
        jobs.append((f"minitx doctor {args.model}", [minitx, "doctor", args.model, *threads], (0, 1)))
    times: dict[str, list[float]] = {label: [] for label, _, _ in jobs}
    for r in range(rounds):
        for label, argv, codes in jobs[r % len(jobs):] + jobs[: r % len(jobs)]:  # rotate who goes first
            times[label].append(timed(argv, codes))
    medians = {label: statistics.median(t) for label, t in times.items()}
    baseline = medians[jobs[0][0]]
    width = max(len(label) for label in medians)
    print(f"minitx doctor, whole process (launch to exit), median of {rounds} round(s)"
          + (f", --threads {args.threads}" if args.threads else ", minitx's default threads"))
    for i, (label, seconds) in enumerate(medians.items()):
        line = f"  {label:<{width}} {seconds:6.2f} s  {seconds / baseline:5.2f}x the decode"
        if i:
            target = TARGETS["quick" if label.endswith("--quick") else "full"]
            line += f"  target <= {target:.0f} s: {'met' if seconds <= target else 'NOT met'}"
        else:
            line += "  (baseline)"
        print(line)


if __name__ == "__main__":
    main()
