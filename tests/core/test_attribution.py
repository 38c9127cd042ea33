"""Attribution patching (core/interp/attribution.py): exact where the metric is linear in the
activation, close to exact patching on a trained model, and the QK fix where attention decides."""

import pytest
import torch
from torch import nn

from minitx import checkpoints
from minitx.core.config import ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.interp.attribution import agreement, agreements, attribute, flat_streams, pearson
from minitx.core.interp.interventions import SIDES, HeadInput, Stream, all_heads
from minitx.core.interp.pairs import draw_pairs
from minitx.core.interp.patching import Patcher, sweep
from minitx.core.model.transformer import Seq2Seq

CLEAN, CORRUPTED = [3, 1, 4, 1, 5], [2, 7, 1, 8, 2]


@pytest.fixture(scope="module")
def reverse():
    return checkpoints.load("reverse")


@pytest.fixture(scope="module")
def reverse_pairs(reverse):
    torch.set_num_threads(1)
    return Patcher.of_pairs(reverse.model, draw_pairs(reverse.task, 12, 5, reverse.model.cfg.eos_id))


def linear_toy() -> Seq2Seq:
    """A pre-norm model whose last decoder layer is linear from its cross-attention heads to the
    logits: no norms anywhere, and the last feed-forward block outputs only its bias."""
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(norm="pre", n_encoder_layers=1, n_decoder_layers=1, dropout=0.0)).eval()
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.LayerNorm):
                setattr(module, name, nn.Identity())
    with torch.no_grad():
        model.decoder[-1].ff[-1].weight.zero_()  # (d, f): the block's output is its bias
    return model


def test_attribution_equals_exact_patching_where_the_answer_is_linear_in_the_head():
    model = linear_toy()
    patcher = Patcher(model, get_task("reverse"), CLEAN, CORRUPTED)
    estimate = attribute(patcher)
    for head in all_heads(model, ("cross",)):
        exact = patcher.recovered(patcher.patches([head]))
        assert estimate.heads[str(head)] == pytest.approx(exact, abs=1e-4)
    assert any(abs(estimate.heads[str(h)]) > 0.01 for h in all_heads(model, ("cross",)))  # not all 0


def test_attribution_of_the_last_decoder_stream_is_exact_in_a_post_norm_model(reverse):
    # Post-norm has no final norm: the logits are linear in the stream leaving the last layer.
    patcher = Patcher(reverse.model, reverse.task, CLEAN, CORRUPTED)
    estimate = attribute(patcher)
    last = Stream("dec", len(reverse.model.decoder) - 1)
    for position in range(len(patcher.clean_answer)):
        exact = patcher.recovered(patcher.patches([last], (position,)))
        assert estimate.streams[str(last)][position] == pytest.approx(exact, abs=1e-4)


def test_attribution_agrees_with_exact_patching_over_every_head_of_the_trained_model(reverse_pairs):
    patcher = reverse_pairs
    estimate = attribute(patcher)
    exact = {str(h): patcher.recovered(patcher.patches([h])) for h in all_heads(patcher.model)}
    agreed = agreement(exact, estimate.heads)
    assert agreed.count == 24 and agreed.r > 0.95
    assert len(agreed.apart) == 3 and abs(agreed.apart[0][1] - agreed.apart[0][2]) >= \
        abs(agreed.apart[-1][1] - agreed.apart[-1][2])


def test_the_qk_fix_estimates_what_cross_attention_reads_better_than_the_plain_gradient(reverse_pairs):
    patcher = reverse_pairs
    estimate = attribute(patcher)
    exact = {str(HeadInput(h, side)): patcher.recovered(patcher.patches([HeadInput(h, side)]))
             for h in all_heads(patcher.model, ("cross",)) for side in SIDES}
    plain, fixed = agreement(exact, estimate.inputs), agreement(exact, estimate.inputs_qk)
    assert fixed.r > 0.95 and fixed.r > plain.r
    assert set(estimate.saturation) == {str(h) for h in all_heads(patcher.model, ("cross",))}
    assert all(0 < top <= 1 for top in estimate.saturation.values())


def test_the_whole_residual_stream_shows_where_the_linear_estimate_fails(reverse_pairs):
    # Copying a whole encoder position is a large change: the estimate falls well short of it,
    # and agrees with exact patching far less than it does for heads.
    patcher = reverse_pairs
    estimate = attribute(patcher)
    exact = sweep(patcher)
    agreed = agreements(exact, estimate)
    assert agreed["streams"].r < agreed["heads"].r - 0.1
    exact_enc, estimated_enc = flat_streams(exact.streams), flat_streams(estimate.streams)
    positions = [k for k in exact_enc if k.startswith("enc")]
    assert sum(estimated_enc[k] for k in positions) < 0.6 * sum(exact_enc[k] for k in positions)


def test_pearson_is_none_for_a_constant_side_and_one_for_a_line():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [5, 5, 5]) is None
    assert agreement({"a": 1.0}, {"a": 1.0}).r is None
