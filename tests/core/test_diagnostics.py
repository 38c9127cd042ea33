"""The doctor's code checks on fresh models: each passes on a healthy model and fails, with the
right cause, on a model broken in the way it is meant to catch; and how failures become causes."""

import json

import pytest
import torch

import minitx.core.model.attention
import minitx.core.model.transformer
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.tasks import get_task
from minitx.core.doctor.code_checks import (
    CAUSES,
    CheckResult,
    check_attention_saturation,
    check_fused_agreement,
    check_future_leakage_gradients,
    check_future_leakage_values,
    check_initial_loss,
    check_overfit_one_batch,
    check_permutation,
    check_rows_sum_to_one,
    check_source_dependence,
)
from minitx.core.doctor.diagnosis import (
    NO_PROBLEMS,
    WEIGHT_CHECKS,
    diagnose,
    diagnose_model,
    format_number,
    fresh_model,
    looks_trained,
    run_doctor,
)
from minitx.core.model.components import VARIANTS
from minitx.core.model.transformer import Seq2Seq

TINY = ModelConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                   max_len=16)


@pytest.fixture
def task():
    return get_task("reverse", 4, 6)


def fresh(**changes) -> Seq2Seq:
    torch.manual_seed(0)
    return Seq2Seq(TINY.replace(**changes))


def test_a_fresh_healthy_model_passes_every_code_check_and_skips_the_weight_checks(task):
    results = run_doctor(fresh(), task, quick=True, trained=False)
    by_status = {r.name: r.status for r in results}
    assert "fail" not in by_status.values()
    assert by_status["accuracy"] == by_status["alignment"] == by_status["trained-without-mask"] == "skip"
    assert all("fresh model" in r.detail for r in results if r.kind == "weights")
    assert by_status["overfit-one-batch"] == "skip"  # quick mode
    assert looks_trained(fresh(), task)[0] is False
    assert diagnose(results).verdict == NO_PROBLEMS


def test_an_untrained_model_checked_as_trained_fails_its_task_and_is_told_it_learned_nothing(task):
    # "Looks untrained" explains a failure, never hides it: the weight checks run all the same.
    model = fresh()
    results = run_doctor(model, task, quick=True)
    assert {r.name: r.status for r in results}["accuracy"] == "fail"
    diagnosis = diagnose_model(results, model, task)
    assert diagnosis.fails_task is True and diagnosis.verdict != NO_PROBLEMS
    assert "it learned nothing from its source" in diagnosis.verdict
    assert "does not depend on the source" in diagnosis.verdict and "unsure" in diagnosis.verdict
    assert diagnosis.likely  # a cause, or what to look at in order


def test_initial_loss_of_the_default_model_is_about_3_3():
    result = check_initial_loss(Seq2Seq(ModelConfig()), get_task("reverse"))
    assert result.passed and 3.0 < result.value < 3.6


def test_changing_a_future_token_changes_earlier_logits_only_without_the_causal_mask(task):
    assert check_future_leakage_values(fresh(), task).value == 0.0
    leaky = check_future_leakage_values(fresh(bug="no-causal-mask"), task)
    assert leaky.passed is False and leaky.value > 1e-3 and leaky.cause == CAUSES["no-causal-mask"]


def test_earlier_outputs_have_zero_gradient_wrt_future_inputs_only_with_the_mask(task):
    assert check_future_leakage_gradients(fresh(), task).value == 0.0
    leaky = check_future_leakage_gradients(fresh(bug="no-causal-mask"), task)
    assert leaky.passed is False and leaky.cause == CAUSES["no-causal-mask"]


def test_an_inverted_triu_mask_is_caught_as_leakage(task, monkeypatch):
    def upper(length, device=None):
        return torch.ones(length, length, dtype=torch.bool, device=device).triu()[None, None]

    monkeypatch.setattr(minitx.core.model.attention, "causal_mask", upper)
    assert check_future_leakage_values(fresh(), task).passed is False


def test_attention_saturates_at_init_only_without_sqrt_dk_scaling():
    # The scaling facts of docs/checks.md: scaled scores have std ~1 and the softmax over 200 keys peaks at
    # ~0.05; unscaled, at d_k 16, the std is sqrt(16) = 4 and the peak ~0.48.
    scaled = check_attention_saturation(fresh())
    unscaled = check_attention_saturation(fresh(bug="no-scale"))
    assert scaled.passed and 0.8 < scaled.value < 1.2 and "peak 0.05" in scaled.detail
    assert unscaled.passed is False and 3.5 < unscaled.value < 4.5
    assert unscaled.cause == CAUSES["no-scale"]


