"""Path patching (core/interp/path_patching.py): which senders reach which cross-attention
inputs, and a sender through all its receivers at once is its whole effect where nothing else
carries it."""

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import ModelConfig
from minitx.core.interp.interventions import Head, HeadInput, all_heads
from minitx.core.interp.pairs import draw_pairs
from minitx.core.interp.patching import Patcher
from minitx.core.interp.path_patching import Edge, all_edges, path_patching, senders_of
from minitx.core.model.transformer import Seq2Seq


@pytest.fixture(scope="module")
def reverse():
    return checkpoints.load("reverse")


@pytest.fixture(scope="module")
def paths(reverse):
    torch.set_num_threads(1)
    patcher = Patcher.of_pairs(reverse.model, draw_pairs(reverse.task, 8, 11, reverse.model.cfg.eos_id))
    return patcher, path_patching(patcher)


def test_keys_and_values_come_from_the_encoder_and_queries_from_self_attention_up_to_the_layer(reverse):
    model = reverse.model
    assert senders_of(model, HeadInput(Head("cross", 0, 2), "kv")) == all_heads(model, ("enc",))
    assert senders_of(model, HeadInput(Head("cross", 0, 2), "q")) == [Head("self", 0, h) for h in range(4)]
    assert len(senders_of(model, HeadInput(Head("cross", 1, 0), "q"))) == 8
    assert len(all_edges(model)) == 8 * 8 + 4 * 4 + 4 * 8


def test_with_swapped_cross_attention_its_keys_come_from_the_decoder():
    model = Seq2Seq(ModelConfig(bug="swap-cross"))
    assert senders_of(model, HeadInput(Head("cross", 1, 0), "kv")) == all_heads(model, ("self",))


def test_a_last_layer_encoder_head_through_all_its_receivers_is_its_whole_effect(paths, reverse):
    # Nothing but the cross-attention keys and values reads the memory, and no head comes after
    # the last encoder layer: freezing the others changes nothing, so the two agree exactly.
    _, result = paths
    last = len(reverse.model.encoder) - 1
    for sender in all_heads(reverse.model, ("enc",)):
        if sender.layer == last:
            assert result.through_all[str(sender)] == pytest.approx(result.total[str(sender)], abs=1e-5)
    last_heads = [s for s in all_heads(reverse.model, ("enc",)) if s.layer == last]
    assert any(abs(result.total[str(s)]) > 1e-3 for s in last_heads)


def test_the_table_has_every_edge_and_the_first_decoder_layer_changes_nothing(paths, reverse):
    # Both runs are fed the same decoder input, so self-attention of layer 1 computes the same.
    _, result = paths
    assert set(result.edges) == {str(e) for e in all_edges(reverse.model)}
    first = [e for e in all_edges(reverse.model) if e.sender.kind == "self" and e.sender.layer == 0]
    assert all(result.edges[str(e)] == pytest.approx(0.0, abs=1e-6) for e in first)
    assert str(Edge(Head("enc", 1, 2), HeadInput(Head("cross", 1, 0), "kv"))) == \
        "enc:L2.H3 -> cross:L2.H1 K/V"


def test_path_patching_asked_for_one_sender_measures_only_its_receivers(reverse):
    patcher = Patcher(reverse.model, reverse.task, [3, 1, 4, 1, 5], [2, 7, 1, 8, 2])
    result = path_patching(patcher, senders=[Head("enc", 1, 0)])
    assert set(result.total) == {"enc:L2.H1"} and len(result.edges) == 8
