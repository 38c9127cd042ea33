"""Interventions (core/interp/interventions.py): named heads, ablation, pattern override and patching,
identical in the full forward and in cached decoding."""

import threading

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.data.vocab import DIGITS
from minitx.core.interp.decode import greedy_decode
from minitx.core.interp.interventions import (
    Head,
    Interventions,
    Patch,
    Recording,
    Stream,
    ablation,
    head_means,
    parse_heads,
)
from minitx.core.model.kv_cache import IncrementalDecoder
from minitx.core.model.transformer import Seq2Seq

SRC = torch.tensor([[3, 1, 4, 1, 5, 9]])  # (1, S)
PREFIX = torch.tensor([[DIGITS.sos, 9, 5, 1, 4, 1, 3]])  # (1, T): decoder inputs, SOS first


def fresh(**overrides) -> Seq2Seq:
    torch.manual_seed(5)
    return Seq2Seq(ModelConfig(dropout=0.0, **overrides)).eval()


def full_logits(model, interventions, src=SRC, prefix=PREFIX):
    with torch.no_grad(), interventions.applied(model):
        return model(src, prefix)  # (B, T, V)


def cached_logits(model, interventions, src=SRC, prefix=PREFIX):
    """Feed prefix one position at a time through the KV-cache decoder -> (B, T, V)."""
    with torch.no_grad(), interventions.applied(model):
        decoder = IncrementalDecoder(model, *model.encode(src))
        return torch.stack([decoder.step(prefix[:, t]) for t in range(prefix.shape[1])], dim=1)


def recorded_clean(model, src=SRC, prefix=PREFIX) -> Recording:
    record = Recording()
    full_logits(model, Interventions(record=record), src, prefix)
    return record


def every_kind_of_intervention(model) -> dict[str, Interventions]:
    task = get_task("reverse")
    other = torch.tensor([[2, 7, 1, 8, 2, 8]])
    clean = recorded_clean(model, other)
    expected = task.alignment(SRC, torch.tensor([SRC.shape[1]]))  # (1, S, S)
    return {
        "zero, one head of each kind": Interventions(
            zero=frozenset({Head("enc", 0, 1), Head("self", 1, 2), Head("cross", 0, 3)})),
        "mean ablation": ablation(model, ["cross:L2", "enc:L1.H1", "self:L1.H4"], "mean", task),
        "uniform patterns": Interventions(patterns={Head("enc", 1, 0): "uniform",
                                                    Head("self", 0, 1): "uniform",
                                                    Head("cross", 1, 2): "uniform"}),
        "expected alignment": Interventions(patterns={Head("cross", 0, 0): "expected"}, expected=expected),
        "head patched at two positions": Interventions(patches=(
            Patch(Head("cross", 1, 1), clean.head_outputs("cross", 1)[:, 1], (1, 3)),
            Patch(Head("self", 0, 0), clean.head_outputs("self", 0)[:, 0], None))),
        "streams patched": Interventions(patches=(
            Patch(Stream("enc", 0), clean.stream("enc", 0), (2,)),
            Patch(Stream("dec", 0), clean.stream("dec", 0), (0, 4)))),
    }


def test_head_names_count_layers_and_heads_from_one():
    model = fresh()
    assert str(Head("cross", 1, 2)) == "cross:L2.H3"
    assert parse_heads("cross:L2.H3", model) == [Head("cross", 1, 2)]
    assert parse_heads("enc:L1", model) == [Head("enc", 0, h) for h in range(4)]
    assert len(parse_heads("self", model)) == 8
    assert parse_heads("CROSS:l2.h1", model) == [Head("cross", 1, 0)]


@pytest.mark.parametrize("spec, message", [
    ("cross:L3.H1", "layers 1-2"), ("enc:L1.H5", "heads 1-4"), ("cross:L0", "layers 1-2"),
    ("L2.H3", "KIND:Ll.Hh"), ("decoder:L1", "KIND:Ll.Hh"), ("", "KIND:Ll.Hh")])
