"""The bundled checkpoints are what tools/make_bundled.sh says they are."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from minitx import checkpoints
from minitx.core.checkpoint import load_checkpoint

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "make_bundled.sh"


def _script_runs() -> dict[str, list[str]]:
    """name -> the extra `minitx train` arguments of each `bundle NAME ...` line."""
    runs = {}
    for line in SCRIPT.read_text().replace("\\\n", " ").splitlines():  # a command continued
        match = re.match(r"^bundle (\S+)(.*)$", line.strip())
        if match:
            runs[match.group(1)] = shlex.split(match.group(2))
    return runs


def test_the_script_bundles_reverse_copy_sort_and_dates():
    assert set(_script_runs()) == {"reverse", "copy", "sort", "dates"}


@pytest.mark.parametrize("name", ["reverse", "copy", "sort", "dates"])
def test_each_bundled_file_was_trained_as_the_script_says(name):
    from minitx.core.config import TrainConfig, recipe

    ckpt = load_checkpoint(checkpoints.resolve(name))
    args = _script_runs()[name]
    trained = json.loads(ckpt.metadata["train_config"])
    assert trained["task"] == args[args.index("--task") + 1]
    # The recipe's value, or the script's option where it gives one (a file from before a field
    # existed has that field's default, as loading it does).
    base, recorded = recipe(args[args.index("--recipe") + 1]).train, TrainConfig.from_dict(trained)
    for option, field in (("--lr", "lr"), ("--batch-size", "batch_size"), ("--lr-floor", "lr_floor")):
        expected = getattr(base, field)
        if option in args:
            expected = type(expected)(args[args.index(option) + 1])
        assert getattr(recorded, field) == expected, field
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 3000
    assert trained["steps"] == ckpt.summary["steps"] == steps
    assert trained["seed"] == 0 and not trained["bug"]
    assert not ckpt.resumable and ckpt.dtype == "float32"
    assert ckpt.path.stat().st_size < 1_400_000  # weights ~950 KB, the history at most ~350 KB
    assert ckpt.summary["accuracy"] >= 0.99  # measured on the weights saved, on 500 fresh examples


def test_the_bundled_dates_model_gets_99_percent_of_fresh_dates_right():
    from minitx.core.training.evaluation import evaluate

    ckpt = load_checkpoint(checkpoints.resolve("dates"))
    assert ckpt.task.name == "dates" and ckpt.task.vocab.level == "char"
    result = evaluate(ckpt.model, ckpt.task, n=1000, seed=777)  # not a seed training drew from
    assert result.accuracy >= 0.99, result.by_length


@pytest.mark.parametrize("name", checkpoints.bundled_names())
def test_every_bundled_model_was_made_by_this_version_and_keeps_its_history(name):
    """inspect says the version that trained it and its history (the app's h replays it, the
    doctor's history checks read it), and its seed is recorded."""
    from minitx import __version__
    from minitx.core.history import MAX_POINTS, MAX_SNAPSHOTS
    from tests.cli.conftest import run_cli

    ckpt = load_checkpoint(checkpoints.resolve(name))
    assert ckpt.metadata["minitx_version"] == __version__ and ckpt.summary["minitx_version"] == __version__
    assert ckpt.summary["seed"] == 0 and ckpt.history.last_step == ckpt.summary["steps"]
    assert len(ckpt.history.steps) <= MAX_POINTS
    assert ckpt.history.snapshot_steps and len(ckpt.history.snapshot_steps) <= MAX_SNAPSHOTS
    assert ckpt.path.stat().st_size < 1_400_000  # weights ~950 KB, snapshots at most 256 KB
    shown = " ".join(run_cli("inspect", name).stdout.split())
    assert f"minitx_version {__version__}" in shown and "attention snapshots" in shown
    assert "history: none" not in shown


def test_export_keeps_the_history_only_when_asked(tmp_path):
    from tests.cli.conftest import TINY, run_cli

    run = tmp_path / "run.safetensors"
    assert run_cli("train", *TINY, "--steps", "6", "--out", str(run)).exit_code == 0
    bare, kept = tmp_path / "bare.safetensors", tmp_path / "kept.safetensors"
    assert run_cli("export", str(run), "--out", str(bare)).exit_code == 0
    assert run_cli("export", str(run), "--out", str(kept), "--history").exit_code == 0
    assert load_checkpoint(bare).history is None
    history = load_checkpoint(kept).history
    assert history.series("loss") == load_checkpoint(run).history.series("loss")
    assert not load_checkpoint(kept).resumable  # the training state stays behind either way
    refused = run_cli("export", str(bare), "--out", str(tmp_path / "again.safetensors"), "--history")
    assert refused.exit_code == 2 and "no history to keep" in refused.stderr
