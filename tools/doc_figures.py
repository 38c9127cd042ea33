"""Re-run the commands behind the figures of the README and docs/, and report each figure that
changed. Run it whenever a recipe, a default or a bundled model changes:

    .venv/bin/python tools/doc_figures.py            # every figure (several minutes: some train)
    .venv/bin/python tools/doc_figures.py --only README.md --fast

Each FIGURE names the page, a pattern that finds the figure as the page prints it (one group:
the figure), the command that produces it and how to read the figure from the command's
output. The test suite checks that every pattern still finds its figure on its page
(tests/docs/test_doc_figures.py), so a page edited without its entry here, or an entry left
behind, fails there; this script checks the figures themselves. Figures that are timings are
left out: they depend on the machine (docs/performance.md gives their commands).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MINITX = str(Path(sys.executable).with_name("minitx"))


@dataclass(frozen=True)
class Figure:
    page: str  # relative to the repository
    pattern: str  # finds the figure on the page; group 1 is the figure as printed there
    command: list[str]  # minitx's arguments ({tmp}: a scratch folder)
    read: Callable[[str], str]  # the command's stdout -> the figure, printed as the page prints it
    slow: bool = False  # trains for a while (skipped with --fast)

    def documented(self) -> list[str]:
        return re.findall(self.pattern, (ROOT / self.page).read_text())


def percent(value: float) -> str:
    return f"{value:.1%}"


def accuracy_of(out: str) -> str:
    return percent(json.loads(out)["accuracy"])


def searched(pattern: str) -> Callable[[str], str]:
    """A reader that takes group 1 of `pattern` in the command's output."""
    def read(out: str) -> str:
        found = re.search(pattern, out)
        return found.group(1) if found else "(not in the output)"
    return read


def alignment_range(layer: int) -> Callable[[str], str]:
    def read(out: str) -> str:
        scores = json.loads(out)["alignment"]["scores"][layer]
        return f"{min(scores):.3f}-{max(scores):.3f}"
    return read


def lab_params(variant: str) -> Callable[[str], str]:
    def read(out: str) -> str:
        rows = {row["variant"]: row for row in json.loads(out)["rows"]}
        return f"{rows[variant]['params']:,}"
    return read


TINY = ["train", "--d-model", "32", "--layers", "1", "--steps", "300", "--threads", "1", "--log-every", "300",
        "--out", "{tmp}/tiny.safetensors", "--force"]
SWAPS = ["lab", "baseline", "rms", "learned", "rope", "swiglu", "gqa", "mqa", "modern", "--steps", "1",
         "--seeds", "0", "--eval-size", "10", "--eval-every", "1", "-q", "--threads", "1", "--json"]
