"""Every Python snippet in the README and docs/ runs as printed, and every value a snippet's
`print(...)  # value` line promises is the value it prints: a drifted figure or a renamed
function fails here, not in a reader's terminal. A snippet of the reader's own code (it starts
`# in your own training code`) can only be compiled: its names are the reader's."""

from __future__ import annotations

import contextlib
import io
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
THEIRS = "# in your own training code"
PROMISE = re.compile(r"^(?P<indent>\s*)print\((?P<expr>.+)\)\s+#\s*(?P<value>-?[\d.]+)\s*$")


# Snippets that run for seconds (the library's whole walk through interventions: an evaluation,
# a patching sweep, a circuit and the roles), for tier 2; their functions have tier-1 tests.
SECOND_TIER = {"interventions.md#1"}


def snippets():
    for page in PAGES:
        if page.name == "huggingface.md":  # its snippets read the folders its walk writes: they run
            continue  # in that walk (tests/docs/test_huggingface_page.py)
        for number, code in enumerate(BLOCK.findall(page.read_text()), 1):
            name = f"{page.name}#{number}"
            yield pytest.param(code, id=name, marks=[pytest.mark.slow] if name in SECOND_TIER else [])


def checked(code: str) -> str:
    """The snippet with each `print(x)  # 0.035` line turned into a check of that value."""
    lines = []
    for line in code.splitlines():
        m = PROMISE.match(line)
        lines.append(f"{m['indent']}_promised({m['expr']}, {m['value']!r})" if m else line)
    return "\n".join(lines)


def _promised(value, shown: str) -> None:
    digits = len(shown.split(".")[1]) if "." in shown else 0
    assert math.isclose(float(value), float(shown), abs_tol=0.5 * 10**-digits), (value, shown)


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    """A short run with a history, as docs/curves.md's run.safetensors."""
    from minitx.core.config import ModelConfig, TrainConfig
    from minitx.core.training.trainer import Trainer

    folder = tmp_path_factory.mktemp("docs")
    trainer = Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1),
                      TrainConfig(steps=12, batch_size=8, eval_every=4, eval_size=20, device="cpu"))
    trainer.run()
    trainer.save(folder / "run.safetensors")
    return folder


@pytest.mark.parametrize("code", snippets())
def test_every_python_snippet_of_the_docs_runs_and_prints_what_it_promises(code, run_file, monkeypatch):
    monkeypatch.chdir(run_file)  # files a snippet names (run.safetensors) are there
    compiled = compile(checked(code), "<snippet>", "exec")
    if code.startswith(THEIRS):
        return  # compiled: its syntax holds; its names are the reader's
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compiled, {"_promised": _promised, "__name__": "snippet"})


def test_the_runner_finds_the_snippets_and_their_promises():
    found = [p.values[0] for p in snippets()]
    assert len(found) >= 4 and any(PROMISE.match(line) for code in found for line in code.splitlines())
