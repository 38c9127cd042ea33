"""The README's and docs' walks run in the clone: what they write (every `--out` file, the pairs
and names files, the tiny folders, the app's exports) is ignored by git, so `git status` stays
clean, while the bundled checkpoints stay tracked and a new one can be added."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ALSO_WRITTEN = ["hf-tiny/marian/config.json", "minitx-exports/explore.svg", "names.tsv", "mine.tsv",
                "pairs.tsv", "trace.json"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                                reason="not a git checkout")


def _ignored(paths: list[str]) -> set[str]:
    run = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    return set(run.stdout.split())


def test_what_the_walks_write_is_ignored_and_the_bundled_checkpoints_are_not():
    written = {name for page in PAGES
               for name in re.findall(r"--out ([\w.-]+\.(?:safetensors|csv|svg|html))\b", page.read_text())}
    assert {"tiny.safetensors", "trace.svg", "run.csv"} <= written  # the walks are read
    paths = sorted(written) + ALSO_WRITTEN
    assert _ignored(paths) == set(paths)
    bundled = ["checkpoints/reverse.safetensors", "checkpoints/a-new-one.safetensors",
               "tests/core/data/bundled_logits.safetensors"]
    assert _ignored(bundled) == set()
