"""Every shell block of docs/huggingface.md runs as written, in order, in an empty folder, on the
tiny folders of each family its own first block makes (tools/make_hf_folders.py --cache): the walk
with MODEL=tiny/marian, then again for T5, Flan-T5 and BART; its Python blocks run in their place
in the walk (they read the folders it writes). Only the app (`minitx-tui`, which
needs a terminal) is left out; tests/tui/test_tui_huggingface.py drives it. The doctor may exit 1
(its weight checks fail on untrained weights, and say so); any other failure fails the walk.
Tier 2: it builds folders and runs some thirty commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "huggingface.md"
BLOCKS = re.compile(r"```(bash|python)\n(.*?)```", re.S)

pytestmark = pytest.mark.slow


def page_script(family: str) -> str:
    """The page's bash blocks as one script, the app's lines out, the walk's model the family's."""
    lines = []
    for kind, block in BLOCKS.findall(PAGE.read_text()):
        if kind == "python":  # it reads what the shell blocks before it wrote
            lines.append(f"{sys.executable} - <<'SNIPPET'\n{block}SNIPPET")
            continue
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip().startswith("minitx-tui"):
                continue
            if line.strip().startswith("minitx doctor"):  # exit 1: a check failed, as it must
                line += " || [ $? -eq 1 ]"  # on untrained weights (2 would be a usage error)
            lines.append(line)
    script = "\n".join(lines)
    script = script.replace(".venv/bin/python tools/", f"{sys.executable} {ROOT / 'tools'}/")
    script = re.sub(r"(?m)^\.venv/bin/python ", f"{sys.executable} ", script)  # the page's python -c
    return script.replace("MODEL=tiny/marian", f"MODEL=tiny/{family}")


@pytest.mark.parametrize("family", ["marian", "t5", "flan-t5", "bart"])
def test_every_command_of_the_page_runs_as_written_on_a_tiny_folder(family, tmp_path):
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1",
           "COLUMNS": "80"}
    env.pop("HF_HUB_CACHE", None)
    run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", page_script(family)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (tmp_path / "en-de.safetensors").exists()  # the last command's conversion