def test_a_bad_head_name_is_one_clear_sentence(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_heads(spec, fresh())


def test_ablating_nothing_is_identical_to_the_plain_model():
    model = fresh()
    with torch.no_grad():
        plain = model(SRC, PREFIX)
        plain_greedy = greedy_decode(model, SRC)
    for nothing in (Interventions(), ablation(model, []), ablation(model, [], "mean", get_task("reverse"))):
        assert torch.equal(full_logits(model, nothing), plain)
        assert torch.equal(cached_logits(model, nothing), cached_logits(model, Interventions()))
        with nothing.applied(model):
            assert torch.equal(greedy_decode(model, SRC), plain_greedy)


VARIANTS = {
    "reference (post-norm)": {},
    "pre-norm": {"norm": "pre"},
    "modern (pre-norm, rms, rope, swiglu, 2 K/V heads)": {
        "norm": "pre", "norm_kind": "rms", "position_encoding": "rope", "activation": "swiglu",
        "kv_heads": 2},
    "learned positions": {"position_encoding": "learned"},
}


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_cached_and_full_decoding_agree_under_every_intervention(overrides):
    model = fresh(**overrides)
    plain = full_logits(model, Interventions())
    for name, interventions in every_kind_of_intervention(model).items():
        full = full_logits(model, interventions)
        assert not torch.allclose(full, plain, atol=1e-4), f"{name} changed nothing"
        assert torch.allclose(cached_logits(model, interventions), full, atol=1e-5), name


def test_cached_and_full_greedy_decoding_agree_under_every_intervention():
    # A trained model: a fresh one emits PAD, which the full pass masks and the cache cannot.
    model = checkpoints.load("reverse").model
    for name, interventions in every_kind_of_intervention(model).items():
        with interventions.applied(model):
            cached = greedy_decode(model, SRC, use_cache=True)
            assert torch.equal(cached, greedy_decode(model, SRC, use_cache=False)), name


def test_zero_ablating_every_cross_attention_head_makes_the_output_independent_of_the_source():
    model = fresh()
    blind = ablation(model, ["cross"])
    other = torch.tensor([[8, 8, 2, 0]])  # another length too
    assert torch.allclose(full_logits(model, blind), full_logits(model, blind, other), atol=1e-6)
    assert not torch.allclose(full_logits(model, Interventions()),
                              full_logits(model, Interventions(), other), atol=1e-3)
    with blind.applied(model):
        assert torch.equal(greedy_decode(model, SRC, 8), greedy_decode(model, other, 8))


def test_mean_ablation_puts_the_reference_mean_at_every_position():
    model = fresh()
    task = get_task("reverse")
    means = head_means(model, task)
    record = Recording()
    full_logits(model, ablation(model, ["self:L2.H3"], "mean", task, means).recording(record))
    out = record.head_outputs("self", 1)[0, 2]  # (T, d_k)
    assert torch.allclose(out, means[("self", 1)][2].expand_as(out))
    again = head_means(model, task)  # seeded: the same reference batch, the same means
    assert all(torch.equal(means[key], again[key]) for key in means)


def test_a_uniform_pattern_spreads_each_row_evenly_over_the_keys_it_may_see():
    model = fresh()
    iv = Interventions(patterns={Head("self", 0, 1): "uniform", Head("cross", 1, 0): "uniform"})
    with torch.no_grad(), iv.applied(model):
        _, maps = model(SRC, PREFIX, return_attention=True)
    T, S = PREFIX.shape[1], SRC.shape[1]
    causal = torch.ones(T, T).tril()
    assert torch.allclose(maps.decoder_self[0][0, 1], causal / causal.sum(-1, keepdim=True))
    assert torch.allclose(maps.cross[1][0, 0], torch.full((T, S), 1 / S))
    assert not torch.allclose(maps.cross[1][0, 1], torch.full((T, S), 1 / S))  # other heads untouched


def test_the_expected_pattern_is_the_tasks_alignment_and_leaves_rows_it_does_not_define():
    model = fresh()
    task = get_task("reverse")
    expected = task.alignment(SRC, torch.tensor([6]))  # (1, S, S): row i is source 5 - i
    with torch.no_grad():
        _, before = model(SRC, PREFIX, return_attention=True)
        with Interventions(patterns={Head("cross", 0, 2): "expected"}, expected=expected).applied(model):
            _, maps = model(SRC, PREFIX, return_attention=True)
    rows = maps.cross[0][0, 2]  # (T, S)
    assert torch.equal(rows[:6], expected[0].float())
    assert torch.equal(rows[6], before.cross[0][0, 2, 6])  # the EOS step: nothing expected


def test_an_expected_pattern_needs_the_alignment_and_a_cross_attention_head():
    model = fresh()
    with pytest.raises(ValueError, match="expected alignment"):
        with Interventions(patterns={Head("cross", 0, 0): "expected"}).applied(model):
            pass
    with pytest.raises(ValueError, match="no such head"):
        with Interventions(zero=frozenset({Head("enc", 5, 0)})).applied(model):
            pass


def test_interventions_in_one_thread_leave_another_threads_decode_alone():
    model = fresh()
    with torch.no_grad():
        plain = model(SRC, PREFIX)
    seen = {}

    def decode_elsewhere():
        with torch.no_grad():
            seen["logits"] = model(SRC, PREFIX)

    with ablation(model, ["cross"]).applied(model):
        thread = threading.Thread(target=decode_elsewhere)
        thread.start()
        thread.join()
        with torch.no_grad():
            assert not torch.allclose(model(SRC, PREFIX), plain)
    assert torch.equal(seen["logits"], plain)


def test_recording_keeps_every_cached_step_in_order():
    model = fresh()
    full, cached = Recording(), Recording()
    full_logits(model, Interventions(record=full))
    cached_logits(model, Interventions(record=cached))
    assert torch.allclose(cached.head_outputs("cross", 1), full.head_outputs("cross", 1), atol=1e-5)
    assert torch.allclose(cached.stream("dec", 0), full.stream("dec", 0), atol=1e-5)
    assert cached.stream("dec", 1).shape == (1, PREFIX.shape[1], 64)
