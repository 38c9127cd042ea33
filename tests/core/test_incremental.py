"""The cached one-position-at-a-time decoder (core/incremental.py) against the modules' full
forward pass: same logits and same attention rows, for every configuration it supports."""

import pytest
import torch

from minitx.core.config import ModelConfig
from minitx.core.incremental import IncrementalDecoder
from minitx.core.model import AttentionMaps, Seq2Seq
from minitx.core.tasks import EOS, PAD

SRC = torch.tensor([[3, 1, 4, 1, 5], [2, 7, PAD, PAD, PAD]])  # the second row is padded
PREFIX = torch.tensor([[11, 5, 1, 4, 1], [11, 7, 2, EOS, PAD]])  # decoder inputs, SOS first

CONFIGS = {
    "reference (post-norm, relu)": {},
    "pre-norm, gelu": {"norm": "pre"},
    "post-norm, gelu": {"activation": "gelu"},
    "unscaled attention": {"bug": "no-scale"},
    "swapped cross-attention": {"bug": "swap-cross"},
}


def fresh(**overrides) -> Seq2Seq:
    torch.manual_seed(3)
    return Seq2Seq(ModelConfig(**overrides)).eval()


def step_through(model, src, prefix, maps=None):
    """Feed prefix (B, T) one position at a time -> logits (B, T, V)."""
    with torch.no_grad():
        decoder = IncrementalDecoder(model, *model.encode(src))
        steps = [decoder.step(prefix[:, t], maps) for t in range(prefix.shape[1])]  # each (B, V)
    return torch.stack(steps, dim=1)


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_stepped_logits_equal_the_full_forward_pass(overrides):
    model = fresh(**overrides)
    with torch.no_grad():
        full = model(SRC, PREFIX)  # (B, T, V)
    stepped = step_through(model, SRC, PREFIX)
    # Rows after a sequence's EOS see PAD inputs the full pass masks out; nothing reads them.
    real = PREFIX != PAD
    assert torch.allclose(stepped[real], full[real], atol=1e-5)


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_stepped_attention_rows_equal_the_full_forward_maps(overrides):
    model = fresh(**overrides)
    src, prefix = SRC[:1], PREFIX[:1]  # unpadded, so every row of the full maps is meaningful
    with torch.no_grad():
        _, full = model(src, prefix, return_attention=True)
    maps = AttentionMaps()
    step_through(model, src, prefix, maps)
    layers, T = model.cfg.n_decoder_layers, prefix.shape[1]
    for t in range(T):
        for layer in range(layers):
            self_row = maps.decoder_self[t * layers + layer]  # (1, h, 1, t + 1)
            cross_row = maps.cross[t * layers + layer]  # (1, h, 1, S), or (1, h, 1, t + 1) if swapped
            assert torch.allclose(self_row[0, :, 0], full.decoder_self[layer][0, :, t, : t + 1], atol=1e-5)
            keys = cross_row.shape[-1]
            assert torch.allclose(cross_row[0, :, 0], full.cross[layer][0, :, t, :keys], atol=1e-5)


def test_positions_without_positional_encoding_match_too():
    model = fresh()
    model.use_positions = False
    with torch.no_grad():
        full = model(SRC[:1], PREFIX[:1])
    assert torch.allclose(step_through(model, SRC[:1], PREFIX[:1]), full, atol=1e-5)


def test_stepping_past_max_len_is_refused_with_a_clear_error():
    model = Seq2Seq(ModelConfig(max_len=3)).eval()
    with torch.no_grad():
        decoder = IncrementalDecoder(model, *model.encode(torch.tensor([[1, 2]])))
        for _ in range(3):
            decoder.step(torch.tensor([5]))
        with pytest.raises(ValueError, match="length 4 exceeds the model's max_len=3"):
            decoder.step(torch.tensor([5]))
