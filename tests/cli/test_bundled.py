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
    for line in SCRIPT.read_text().splitlines():
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
    assert ckpt.path.stat().st_size < 1_200_000
    assert ckpt.summary["accuracy"] >= (1.0 if name != "sort" else 0.99)


def test_the_bundled_dates_model_gets_99_percent_of_fresh_dates_right():
    from minitx.core.training.evaluation import evaluate

    ckpt = load_checkpoint(checkpoints.resolve("dates"))
    assert ckpt.task.name == "dates" and ckpt.task.vocab.level == "char"
    result = evaluate(ckpt.model, ckpt.task, n=1000, seed=777)  # not a seed training drew from
    assert result.accuracy >= 0.99, result.by_length
