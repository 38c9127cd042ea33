"""The loss made a few positions' logits at a time (core/model/loss.py's chunked_cross_entropy,
what evaluation and the numerics' backward use) is the loss of the whole (B, T, V) logits, with
the same gradients, however many chunks it takes."""

from __future__ import annotations

import pytest
import torch

import minitx.core.model.loss as loss_module
from minitx.core.config import ModelConfig
from minitx.core.interp.numerics import measure_numerics
from minitx.core.model.loss import chunked_cross_entropy, summed_cross_entropy
from minitx.core.model.transformer import Seq2Seq

PAD = 0


def model_and_batch():
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=32, n_heads=4, d_ff=64, n_encoder_layers=1, n_decoder_layers=2,
                                vocab_size=300, pad_id=PAD, dropout=0.0))
    src = torch.randint(3, 300, (4, 7))
    tgt_in = torch.randint(3, 300, (4, 6))
    labels = torch.randint(3, 300, (4, 6))
    labels[1, 4:], labels[3, 2:] = PAD, PAD  # padding, left out
    return model, src, tgt_in, labels


@pytest.mark.parametrize("logits_at_once", [300, 900, 1 << 23])  # a row, three rows, all at once
def test_the_chunked_loss_and_its_gradients_are_the_whole_logits(monkeypatch, logits_at_once):
    model, src, tgt_in, labels = model_and_batch()
    full = summed_cross_entropy(model(src, tgt_in), labels, PAD)
    full.backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    monkeypatch.setattr(loss_module, "LOSS_LOGITS", logits_at_once)
    memory, mask = model.encode(src)
    stream = model.decoder_stream(tgt_in, memory, mask)  # (B, T, d)
    real = labels != PAD
    chunked = chunked_cross_entropy(stream[real], labels[real], model.stream_logits, 300, PAD)
    chunked.backward()
    assert float(chunked.detach()) == pytest.approx(float(full.detach()), rel=1e-6)
    for name, p in model.named_parameters():
        # (a key bias's gradient is zero but for rounding: softmax ignores what adds to every score)
        assert float((p.grad - expected[name]).norm()) <= 1e-5 * float(expected[name].norm()) + 1e-6, name


def test_the_numerics_measure_the_same_gradients_in_chunks(monkeypatch):
    model, src, tgt_in, labels = model_and_batch()
    whole = measure_numerics(model, src, tgt_in, labels)
    monkeypatch.setattr(loss_module, "LOSS_LOGITS", 300)  # one position's logits at a time
    chunked = measure_numerics(model, src, tgt_in, labels)
    assert chunked.loss == pytest.approx(whole.loss, rel=1e-6)
    assert [g.norm for g in chunked.gradients] == pytest.approx([g.norm for g in whole.gradients], rel=1e-5)
