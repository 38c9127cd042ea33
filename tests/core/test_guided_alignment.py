"""Guided alignment (core/training/guided_alignment.py): the loss against a hand computation, each
pair's piece links on its batch rows, and the head's weights read with their gradient in a
training forward."""

import math

import pytest
import torch

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.interp.word_alignment import Head
from minitx.core.model.transformer import Seq2Seq
from minitx.core.training.guided_alignment import (
    EPSILON,
    TrainingLinks,
    guided_head,
    guided_loss,
    head_weights,
)


def test_guided_loss_is_the_mean_cross_entropy_of_linked_rows_against_their_normalised_links():
    weights = torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]],
                            [[0.25, 0.25, 0.5], [0.7, 0.2, 0.1]]])  # (B=2, T=2, S=3)
    links = torch.zeros(2, 2, 3, dtype=torch.bool)
    links[0, 0, 0] = links[0, 0, 2] = True  # row linked to two source pieces: 1/2 each
    links[1, 0, 2] = True  # one link: all its mass
    # rows (0, 1) and (1, 1) have no links: they count for nothing, not even in the mean
    row_a = -(0.5 * math.log(0.5 + EPSILON) + 0.5 * math.log(0.2 + EPSILON))
    row_b = -math.log(0.5 + EPSILON)
    assert float(guided_loss(weights, links)) == pytest.approx((row_a + row_b) / 2, rel=1e-6)


def test_guided_loss_is_zero_for_attention_on_exactly_the_links_and_without_links():
    weights = torch.tensor([[[0.5, 0.0, 0.5]]])
    links = torch.tensor([[[True, False, True]]])
    assert float(guided_loss(weights, links)) == pytest.approx(math.log(2), rel=1e-5)  # entropy of 1/2, 1/2
    one = torch.tensor([[[0.0, 1.0, 0.0]]])
    assert float(guided_loss(one, torch.tensor([[[False, True, False]]]))) == pytest.approx(0, abs=1e-5)
    assert float(guided_loss(one, torch.zeros(1, 1, 3, dtype=torch.bool))) == 0.0


def test_training_links_put_each_pairs_links_on_its_label_rows_and_fed_columns():
    store = TrainingLinks([[(0, 1)], [(1, 0), (1, 2)], []])
    out = store.for_pairs(torch.tensor([1, 2, 0]), rows=3, columns=4)  # (3, 3, 4)
    assert out[0].nonzero().tolist() == [[1, 0], [1, 2]]
    assert not out[1].any()
    assert out[2].nonzero().tolist() == [[0, 1]]
    narrow = store.for_pairs(torch.tensor([1]), rows=3, columns=2)  # links past the batch's columns
    assert narrow[0].nonzero().tolist() == [[1, 0]]


def test_the_heads_weights_are_read_with_their_gradient_in_a_training_forward():
    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2,
                      vocab_size=16, max_len=12, dropout=0.0)
    model = Seq2Seq(cfg)
    model.train()
    src, tgt = torch.randint(4, 12, (2, 5)), torch.randint(4, 12, (2, 4))
    with head_weights(model, Head(1, 1)) as seen:
        logits = model(src, tgt)
    _, maps = model(src, tgt, return_attention=True)
    assert len(seen) == 1 and seen[0].shape == (2, 4, 5)
    torch.testing.assert_close(seen[0], maps.cross[1][:, 1])  # layer 2, head 2, as the maps have it
    seen[0].sum().backward()  # it carries the gradient of the forward that made the logits
    assert model.decoder[1].cross_attn.q_proj.weight.grad is not None
    assert logits.shape == (2, 4, 16)
    with head_weights(model, Head(0, 0)) as unused:
        pass
    model(src, tgt)
    assert unused == []  # outside the block nothing is read


def test_guided_fields_go_together_and_name_the_option_at_fault():
    TrainConfig(task="data", data="pairs.tsv", alignments="pairs.links", guided_head="2:1")
    with pytest.raises(ValueError, match="^alignments: guided alignment needs both"):
        TrainConfig(task="data", data="pairs.tsv", guided_head="2:1")
    with pytest.raises(ValueError, match="^guided_head: guided alignment needs both"):
        TrainConfig(task="data", data="pairs.tsv", alignments="pairs.links")
    with pytest.raises(ValueError, match="^guided_head: expected LAYER:HEAD"):
        TrainConfig(task="data", data="pairs.tsv", alignments="a", guided_head="2")
    with pytest.raises(ValueError, match="^guided_weight: must be a positive"):
        TrainConfig(task="data", data="pairs.tsv", alignments="a", guided_head="1:1", guided_weight=0)
    with pytest.raises(ValueError, match="^valid_alignments: "):
        TrainConfig(task="data", data="pairs.tsv", alignments="a", guided_head="1:1", valid_alignments="v")
    assert guided_head("2:3", layers=2, heads=4) == Head(1, 2)
    with pytest.raises(ValueError, match="^guided_head: layer 3: the model's decoder has 2 layers"):
        guided_head("3:1", layers=2, heads=4)


def test_the_guided_heads_aer_goes_through_a_file_and_into_the_curves_json():
    from minitx.core.history import History, HistoryError

    history = History()
    history.record_step(1, 2.0, 1e-3, 1.0, 10.0, 0.1)
    for step, aer in ((0, 0.8), (1, 0.5), (1, 0.4)):  # a second AER at a step replaces the first
        history.record_aer(step, aer)
    again = History.from_tensors(history.to_tensors(), layers=1, heads=1, max_len=8, vocab_size=8,
                                 last_step=1)
    assert again.series("aer") == ([0, 1], [pytest.approx(0.8), pytest.approx(0.4)])
    assert again.to_dict()["series"]["aer"] == {"step": [0, 1], "value": [0.8, 0.4]}
    bad = {**history.to_tensors(), "aer": torch.tensor([0.8, 1.5])}
    with pytest.raises(HistoryError, match="aer holds values outside 0-1"):
        History.from_tensors(bad, layers=1, heads=1, max_len=8, vocab_size=8, last_step=1)
