"""Peak resident memory of `minitx train` (default recipe), beside `import torch` alone.

    .venv/bin/python benchmarks/memory.py [--steps 300]

Each is run as a child process and measured with getrusage's ru_maxrss. The app's memory while
training is reported by benchmarks/tui_latency.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def peak_mb(command: list[str]) -> float:
    """Run command in a fresh child (via a tiny wrapper so each child is measured alone)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024  # ru_maxrss is in KB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    minitx = str(Path(sys.executable).with_name("minitx"))
    with tempfile.TemporaryDirectory() as tmp:
        baseline = peak_mb([sys.executable, "-c", "import torch"])
        train = peak_mb([minitx, "train", "--steps", str(args.steps), "--quiet",
                         "--out", os.path.join(tmp, "m.safetensors")])
    print(f"peak RSS  import torch: {baseline:.0f} MB   minitx train ({args.steps} steps): "
          f"{train:.0f} MB   ratio {train / baseline:.2f}x   (target < 600 MB)")


if __name__ == "__main__":
    main()