FIGURES = [
    Figure("README.md", r"--seed 0 +# exact match (\S+) \(1000/1000\)",
           ["eval", "reverse", "--n", "1000", "--seed", "0", "--json"], accuracy_of),
    Figure("README.md", r"the alignment table\); layer 1's put (\S+)\.", ["inspect", "reverse", "--json"],
           alignment_range(0)),
    Figure("README.md", r"Layer 2's four cross-attention heads put (\S+) of their weight",
           ["inspect", "reverse", "--json"], alignment_range(1)),
    Figure("README.md", r"`compare` prints exact match (\S+) for `reverse`",
           ["compare", "reverse", "reverse-no-shift", "--n", "200", "--json"],
           lambda out: percent(json.loads(out)["a"]["accuracy"])),
    Figure("README.md", r"and a weight distance of (\S+) \(the third command\)",
           ["compare", "reverse", "reverse-no-shift", "--n", "200", "--json"],
           lambda out: f"{json.loads(out)['weight_distance']:.4f}"),
    Figure("README.md", r"has ([\d,]+) parameters and reaches \S+ exact match after its 300 steps", TINY,
           searched(r"· ([\d,]+) params"), slow=True),
    Figure("README.md", r"parameters and reaches (\S+) exact match after its 300 steps", TINY,
           searched(r"final exact match (\S+) on"), slow=True),
    Figure("README.md", r"--seed 2024 +# (\S+) \(1000/1000\)",
           ["eval", "dates", "--n", "1000", "--seed", "2024", "--json"], accuracy_of),
    Figure("README.md", r"exact match falls from 100\.0% to (\S+) \(",
           ["eval", "reverse", "--ablate", "cross:L2", "--n", "1000", "--seed", "0", "--json"], accuracy_of),
    Figure("README.md", r"outputs its mean instead of 0\) it is (\S+)\.",
           ["eval", "reverse", "--ablate", "cross:L2", "--ablate-kind", "mean", "--n", "1000", "--seed", "0",
            "--json"], accuracy_of),
    Figure("README.md", r"without `cross:L2\.H1` it is still (\S+)\.",
           ["eval", "reverse", "--ablate", "cross:L2.H1", "--n", "1000", "--seed", "0", "--json"],
           accuracy_of),
    Figure("README.md", r"`minitx decode reverse \"3 1 4 1 5\" --ablate cross:L2` prints `([\d ]+)`",
           ["decode", "reverse", "3 1 4 1 5", "--ablate", "cross:L2"], lambda out: out.strip()),
    Figure("README.md", r"minitx doctor reverse --quick +# ([^\n]+)",
           ["doctor", "reverse", "--quick"], searched(r"(\d+ passed, \d+ failed, \d+ skipped)")),
    Figure("README.md", r"reverse-no-shift --quick +# (\d+ passed, \d+ failed, \d+ skipped)",
           ["doctor", "reverse-no-shift", "--quick"], searched(r"(\d+ passed, \d+ failed, \d+ skipped)")),
    Figure("README.md", r"\*\*([\d,]+) parameters\*\* \(embeddings", ["inspect", "reverse", "--json"],
           lambda out: f"{json.loads(out)['parameters']['total']:,}"),
    Figure("README.md", r"with a 63-token vocabulary: ([\d,]+)", ["inspect", "dates", "--json"],
           lambda out: f"{json.loads(out)['parameters']['total']:,}"),
    Figure("README.md", r"--lengths 11-16 --n 1000 --seed 0`\s+gives\s+(\S+)\.",
           ["eval", "reverse", "--lengths", "11-16", "--n", "1000", "--seed", "0", "--json"], accuracy_of),
    Figure("README.md", r"`rms` ([\d,]+),", SWAPS, lab_params("rms"), slow=True),
    Figure("README.md", r"`swiglu` ([\d,]+),", SWAPS, lab_params("swiglu"), slow=True),
    Figure("README.md", r"`modern` ([\d,]+)\.", SWAPS, lab_params("modern"), slow=True),
]


def run(figure: Figure, tmp: str, outputs: dict) -> str:
    """The figure from the command's output (each command runs once, for all its figures)."""
    key = tuple(figure.command)
    if key not in outputs:
        argv = [MINITX, *(a.replace("{tmp}", tmp) for a in figure.command)]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=3600)
        if done.returncode not in (0, 1):  # the doctor exits 1 for a model that fails a check
            why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode
            outputs[key] = None, f"(failed: {why})"
        else:
            outputs[key] = done.stdout, ""
    out, failed = outputs[key]
    return failed or figure.read(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one page, e.g. README.md")
    parser.add_argument("--fast", action="store_true", help="leave out the figures that train")
    args = parser.parse_args(argv)
    changed = 0
    outputs: dict[tuple, tuple] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for figure in FIGURES:
            if (args.only and figure.page != args.only) or (args.fast and figure.slow):
                continue
            shown = figure.documented()
            now = run(figure, tmp, outputs)
            same = shown == [now]
            changed += not same
            print(f"{'same   ' if same else 'CHANGED'}  {figure.page}: {shown[0] if shown else '(not found)'}"
                  f" -> {now}   (minitx {' '.join(figure.command)})", flush=True)
    print(f"{changed} figure{'s' if changed != 1 else ''} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
