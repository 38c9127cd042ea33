"""The minitx checkpoints `minitx import` makes of the reference models (their fixtures come from
tests/reference_models/fixtures.py, through tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from minitx.tui.cli.main import main
from tests.reference_models import toy


def import_args(files: toy.ReferenceFiles, layout: str, out: Path, weights: Path | None = None,
                pairs: bool = True) -> list[str]:
    """`minitx import`'s arguments for a reference model's files (the toy models have 2 heads
    and digits as words)."""
    args = ["import", str(weights or files.pt), "--layout", layout, "--heads", "2", "--tokens", "word",
            "--src-vocab", str(files.src_vocab), "--tgt-vocab", str(files.tgt_vocab), "--out", str(out)]
    return args + (["--pairs", str(files.pairs)] if pairs else [])


def run_import(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="session")
def imported(tutorial_files, annotated_files, annotated_no_causal_mask_files,  # noqa: F811
             tmp_path_factory) -> dict:
    """layout -> the checkpoint `minitx import` wrote for its reference model (with its pairs);
    "no-causal-mask" -> the Annotated Transformer trained without the causal mask; "no-pairs" ->
    the tutorial's model imported without --pairs (as a Hugging Face folder opened directly is)."""
    folder = tmp_path_factory.mktemp("imported")
    paths = {}
    for name, files, layout in ((toy.TUTORIAL, tutorial_files, toy.TUTORIAL),
                                (toy.ANNOTATED, annotated_files, toy.ANNOTATED),
                                ("no-causal-mask", annotated_no_causal_mask_files, toy.ANNOTATED),
                                ("no-pairs", tutorial_files, toy.TUTORIAL)):
        out = folder / f"{name}.safetensors"
        result = run_import(*import_args(files, layout, out, pairs=name != "no-pairs"))
        assert result.exit_code == 0, result.output
        paths[name] = str(out)
    return paths
