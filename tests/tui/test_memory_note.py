"""The Train form's "can it start" check (tui/app/run_check.py) refuses a fine-tune whose
estimated peak memory will not fit, with core's one line naming the settings that would."""

from __future__ import annotations

from minitx.core.config import TrainConfig
from minitx.core.training import memory_estimate
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.tui.app.loaded import load_checkpoint_record
from minitx.tui.app.run_check import check_run
from tests.huggingface.changed_folders import pairs_file
from tests.huggingface.tiny_folders import save_model


def test_the_form_says_a_fine_tune_will_not_fit_and_what_would(tmp_path, monkeypatch):
    folder = save_model(tmp_path / "marian", "marian")
    data = pairs_file(tmp_path / "pairs.tsv", 24, seed=1)
    _, record = load_checkpoint_record(str(folder))
    train = TrainConfig(task="data", data=str(data), init=str(folder), device="cpu",
                        **{**fine_tune_defaults("marian"), "batch_size": 16})
    assert check_run(record.model.cfg, train, record).error == ""
    need = memory_estimate.estimate(record.model.cfg, train, 40, 40)
    monkeypatch.setattr(memory_estimate, "available_bytes", lambda device: need.process + 1)
    error = check_run(record.model.cfg, train, record).error
    assert error.startswith("memory: this fine-tune needs about") and "is available" in error
