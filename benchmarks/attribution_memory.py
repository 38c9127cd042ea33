"""Source attribution's peak memory on a big model's long decode, beside the decode alone.

    .venv/bin/python benchmarks/attribution_memory.py [--folder DIR] [--new-tokens 511] [--seconds 60]
                                                      [--threads 1] [--smoke]

The model is a random Hugging Face Marian folder of opus-mt's shape (benchmarks/_hf_folder.py:
73.9M parameters, 58,101 pieces, 512 positions) whose greedy decode makes exactly --new-tokens
tokens; --folder reuses one made before. Each line is a child process, measured with getrusage's
ru_maxrss, that opens the folder and decodes the same source:

1. the baseline: the decode alone;
2. each method (ig with 32 points, ixg, occlusion) of the decode's last step alone
   (`attribute_step`, what the app's row computes there): the deepest rows there are;
3. each method of every step (`attribute`, what `minitx attribute` and the app's matrix compute),
   stopped through its progress callback after --seconds (ig of 511 steps takes hours on a CPU):
   how far it got, and its peak.

Each peak is given against the baseline's. --smoke: a tiny folder of the same kind, a few steps.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _hf_folder import OPUS_MT, SMOKE, make_folder

SOURCE = "The quick brown fox jumps over the lazy dog."
METHODS = ("ig", "ixg", "occlusion")


def child(folder: str, what: str, method: str, seconds: float, threads: int) -> None:
    """In the measured process: decode, then the measured work; prints how far it got."""
    from minitx.checkpoints import load
    from minitx.core.interp import source_attribution as sa
    from minitx.core.training.threads import set_threads

    set_threads(threads or None)
    ckpt = load(folder)
    model, task = ckpt.model, ckpt.task
    decode = sa.greedy(model, task, task.parse(SOURCE))
    steps = len(decode.tokens)
    if what == "decode":
        print(f"{steps}/{steps} steps")
        return
    if what == "last":
        sa.attribute_step(model, decode.src, decode.tokens[:-1], decode.tokens[-1], method)
        print(f"step {steps} of {steps}")
        return
    start, reached = time.monotonic(), [0.0, 0]

    def progress(done: float, total: int) -> bool:
        reached[:] = [done, total]
        return time.monotonic() - start > seconds

    try:
        sa.attribute(model, decode, method, progress=progress)
    except sa.Cancelled:
        pass
    print(f"{reached[0]:.1f}/{reached[1]} {sa.PROGRESS_UNITS[method]}")


def measured(args: argparse.Namespace, folder: Path, what: str, method: str = "") -> tuple[float, str]:
    """(peak RSS in GB, what the child printed) of one child."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "out = subprocess.run(sys.argv[1:], check=True, capture_output=True, text=True).stdout\n"
        "print(out.strip().splitlines()[-1])\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    command = [sys.executable, __file__, "--child", str(folder), what, method or "-", str(args.seconds),
               str(args.threads)]
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    elapsed = time.monotonic() - start
    return int(out[-1]) / 1024 / 1024, f"{out[-2]} · {elapsed:.0f} s"  # ru_maxrss is in KB on Linux


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        folder, what, method, seconds, threads = sys.argv[2:7]
        child(folder, what, method, float(seconds), int(threads))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=None, help="a folder made before (else one is made)")
    parser.add_argument("--new-tokens", type=int, default=511, help="the decode's length, in tokens")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each method of every step runs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: minitx's default)")
    parser.add_argument("--smoke", action="store_true", help="a tiny folder, a few steps: checks the script")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder
        if folder is None:
            shape, tokens = (SMOKE, 8) if args.smoke else (OPUS_MT, args.new_tokens)
            folder = make_folder(Path(tmp) / "folder", shape, new_tokens=tokens)
        baseline, said = measured(args, folder, "decode")
        print(f"{folder}, source {SOURCE!r}, threads {args.threads}; peak RSS (ru_maxrss), against the "
              "decode alone")
        print(f"{'decode alone (the baseline)':<32} {baseline:5.2f} GB          {said}")
        for what, label in (("last", "{} of the last step"), ("every", "{} of every step, {:.0f} s")):
            for method in METHODS:
                peak, said = measured(args, folder, what, method)
                name = label.format(method, args.seconds)
                print(f"{name:<32} {peak:5.2f} GB {peak / baseline:5.2f}x   {said}")


if __name__ == "__main__":
    main()
