"""The doctor's checks on tasks beyond the digits: dates (63 characters) and a data file."""

import random

import torch

from minitx.core.config import ModelConfig
from minitx.core.data.pair_task import PairsTask
from minitx.core.data.tasks import get_task
from minitx.core.doctor.code_checks import check_initial_loss
from minitx.core.doctor.diagnosis import diagnose, run_doctor
from minitx.core.doctor.trained_checks import check_alignment, check_copies_source
from minitx.core.model.transformer import Seq2Seq

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
