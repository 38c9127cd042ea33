"""How the doctor runs trained weights under a bug's variant (core/doctor/counterfactuals.py): the
switched model computes exactly what core/model/transformer.py computes for that variant, two
variants can be on at once, and the correct code comes back afterwards."""

import pytest
import torch

from minitx.core.config import MODEL_BUGS, ModelConfig
from minitx.core.data.tasks import get_task
from minitx.core.doctor.counterfactuals import (
    Fit,
    copies_of_source,
    correct_model,
    fit_batches,
    measure_fit,
    switched,
)
from minitx.core.model.transformer import Seq2Seq

TINY = ModelConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1, max_len=16)


def logits(model, batch):
    with torch.no_grad():
        return model.eval()(batch.src, batch.decoder_input)


@pytest.fixture
def batch():
    return get_task("reverse", 4, 6).batch(8, torch.Generator().manual_seed(1), 6, 6)


@pytest.mark.parametrize("bug", MODEL_BUGS)
def test_a_switched_variant_computes_what_a_model_built_with_the_bug_computes(bug, batch):
    torch.manual_seed(0)
    built = Seq2Seq(TINY.replace(bug=bug))
    rebuilt = correct_model(built)  # the same weights, the correct code
    assert rebuilt.cfg.bug == ""
    with switched(rebuilt, (bug,)) as variant:
        assert torch.equal(logits(variant, batch), logits(built, batch))
    healthy = Seq2Seq(TINY)
    healthy.load_state_dict(built.state_dict())
    assert torch.equal(logits(rebuilt, batch), logits(healthy, batch))  # switched back
    assert not torch.allclose(logits(healthy, batch), logits(built, batch))  # the variant mattered


def test_two_variants_switch_on_together(batch):
    torch.manual_seed(0)
    model = Seq2Seq(TINY)
    rebuilt = correct_model(model)
    with switched(rebuilt, ("no-causal-mask", "no-scale")) as both:
        assert both.causal is False
        assert {m.score_divisor for m in both.modules() if hasattr(m, "score_divisor")} == {1.0}
    assert rebuilt.causal is True
    assert {m.score_divisor for m in rebuilt.modules() if hasattr(m, "score_divisor")} == {None}


def test_copies_of_the_source_are_sos_source_eos(batch):
    task = get_task("reverse", 4, 6)
    vocab = task.vocab
    copies = copies_of_source(batch, task)
    assert torch.equal(copies.labels[:, :6], batch.src) and bool((copies.labels[:, 6] == vocab.eos).all())
    assert torch.equal(copies.decoder_input[:, 1:], batch.src)
    assert bool((copies.decoder_input[:, 0] == vocab.sos).all())


def test_markedly_better_needs_a_quarter_more_exact_or_half_the_loss_and_as_good_needs_a_learned_task():
    assert Fit(0.6, 1.0).markedly_better_than(Fit(0.3, 1.0))
    assert Fit(0.0, 1.0).markedly_better_than(Fit(0.0, 3.0))  # the loss a third
    assert not Fit(0.0, 2.0).markedly_better_than(Fit(0.0, 2.4))  # 0.4 nats: not enough
    chance = 2.3
    assert Fit(0.91, 0.08).fires_against(Fit(0.88, 0.077), chance)  # learned, and as good unscaled
    assert not Fit(0.91, 0.5).fires_against(Fit(0.88, 0.077), chance)  # far worse: a healthy model
    assert not Fit(0.0, 2.3).fires_against(Fit(0.0, 2.32), chance)  # nothing learned: no room to judge


def test_fit_batches_hold_one_source_length_each_where_the_task_can_draw_them():
    batches = fit_batches(get_task("reverse", 4, 10))
    assert [b.src.shape[1] for b in batches] == list(range(4, 11))
    assert all(bool((b.lengths == b.src.shape[1]).all()) for b in batches)
    torch.manual_seed(0)
    fit = measure_fit(Seq2Seq(TINY.replace(max_len=16)), fit_batches(get_task("reverse", 4, 6)))
    assert 0.0 <= fit.exact <= 1.0 and fit.loss > 1.0  # an untrained model: no example right
