"""Bug presets build and train, and the doctor recognises each one from measurements alone.

Every model the doctor sees here was saved and reloaded from a file whose metadata and name say
nothing about the bug, so the only way to name the cause is to measure the model.
"""

import json

import pytest
import torch
from safetensors.torch import save_file

from minitx.checkpoints import BUNDLED_DIR
from minitx.core.checkpoint import load_checkpoint, read_raw, save_checkpoint
from minitx.core.config import BUGS, ModelConfig, TrainConfig
from minitx.core.doctor.code_checks import CAUSES
from minitx.core.doctor.diagnosis import diagnose, run_doctor
from minitx.core.training.trainer import Trainer

# The smallest model that still learns reversal of 4-6 digits in a few hundred steps.
TINY = ModelConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                   max_len=16, dropout=0.0)
# Steps each preset needs before its symptom shows (no-causal-mask, swap-cross and no-scale
# show at initialisation already; no-shift and no-reverse must learn their wrong habit first).
STEPS = {"": 700, "no-shift": 150, "no-reverse": 300, "no-causal-mask": 60, "swap-cross": 30,
         "no-scale": 30}
DOCTOR_BUGS = ("no-shift", "no-causal-mask", "no-reverse", "swap-cross", "no-scale")
BUG_CAUSES = {CAUSES[b] for b in DOCTOR_BUGS}


def tiny_trainer(bug: str = "", steps: int = 10) -> Trainer:
    cfg = TrainConfig(steps=steps, batch_size=64, lr=3e-3, warmup=50, min_source_len=4, max_source_len=6,
                      eval_every=0, device="cpu", bug=bug)
    return Trainer(TINY, cfg)


@pytest.fixture(scope="module")
def blind_model(tmp_path_factory):
    """bug -> (model, task), trained once per module, then saved without any hint and reloaded."""
    cache = {}

    def get(bug: str):
        if bug not in cache:
            trainer = tiny_trainer(bug, STEPS[bug])
            trainer.run()
            path = tmp_path_factory.mktemp("blind") / "model.safetensors"
            save_checkpoint(path, trainer.model, trainer.task, {"steps": trainer.step_count})
            _, metadata = read_raw(path)
            # Only the model's own config records a defect of the model (it must, to rebuild
            # it); the doctor never reads it (see the test that lies about the config below).
            told = json.dumps({k: v for k, v in metadata.items() if k != "model_config"})
            assert bug == "" or bug not in told
            ckpt = load_checkpoint(path)
            cache[bug] = (ckpt.model, ckpt.task)
        return cache[bug]

    return get


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_every_bug_preset_builds_and_trains_a_few_steps(bug):
    trainer = tiny_trainer(bug, steps=5)
    stats = trainer.run()
    assert stats.step == 5 and torch.isfinite(torch.tensor(stats.loss))
    assert trainer.summary()["bug"] == bug


def test_bug_presets_change_what_they_claim_to():
    assert tiny_trainer("no-causal-mask").model.causal is False
    unscaled = tiny_trainer("no-scale").model
    assert {m.score_divisor for m in unscaled.modules() if hasattr(m, "score_divisor")} == {1.0}
    assert all(layer.cross_reads_decoder for layer in tiny_trainer("swap-cross").model.decoder)
    assert not any(layer.cross_reads_decoder for layer in tiny_trainer("").model.decoder)
    assert tiny_trainer("no-warmup").cfg.lr_at(1) == 3e-3
    copy_batch = tiny_trainer("no-reverse").next_batch()
    assert torch.equal(copy_batch.labels[:, :4], copy_batch.src[:, :4])  # targets are copies


def test_doctor_passes_a_healthy_trained_model(blind_model):
    model, task = blind_model("")
    results = run_doctor(model, task, quick=True)
    failed = [(r.name, r.value) for r in results if r.passed is False]
    assert failed == []
    ran = {r.name for r in results if r.passed is not None}
    assert {"accuracy", "alignment", "copies-decoder-input", "future-leakage-values"} <= ran
    assert diagnose(results) == []


@pytest.mark.parametrize("bug", DOCTOR_BUGS)
def test_doctor_names_the_right_cause_for_a_bugged_model_without_metadata(blind_model, bug):
    model, task = blind_model(bug)
    results = run_doctor(model, task, quick=True)
    causes = diagnose(results)
    assert causes, f"{bug}: every check passed"
    assert causes[0] == CAUSES[bug]
    assert BUG_CAUSES & set(causes) == {CAUSES[bug]}  # and no other bug is blamed


def test_doctor_measures_the_modules_not_the_config_flags(blind_model):
    # Swapped cross-attention, unscaled attention and a missing causal mask are fixed when the
    # model is built; a config that claims everything is fine must not fool the doctor.
    for bug in ("swap-cross", "no-scale", "no-causal-mask"):
        model, task = blind_model(bug)
        model.cfg = TINY  # lie: a healthy config
        assert CAUSES[bug] in diagnose(run_doctor(model, task, quick=True))


SHIPPED = ("no-shift", "no-causal-mask", "no-reverse", "swap-cross", "no-scale")


@pytest.mark.parametrize("bug", SHIPPED)
def test_doctor_diagnoses_the_shipped_bug_checkpoint_with_its_hint_removed(bug, tmp_path):
    path = BUNDLED_DIR / f"reverse-{bug}.safetensors"
    if not path.exists():
        pytest.skip(f"{path.name} not generated (tools/make_bug_checkpoints.py)")
    tensors, metadata = read_raw(path)
    metadata["training"] = json.dumps({})  # the summary is where the preset is recorded
    assert bug not in json.dumps({k: v for k, v in metadata.items() if k != "model_config"})
    blind = tmp_path / "unknown.safetensors"
    save_file(tensors, str(blind), metadata=metadata)
    ckpt = load_checkpoint(blind)
    assert diagnose(run_doctor(ckpt.model, ckpt.task, quick=True))[0] == CAUSES[bug]