@pytest.mark.parametrize("heads", [4, 8])
def test_missing_scaling_is_caught_even_with_small_heads(heads):
    # d_model 16 with 4 or 8 heads: d_k 4 or 2, where the peak weight barely moves.
    small = TINY.replace(d_model=16, n_heads=heads, d_ff=32)
    torch.manual_seed(0)
    assert check_attention_saturation(Seq2Seq(small)).passed
    assert check_attention_saturation(Seq2Seq(small.replace(bug="no-scale"))).passed is False


@pytest.mark.parametrize("attention", ["explicit", "fused"])
def test_attention_agrees_with_scaled_dot_product_attention(attention):
    result = check_fused_agreement(fresh(attention=attention))
    assert result.passed and result.value < 1e-5


def test_unscaled_attention_disagrees_and_is_named_as_missing_scaling():
    result = check_fused_agreement(fresh(bug="no-scale"))
    assert result.passed is False and result.cause == CAUSES["no-scale"]


def test_scores_unscaled_by_design_are_not_missing_scaling_and_scaled_ones_there_are_a_bug():
    """T5 declares its scores unscaled (scale_scores false): its attention matches the unscaled
    formula, as it should, and its init is not judged by the spread of scaled scores. The same
    config computing scaled scores is then the one that disagrees."""
    t5_like = fresh(scale_scores=False, bias=False)
    agreement = check_fused_agreement(t5_like)
    assert agreement.passed and agreement.value < 1e-5
    saturation = check_attention_saturation(t5_like)
    assert saturation.passed is None and "by design" in saturation.detail
    t5_like.encoder[0].self_attn.score_divisor = None  # scaled after all: not what it declares
    wrong = check_fused_agreement(t5_like)
    assert wrong.passed is False and wrong.cause == CAUSES["attention-maths"]


@pytest.mark.parametrize("changes", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_component_variant_passes_every_check_of_a_fresh_model(task, changes):
    results = run_doctor(fresh(n_heads=4, **changes), task, quick=True, trained=False)  # gqa shares K/V
    assert [r.name for r in results if r.passed is False] == []


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_attention_is_not_mistaken_for_missing_scaling_and_its_absence_is_caught(kv_heads):
    # A K projection 4x narrower draws larger Xavier weights: larger keys, still scaled scores.
    gqa = fresh(n_heads=4, kv_heads=kv_heads)
    assert check_attention_saturation(gqa).value == pytest.approx(1.0, abs=0.1)
    unscaled = check_attention_saturation(fresh(n_heads=4, kv_heads=kv_heads, bug="no-scale"))
    assert unscaled.passed is False and unscaled.value > 1.5


def test_the_permutation_check_runs_the_model_without_positions_and_with_them(monkeypatch):
    for encoding in ("sinusoidal", "learned", "rope"):
        result = check_permutation(fresh(position_encoding=encoding))
        assert result.passed and result.value < 1e-5 and encoding in result.detail
    positionless = check_permutation(fresh(position_encoding="none"))
    assert positionless.passed and "no position encoding" in positionless.detail
    # Positions that never reach the encoder: with "them" it is just as equivariant.
    monkeypatch.setattr(Seq2Seq, "position_table", lambda self, side: None)
    lost = check_permutation(fresh())
    assert lost.passed is False and lost.cause == CAUSES["no-positions"]


def test_the_permutation_check_catches_an_encoder_that_depends_on_order_by_itself(monkeypatch):
    # A causal mask in the encoder: position matters even with no position encoding.
    monkeypatch.setattr(minitx.core.model.transformer, "padding_mask_or_none",
                        lambda tokens, pad: minitx.core.model.attention.causal_mask(tokens.shape[1]))
    result = check_permutation(fresh())
    assert result.passed is False and result.value > 1e-3 and result.cause == CAUSES["position-leak"]


def test_rows_sum_to_one_and_the_check_catches_rows_that_do_not(task, monkeypatch):
    assert check_rows_sum_to_one(fresh(), task).passed
    real = minitx.core.model.transformer.attention

    def halved(*args, **kwargs):
        out, weights = real(*args, **kwargs)
        return out, None if weights is None else weights * 0.5

    monkeypatch.setattr(minitx.core.model.transformer, "attention", halved)
    broken = check_rows_sum_to_one(fresh(), task)
    assert broken.passed is False and broken.value == pytest.approx(0.5, abs=1e-5)


def test_output_depends_on_the_source_unless_cross_attention_is_swapped(task):
    assert check_source_dependence(fresh(), task).value > 1e-2
    swapped = check_source_dependence(fresh(bug="swap-cross"), task)
    assert swapped.value == 0.0 and swapped.cause == CAUSES["swap-cross"]


@pytest.mark.slow  # end to end: tier 2
def test_a_fresh_model_overfits_one_batch_of_eight(task):
    result = check_overfit_one_batch(fresh(), task)
    assert result.passed and result.value < 0.01


def test_overfitting_with_too_few_steps_fails(task):
    assert check_overfit_one_batch(fresh(), task, steps=5).passed is False


def test_the_doctor_leaves_the_model_and_the_global_rng_untouched(task):
    model = fresh().train()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    run_doctor(model, task, quick=True, trained=True)
    assert model.training
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())


