"""The Train screen's worker refreshes its probe (two forward passes) in at most a twentieth of its
time: on a big model a probe after every step had held training in the app to 60% of headless."""

from __future__ import annotations

import threading
import time

import pytest

import minitx.tui.app.training as training
from minitx.tui.app.training import TrainingRun


@pytest.mark.slow  # tier 2: a share of time
def test_a_slow_probe_takes_a_small_share_of_the_workers_time(monkeypatch, tmp_path, tiny_model_cfg,
                                                              tiny_train_cfg):
    monkeypatch.setattr(training, "POST_INTERVAL", 0.0)  # a Progress after every step
    monkeypatch.setattr(training, "PROBE_INTERVAL", 0.01)  # and a probe due after every one
    probes = []

    def slow_probe(self, trainer):
        time.sleep(0.05)  # what a big model's probe costs, scaled down
        probes.append(time.monotonic())

    monkeypatch.setattr(TrainingRun, "probe", slow_probe)
    run = TrainingRun(1, tiny_model_cfg, tiny_train_cfg.replace(steps=10**6),
                      tmp_path / "run.safetensors", lambda message: None)
    timer = threading.Timer(1.5, run.stop.set)
    timer.start()
    start = time.monotonic()
    run.train(lambda: False)
    elapsed = time.monotonic() - start
    timer.cancel()
    assert run.trainer.step_count > 3 * len(probes)  # steps went on between the probes
    assert 0.05 * len(probes) <= 0.15 * elapsed  # without the rule: nearly every step probed
