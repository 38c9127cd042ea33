"""Forgetting, measured (core/training/forgetting.py): the general-domain loss and the mean KL of
a model's next-token distributions from its base's, teacher-forced, held to transformers' own
logits and labels loss on a tiny Marian folder and a copy with changed weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from minitx import checkpoints
from minitx.core.data.given_pairs import with_pairs
from minitx.core.training import forgetting
from minitx.core.training.forgetting import (
    Forgetting,
    base_log_probs,
    check_forget_alarm,
    general_loss,
    general_loss_and_kl,
    kl_to_base,
)
from tests.huggingface.changed_folders import changed_copy, pairs_file, scaled
from tests.huggingface.tiny_folders import load_reference, save_model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(base, changed, batch): minitx's and transformers' models of both folders, and pairs."""
    root = tmp_path_factory.mktemp("forgetting")
    base = save_model(root / "base", "marian")
    changed = changed_copy(base, root / "changed", scaled("model.decoder.layers.1.fc2.weight", 1.3))
    pairs = pairs_file(root / "pairs.tsv", 10, seed=7)
    opened = [checkpoints.load(str(folder)) for folder in (base, changed)]
    task = with_pairs(opened[0].task, pairs, opened[0].model_config.max_len)
    batch = next(task.evaluation_batches(10, 0, batch_size=10))
    return opened[0], opened[1], load_reference(base), load_reference(changed), batch


def _reference_logits(reference, batch, pad):
    with torch.no_grad():
        return reference(input_ids=batch.src, attention_mask=batch.src != pad,
                         decoder_input_ids=batch.decoder_input).logits  # (B, T, V)


def test_kl_to_base_is_transformers_mean_kl_over_target_positions(models):
    base, changed, ref_base, ref_changed, batch = models
    pad = base.model_config.pad_id
    log_base = _reference_logits(ref_base, batch, pad).log_softmax(-1)
    log_changed = _reference_logits(ref_changed, batch, pad).log_softmax(-1)
    kl = F.kl_div(log_base, log_changed, log_target=True, reduction="none").sum(-1)  # KL(changed || base)
    expected = float(kl[batch.labels != pad].mean())
    assert expected > 1e-3  # the change moved the distributions
    assert kl_to_base(changed.model, base.model, [batch]) == pytest.approx(expected, rel=1e-4)
    assert kl_to_base(base.model, base.model, [batch]) == pytest.approx(0.0, abs=1e-6)


def test_the_kl_and_loss_made_a_few_positions_at_a_time_are_those_of_the_whole_batch(models, monkeypatch):
    """A big vocabulary's logits are made LOSS_LOGITS floats at a time (here 3 positions): the
    same loss and KL, against the base model or its log-probabilities measured once."""
    base, changed, *_, batch = models
    whole = general_loss_and_kl(changed.model, base.model, [batch])
    monkeypatch.setattr(forgetting, "LOSS_LOGITS", 3 * base.model.cfg.vocab_size)
    assert general_loss_and_kl(changed.model, base.model, [batch]) == pytest.approx(whole, rel=1e-5)
    measured_once = base_log_probs(base.model, [batch])
    cfg = base.model.cfg
    assert measured_once[0].shape == (int((batch.labels != cfg.pad_id).sum()), cfg.vocab_size)  # (N, V)
    assert kl_to_base(changed.model, measured_once, [batch]) == pytest.approx(whole[1], rel=1e-5)


def test_general_loss_is_transformers_labels_loss(models):
    base, changed, ref_base, _, batch = models
    pad = base.model_config.pad_id
    labels = batch.labels.masked_fill(batch.labels == pad, -100)
    with torch.no_grad():
        expected = float(ref_base(input_ids=batch.src, attention_mask=batch.src != pad, labels=labels).loss)
    loss, tokens = general_loss(base.model, [batch])
    assert loss == pytest.approx(expected, rel=1e-5) and tokens == int((batch.labels != pad).sum())
    # two halves give the same figure: a mean over tokens, not a mean of batch means
    halves = [type(batch)(batch.src[:3], batch.tgt[:3], batch.lengths[:3]),
              type(batch)(batch.src[3:], batch.tgt[3:], batch.lengths[3:])]
    assert general_loss(base.model, halves)[0] == pytest.approx(expected, rel=1e-5)


def test_the_alarm_goes_off_at_the_first_evaluation_past_the_rise_and_stays():
    record = Forgetting(general_loss_base=1.92)
    assert record.record(200, 2.2, 0.1) is False  # +15%: under the default 20%
    assert record.record(400, 2.61, 0.4) is True
    assert record.line() == "forgetting: general-domain loss 1.92 -> 2.61 (+36%) at step 400"
    assert record.record(600, 2.0, 0.5) is False and record.alarm and record.alarm_step == 400
    assert record.to_dict() == {"general_loss_base": 1.92, "general_loss_end": 2.0, "kl_to_base_end": 0.5,
                                "alarm": True, "alarm_step": 400}


@pytest.mark.parametrize("rise", [-0.01, 10.01, math.nan])
def test_a_forgetting_alarm_outside_0_to_1000_percent_is_refused(rise):
    with pytest.raises(ValueError, match="0% to 1000%"):
        check_forget_alarm(rise)
