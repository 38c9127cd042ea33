"""Where the cosine schedule ends (lr_floor): the default recipe decays to 1% of lr, which settles
the model at its last steps instead of leaving it moving at a tenth of its learning rate."""

from __future__ import annotations

import pytest

from minitx.core.config import TrainConfig, recipe


def test_the_cosine_ends_at_the_floor_as_a_fraction_of_lr():
    for floor in (0.0, 0.1, 0.5):
        cfg = TrainConfig(lr=2e-3, warmup=100, schedule="cosine", steps=900, lr_floor=floor)
        assert cfg.lr_at(100) == pytest.approx(2e-3)
        assert cfg.lr_at(500) == pytest.approx(2e-3 * (floor + (1 - floor) * 0.5))  # halfway
        assert cfg.lr_at(900) == pytest.approx(2e-3 * floor, abs=1e-12)


def test_a_floor_outside_0_to_1_is_refused_by_name():
    for bad in (-0.1, 1.5, True):
        with pytest.raises(ValueError, match="^lr_floor:"):
            TrainConfig(lr_floor=bad)


def test_the_default_recipe_decays_to_a_hundredth_and_the_reference_keeps_its_flat_rate():
    assert recipe("fast").train.lr_floor == 0.01
    reference = recipe("reference").train
    assert reference.schedule == "flat" and reference.lr_at(3000) == reference.lr


def test_lr_floor_from_the_command_line_is_the_runs(tmp_path):
    import json

    from tests.cli.conftest import TINY, run_cli

    run = run_cli("train", *TINY, "--steps", "2", "--schedule", "cosine", "--lr-floor", "0.25",
                  "--json", "--out", str(tmp_path / "f.safetensors"))
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["train_config"]["lr_floor"] == 0.25
    bad = run_cli("train", *TINY, "--lr-floor", "2", "--out", str(tmp_path / "g.safetensors"))
    assert bad.exit_code == 2 and "lr-floor" in bad.stderr