def test_results_are_plain_records_that_print_and_serialise(task):
    results = run_doctor(fresh(bug="no-causal-mask"), task, quick=True, trained=False)
    rows = [r.to_dict() for r in results]
    json.dumps(rows)
    assert {row["status"] for row in rows} == {"pass", "fail", "skip"}
    assert {row["kind"] for row in rows} == {"code", "weights"}
    assert all(row["cause"] == "" for row in rows if row["status"] != "fail")
    diagnosis = diagnose(results)
    assert diagnosis.texts == [CAUSES["no-causal-mask"]]
    assert diagnosis.causes[0].kinds == ["code"]  # a fresh model: the code is all there is to blame
    json.dumps(diagnosis.to_dict())
    assert [format_number(x) for x in (None, 0.0, 3.2712, 1.2e-8)] == ["-", "0", "3.271", "1.20e-08"]


def test_the_callback_sees_every_result_as_it_is_measured(task):
    seen = []
    results = run_doctor(fresh(), task, quick=True, callback=seen.append)
    assert seen == results
    weight_rows = [r.name for r in results if r.kind == "weights"]
    assert weight_rows == [name for name, _ in WEIGHT_CHECKS]  # every weight check, in its order


def test_a_fresh_model_from_configs_shows_model_bugs_but_not_training_bugs():
    cfg = TrainConfig(min_source_len=4, max_source_len=6, bug="no-causal-mask")
    model, task = fresh_model(TINY, cfg)
    assert diagnose(run_doctor(model, task, quick=True, trained=False)).texts == [CAUSES["no-causal-mask"]]
    model, task = fresh_model(TINY, cfg.replace(bug="no-shift"))  # only changes training
    assert diagnose(run_doctor(model, task, quick=True, trained=False)).texts == []


def _outcome(name: str, passed: bool, cause_key: str = "", kind: str = "code", value: float = 1.0):
    cause = CAUSES[cause_key] if cause_key and not passed else ""
    return CheckResult(name, name, value, "-", passed, cause, kind=kind)


def test_a_cause_only_suggested_is_not_blamed_when_its_own_checks_ran_and_showed_nothing():
    # A stalled overfit suggests missing scaling; the code and the weights measured it fine.
    results = [_outcome("source-dependence", False, "swap-cross"),
               _outcome("overfit-one-batch", False, "no-scale"),
               _outcome("attention-saturation", True),
               _outcome("trained-unscaled", True, kind="weights")]
    assert diagnose(results).texts == [CAUSES["swap-cross"]]
    unmeasured = [_outcome("overfit-one-batch", False, "no-scale")]  # nothing of its own ran
    assert diagnose(unmeasured).texts == [CAUSES["no-scale"]]


def test_a_weight_check_names_its_bug_even_when_the_code_check_of_that_bug_passes():
    # The user's situation: the code is correct now, the weights were trained without the mask.
    results = [_outcome("future-leakage-values", True), _outcome("future-leakage-gradients", True),
               _outcome("accuracy", False, "undertrained", "weights", 0.0),
               _outcome("trained-without-mask", False, "no-causal-mask", "weights")]
    diagnosis = diagnose(results)
    assert diagnosis.texts == [CAUSES["no-causal-mask"]]  # the state "not learned" is its consequence
    assert diagnosis.causes[0].kinds == ["weights"] and diagnosis.fails_task is True


def test_the_strongest_counterfactual_comes_first_and_symptoms_follow_their_counterfactual():
    results = [_outcome("accuracy", False, "undertrained", "weights", 0.0),
               _outcome("trained-on-copies", False, "no-reverse", "weights", 0.4),
               _outcome("trained-without-mask", False, "no-causal-mask", "weights", 0.9),
               # a symptom of no-shift, but the weights did no better fed the labels unshifted
               _outcome("trained-unshifted", True, kind="weights"),
               _outcome("copies-decoder-input", False, "no-shift", "weights")]
    assert diagnose(results).texts == [CAUSES["no-causal-mask"], CAUSES["no-reverse"]]


def test_a_failing_model_with_no_cause_found_gets_a_verdict_with_causes_to_look_at_in_order():
    results = [_outcome("accuracy", False, "undertrained", "weights", 0.2),
               _outcome("source-use", True, kind="weights")]
    diagnosis = diagnose(results, steps=40, loss=1.6)
    assert diagnosis.causes == [] and diagnosis.fails_task is True
    assert diagnosis.verdict.startswith("fails its task: exact match 20%")
    assert "training loss 1.6 after 40 steps" in diagnosis.verdict
    assert "no check singles out" in diagnosis.verdict
    assert diagnosis.suspects[0] == CAUSES["too-few-steps"]
