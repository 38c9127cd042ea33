"""The components lab: variants of one recipe trained on the same data and seeds, measured alike."""

import pytest
import torch

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.lab import LabPlan, _Run, run_lab, summarise, variant_options
from minitx.core.model.transformer import Seq2Seq, parameter_breakdown

BASE_MODEL = ModelConfig(d_model=16, n_heads=4, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                         dropout=0.0)
BASE_TRAIN = TrainConfig(batch_size=16, warmup=2, min_source_len=3, max_source_len=5, device="cpu")


def plan(**changes) -> LabPlan:
    return LabPlan(BASE_MODEL, BASE_TRAIN, **{"steps": 8, "eval_every": 4, "eval_size": 16,
                                              "beyond": (7, 9), **changes})


def test_a_variant_name_is_the_options_it_sets_and_plus_combines_them():
    assert variant_options("baseline") == {}
    assert variant_options("rope+swiglu") == {"position_encoding": "rope", "activation": "swiglu"}
    with pytest.raises(ValueError, match="unknown variant 'alibi'"):
        variant_options("rope+alibi")


def test_every_variant_runs_for_every_seed_alternating_and_is_measured_alike():
    runs = list(run_lab(plan(), ["baseline", "gqa+rms"], [0, 1]))
    assert [(r.variant, r.seed) for r in runs] == [("baseline", 0), ("gqa+rms", 0), ("baseline", 1),
                                                   ("gqa+rms", 1)]
    gqa = Seq2Seq(BASE_MODEL.replace(kv_heads=2, norm_kind="rms"))
    assert runs[1].params == parameter_breakdown(gqa)["total"] < runs[0].params
    for run in runs:
        assert [step for step, _ in run.curve] == [4, 8]
        assert run.final_accuracy == run.curve[-1][1]
        first = next((step for step, acc in run.curve if acc >= 0.99), None)
        assert run.steps_to_target == first
        assert set(run.beyond_by_length) <= {7, 8, 9} and run.steps_per_s > 0


def test_a_run_trains_the_same_alone_or_in_turn_with_others_even_with_dropout():
    # Dropout draws from torch's global RNG: each run keeps its own state of it.
    noisy = LabPlan(BASE_MODEL.replace(dropout=0.3), BASE_TRAIN, steps=3)
    alone = _Run(noisy, "rope", 3)
    together = [_Run(noisy, variant, 3) for variant in ("baseline", "rope", "gqa")]
    for step in range(1, 4):
        alone.step_to(step)
        for run in together:
            run.step_to(step)
    a, b = alone.trainer.model.state_dict(), together[1].trainer.model.state_dict()
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert alone.trainer.last_loss == together[1].trainer.last_loss


def test_progress_is_reported_every_evaluation_period_of_every_seed():
    seen = []
    list(run_lab(plan(), ["baseline", "rms"], [0, 5], progress=lambda seed, step: seen.append((seed, step))))
    assert seen == [(0, 4), (0, 8), (5, 4), (5, 8)]


def test_the_summary_has_one_row_per_variant_in_the_order_they_ran():
    runs = list(run_lab(plan(steps=4), ["mqa", "baseline"], [0, 1]))
    rows = summarise(plan(), runs)
    assert [row.variant for row in rows] == ["mqa", "baseline"]
    assert rows[0].parts == "kv_heads=1" and rows[1].parts == "the base recipe's model"
    assert rows[0].final_accuracy == pytest.approx(sum(r.final_accuracy for r in runs[::2]) / 2)
    assert len(rows[0].steps_to_target) == 2 and rows[0].to_dict()["runs"][0]["variant"] == "mqa"
    for n, accuracy in rows[1].beyond_by_length.items():  # the mean of the seeds' accuracies
        assert accuracy == pytest.approx(sum(r.beyond_by_length[n] for r in runs[1::2]) / 2)


def test_lengths_beyond_the_positions_a_model_holds_are_refused_before_training():
    with pytest.raises(ValueError, match="max_len"):
        next(run_lab(plan(beyond=(11, 80)), ["baseline"], [0]))
