"""`minitx train --json` says where the run's time went, and turning evaluations off also turns
off a recipe's stop-at-accuracy (nothing would measure it)."""

from __future__ import annotations

import json

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.options import configs_from_options
from tests.cli.conftest import TINY, run_cli


def test_json_splits_the_runs_time_into_training_evaluation_and_saving(tmp_path):
    run = run_cli("train", *TINY, "--steps", "4", "--eval-every", "2", "--json",
                  "--out", str(tmp_path / "t.safetensors"))
    assert run.exit_code == 0, run.stderr
    timings = json.loads(run.stdout)["timings"]
    assert set(timings) == {"loop", "training", "evaluation", "saving"}
    assert all(v > 0 for v in timings.values())
    assert timings["training"] + timings["evaluation"] <= timings["loop"] + 0.01


def test_no_evaluations_turn_off_the_bases_until_unless_it_is_given():
    base = TrainConfig(eval_every=100, until=0.99)
    _, train = configs_from_options(ModelConfig(), base, {"eval_every": 0})
    assert train.eval_every == 0 and train.until == 0.0
    _, train = configs_from_options(ModelConfig(), base, {"eval_every": 50})
    assert train.until == 0.99
