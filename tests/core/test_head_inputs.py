"""A head's own input (core/model/hooks.py, HeadInput in core/interp/interventions.py): replacing
what one head's query or key/value projections read changes that head only, a recorded input
put back changes nothing, with grouped K/V heads too; cached decoding refuses it."""

import pytest
import torch

from minitx.core.config import ModelConfig
from minitx.core.interp.decode import greedy_decode
from minitx.core.interp.interventions import Head, HeadInput, Interventions, Patch, Recording
from minitx.core.model.transformer import Seq2Seq

SRC, OTHER = torch.tensor([[3, 1, 4, 1, 5, 9]]), torch.tensor([[2, 7, 1, 8, 2, 8]])
PREFIX = torch.tensor([[11, 9, 5, 1, 4, 1, 3]])
VARIANTS = [{}, {"norm": "pre", "position_encoding": "rope", "kv_heads": 2, "activation": "swiglu"}]


def fresh(**overrides) -> Seq2Seq:
    torch.manual_seed(1)
    return Seq2Seq(ModelConfig(dropout=0.0, **overrides)).eval()


def recorded(model, src) -> tuple[torch.Tensor, Recording]:
    record = Recording(inputs=True)
    with torch.no_grad(), Interventions(record=record).applied(model):
        return model(src, PREFIX), record


@pytest.mark.parametrize("overrides", VARIANTS)
def test_putting_back_every_recorded_input_changes_nothing(overrides):
    model = fresh(**overrides)
    logits, record = recorded(model, SRC)
    sites = [HeadInput(Head(k, la, h), side) for k in ("enc", "self", "cross") for la in range(2)
             for h in range(4) for side in ("q", "kv")]
    same = Interventions(patches=tuple(Patch(s, record.head_input(s)) for s in sites))
    with torch.no_grad(), same.applied(model):
        assert torch.allclose(model(SRC, PREFIX), logits, atol=1e-5)


@pytest.mark.parametrize("overrides", VARIANTS)
@pytest.mark.parametrize("side", ["q", "kv"])
def test_another_runs_input_for_one_head_changes_that_heads_output_only(overrides, side):
    model = fresh(**overrides)
    _, clean = recorded(model, SRC)
    _, other = recorded(model, OTHER)
    site = HeadInput(Head("cross", 1, 2), side)
    patched = Recording()
    with torch.no_grad(), Interventions(patches=(Patch(site, other.head_input(site)),),
                                        record=patched).applied(model):
        model(SRC, PREFIX)
    before, after = clean.head_outputs("cross", 1), patched.head_outputs("cross", 1)  # (1, h, T, k)
    assert not torch.allclose(before[:, 2], after[:, 2], atol=1e-4)
    for h in (0, 1, 3):  # with grouped K/V heads, head 3 shares head 2's K/V head: still its own
        assert torch.allclose(before[:, h], after[:, h], atol=1e-5)


def test_cached_decoding_refuses_a_heads_own_input():
    model = fresh()
    _, record = recorded(model, SRC)
    site = HeadInput(Head("cross", 0, 0), "q")
    with pytest.raises(ValueError, match="full forwards only"), \
            Interventions(patches=(Patch(site, record.head_input(site)),)).applied(model):
        greedy_decode(model, SRC)
