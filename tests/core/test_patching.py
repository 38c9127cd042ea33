"""Activation patching (core/interp/patching.py): the recovered fraction is 0 for the corrupted run and
1 for the clean one, by construction and by measurement."""

import pytest
import torch

from minitx import checkpoints
from minitx.core.interp.interventions import Head, Stream, all_heads
from minitx.core.interp.patching import Patcher, patching_sweep, streams_of

CLEAN, CORRUPTED = [3, 1, 4, 1, 5], [2, 7, 1, 8, 2]


@pytest.fixture(scope="module")
def reverse():
    return checkpoints.load("reverse")


def test_patching_every_activation_reproduces_the_clean_logits(reverse):
    patcher = Patcher(reverse.model, reverse.task, CLEAN, CORRUPTED)
    everything = patcher.patches([*all_heads(reverse.model), *streams_of(reverse.model)])
    patched = patcher.run("corrupted", everything)
    assert torch.allclose(patched, patcher.clean_logits, atol=1e-5)
    assert patcher.recovered(everything) == pytest.approx(1.0, abs=1e-5)


def test_patching_nothing_recovers_nothing(reverse):
    patcher = Patcher(reverse.model, reverse.task, CLEAN, CORRUPTED)
    assert patcher.recovered(patcher.patches([])) == 0.0
    assert torch.equal(patcher.run("corrupted", patcher.patches([])), patcher.corrupted_logits)


def test_the_clean_run_prefers_its_answer_and_the_corrupted_run_the_other(reverse):
    patcher = Patcher(reverse.model, reverse.task, CLEAN, CORRUPTED)
    assert patcher.clean_difference > 5 > -5 > patcher.corrupted_difference
    assert patcher.steps == [0, 1, 2, 3, 4]  # every output digit differs; EOS does not


def test_the_last_encoder_stream_at_every_position_carries_the_whole_source(reverse):
    # Decoder inputs are the same in both runs, so the memory is all that differs.
    patcher = Patcher(reverse.model, reverse.task, CLEAN, CORRUPTED)
    assert patcher.recovered(patcher.patches([Stream("enc", 1)])) == pytest.approx(1.0, abs=1e-5)
    one = patcher.recovered(patcher.patches([Stream("enc", 1)], (0,)))
    assert 0.0 < one < 0.5  # one source position restores only the output that copies it


def test_the_sweep_names_every_head_and_stream_and_finds_the_copying_heads(reverse):
    calls = []
    result = patching_sweep(reverse.model, reverse.task, CLEAN, CORRUPTED,
                            progress=lambda done, total: calls.append((done, total)))
    assert set(result.heads) == {str(h) for h in all_heads(reverse.model)}
    assert len(result.streams["enc:L1.resid"]) == 5 and len(result.streams["dec:L2.resid"]) == 6
    assert calls[-1][0] == calls[-1][1] == len(calls)
    best = max(result.heads, key=result.heads.get)
    assert best.startswith("cross:L2")  # the layer that copies the source digit
    assert result.stream_all["dec:L2.resid"] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("corrupted, message", [([2, 7, 1], "same length"),
                                                 (CLEAN, "same answer")])
def test_a_pair_that_cannot_be_patched_is_refused_with_a_reason(reverse, corrupted, message):
    with pytest.raises(ValueError, match=message):
        Patcher(reverse.model, reverse.task, CLEAN, corrupted)


def test_a_patched_head_replaces_only_that_heads_slice(reverse):
    patcher = Patcher(reverse.model, reverse.task, CLEAN, CORRUPTED)
    head = Head("cross", 1, 2)
    assert patcher.clean_values(head).shape == (1, 6, reverse.model.cfg.d_k)
    fraction = patcher.recovered(patcher.patches([head]))
    assert 0.0 < fraction < 1.0
