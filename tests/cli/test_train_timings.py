"""`minitx train --json` says where the run's time went, and turning evaluations off also turns
off a recipe's stop-at-accuracy (nothing would measure it)."""

from __future__ import annotations

import json

import pytest

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.options import configs_from_options
from tests.cli.conftest import TINY, run_cli


def test_json_splits_the_runs_time_into_startup_training_evaluation_and_saving(tmp_path):
    run = run_cli("train", *TINY, "--steps", "4", "--eval-every", "2", "--json",
                  "--out", str(tmp_path / "t.safetensors"))
    assert run.exit_code == 0, run.stderr
    timings = json.loads(run.stdout)["timings"]
    assert set(timings) == {"startup", "loop", "training", "evaluation", "saving"}
    assert all(v > 0 for v in timings.values())
    assert timings["training"] + timings["evaluation"] <= timings["loop"] + 0.01


@pytest.mark.slow  # tier 2: a whole process timed
def test_the_startup_it_reports_covers_the_whole_process_before_training(tmp_path):
    import subprocess
    import sys
    import time
    from pathlib import Path

    minitx = str(Path(sys.executable).with_name("minitx"))
    started = time.perf_counter()
    done = subprocess.run([minitx, "train", *TINY, "--steps", "2", "--json", "--threads", "1",
                           "--out", str(tmp_path / "s.safetensors")], capture_output=True, text=True)
    whole = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    timings = json.loads(done.stdout)["timings"]
    # the interpreter's start and torch's import are in it: more than a bare run of the loop
    assert timings["startup"] > 0.3 and timings["startup"] + timings["loop"] < whole


def test_no_evaluations_turn_off_the_bases_until_unless_it_is_given():
    base = TrainConfig(eval_every=100, until=0.99)
    _, train = configs_from_options(ModelConfig(), base, {"eval_every": 0})
    assert train.eval_every == 0 and train.until == 0.0
    _, train = configs_from_options(ModelConfig(), base, {"eval_every": 50})
    assert train.until == 0.99
