"""The positional encoding as numbers for the app's heatmap and similarity matrix."""

import torch

from minitx.core.config import ModelConfig
from minitx.core.interp.positions import position_similarity, positional_table
from minitx.core.model.transformer import Seq2Seq


def test_the_sinusoidal_table_starts_with_every_sine_0_and_every_cosine_1():
    table = positional_table(Seq2Seq(ModelConfig()), 8)
    assert table.shape == (8, 64)
    assert torch.equal(table[0, 0::2], torch.zeros(32)) and torch.equal(table[0, 1::2], torch.ones(32))


def test_nearby_positions_are_more_alike_than_distant_ones():
    similarity = position_similarity(positional_table(Seq2Seq(ModelConfig()), 16))
    assert torch.allclose(similarity.diagonal(), torch.ones(16), atol=1e-6)
    assert similarity[5, 6] > similarity[5, 9] > similarity[5, 15]
    assert torch.allclose(similarity, similarity.T, atol=1e-6)


def test_a_learned_table_is_the_decoders_and_rope_adds_none():
    learned = Seq2Seq(ModelConfig(position_encoding="learned"))
    assert torch.equal(positional_table(learned, 4), learned.tgt_positions.weight[:4].detach())
    assert positional_table(Seq2Seq(ModelConfig(position_encoding="rope")), 4) is None
    assert positional_table(Seq2Seq(ModelConfig(position_encoding="none")), 4) is None
