"""The doctor's checks on tasks beyond the digits: dates (63 characters) and data files of one's
own pairs, character or word tokens (a bug trained into such a model is found blind too)."""

import random

import pytest
import torch

from minitx.core.checkpoint import load_checkpoint
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.pair_task import PairsTask
from minitx.core.data.tasks import get_task
from minitx.core.doctor.code_checks import check_initial_loss
from minitx.core.doctor.diagnosis import diagnose, diagnose_model, run_doctor
from minitx.core.doctor.history_checks import RunRecord
from minitx.core.doctor.trained_checks import check_alignment, check_copies_source
from minitx.core.model.transformer import Seq2Seq
from minitx.core.training.trainer import Trainer
from tests.blind_files import mentions, strip_bug_hints

SMALL = ModelConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)


def fresh(task, cfg=SMALL):
    torch.manual_seed(0)
    return Seq2Seq(cfg.replace(**task.vocab.model_fields()))


def test_the_initial_loss_band_moves_with_the_vocabulary_size():
    task = get_task("dates")
    result = check_initial_loss(fresh(task, ModelConfig()), task)
    assert result.passed and result.value > 3.5  # healthy at 63 tokens, outside the 13-token band
    assert "ln 63" in result.description and result.threshold == "4.1 to 5.1"


def test_a_fresh_dates_model_passes_the_quick_doctor_with_nothing_blamed():
    task = get_task("dates")
    results = run_doctor(fresh(task), task, quick=True, trained=False)
    assert not [r.name for r in results if r.passed is False] and diagnose(results).texts == []


def test_without_an_expected_pattern_alignment_reports_sharpness_and_is_skipped(tmp_path):
    rng = random.Random(0)
    path = tmp_path / "p.tsv"
    path.write_text("".join(f"{w}\t{w[::-1]}\n" for w in
                            ("".join(rng.choice("abcd") for _ in range(rng.randint(2, 6)))
                             for _ in range(300))))
    task = PairsTask.from_files(str(path), positions=SMALL.max_len)
    model = fresh(task)
    result = check_alignment(model, task)
    assert result.status == "skip" and "no expected pattern" in result.detail
    assert "sharpest head L1 H" in result.detail and "--expect" in result.detail
    task.expect = task.alignment_name = "anti-diagonal"
    scored = check_alignment(model, task)
    assert scored.status in ("pass", "fail") and scored.value is not None
    copying = check_copies_source(model, task)  # reversal targets differ from their sources
    assert copying.status != "skip"


def _pairs(path, words, rng):
    """Random sequences of `words` (joined by spaces when words are whole words), reversed."""
    joiner = " " if len(words[0]) > 1 else ""
    lines = []
    for _ in range(1500):
        seq = [rng.choice(words) for _ in range(rng.randint(3, 6))]
        lines.append(f"{joiner.join(seq)}\t{joiner.join(reversed(seq))}")
    path.write_text("\n".join(lines) + "\n")
    return path


# Tier 2 trains the character model (~6 s); tier 1 the word one (a no-causal-mask model is also
# diagnosed blind in tier 1: the bundled one, tests/cli/test_compare_doctor.py).
@pytest.mark.parametrize("tokens, bug, steps", [
    pytest.param("char", "no-causal-mask", 250, marks=pytest.mark.slow), ("word", "no-shift", 150)])
def test_a_model_of_ones_own_pairs_trained_with_a_bug_is_diagnosed_from_a_file_without_its_hint(
        tmp_path, tokens, bug, steps):
    rng = random.Random(5)
    words = list("abcdefgh") if tokens == "char" else ["red", "green", "blue", "cat", "dog", "sun"]
    data = _pairs(tmp_path / "pairs.tsv", words, rng)
    cfg = TrainConfig(steps=steps, batch_size=32, lr=3e-3, warmup=50, schedule="cosine", lr_floor=0.01,
                      eval_every=0, eval_size=100, device="cpu", task="data", data=str(data), tokens=tokens,
                      expect="anti-diagonal", bug=bug)
    trainer = Trainer(SMALL.replace(n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_len=16), cfg)
    trainer.run()
    path = strip_bug_hints(trainer.save(tmp_path / "run.safetensors"), tmp_path / "mine.safetensors")
    assert not mentions(path, bug)
    ckpt = load_checkpoint(path)
    record = RunRecord.of(ckpt.history, ckpt.summary)
    results = run_doctor(ckpt.model, ckpt.task, quick=True, record=record)
    diagnosis = diagnose_model(results, ckpt.model, ckpt.task, record)
    assert ckpt.task.evaluated_on == "held-out pairs"
    assert diagnosis.causes[0].key == bug and diagnosis.fails_task is True
