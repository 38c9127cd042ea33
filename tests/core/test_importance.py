"""What ablating heads does to the bundled reverse model, head importance, and failures."""

import pytest

from minitx import checkpoints
from minitx.core.interp.importance import head_importance
from minitx.core.interp.interventions import ablation, parse_heads
from minitx.core.training.evaluation import evaluate, find_failures


@pytest.fixture(scope="module")
def reverse():
    return checkpoints.load("reverse")


def accuracy(ckpt, specs, kind="zero", n=500):
    with ablation(ckpt.model, specs, kind, ckpt.task).applied(ckpt.model):
        return evaluate(ckpt.model, ckpt.task, n=n, seed=1234).accuracy


def test_ablating_all_four_cross_heads_of_layer_2_breaks_reverse_while_one_head_costs_little(reverse):
    # Measured (n=500, seed 1234): 100.0% plain, 3.4% zero / 0.4% mean without layer 2's cross-
    # attention, 100.0% without any single one of its heads (docs/interventions.md).
    assert accuracy(reverse, []) >= 0.99
    assert accuracy(reverse, ["cross:L2"]) < 0.30
    assert accuracy(reverse, ["cross:L2"], "mean") < 0.30
    for head in range(1, 5):
        assert accuracy(reverse, [f"cross:L2.H{head}"]) >= 0.97


def test_importance_ranks_heads_by_the_loss_their_ablation_costs(reverse):
    heads = parse_heads("cross", reverse.model)
    seen = []
    result = head_importance(reverse.model, reverse.task, n=100, heads=heads,
                             progress=lambda done, total: seen.append((done, total)) and False)
    assert seen == [(i, 8) for i in range(1, 9)]
    assert {e.head for e in result.heads} == {str(h) for h in heads}
    changes = [(-e.loss_change, e.accuracy_change) for e in result.heads]
    assert changes == sorted(changes)
    assert result.baseline.accuracy >= 0.99
    for effect in result.heads:
        assert effect.accuracy == pytest.approx(result.baseline.accuracy + effect.accuracy_change)
    assert result.heads[0].loss_change > 0  # the costliest one helps; the rest back each other up


def test_importance_can_be_stopped_after_any_head(reverse):
    result = head_importance(reverse.model, reverse.task, n=50, heads=parse_heads("enc", reverse.model),
                             progress=lambda done, total: done == 2)
    assert len(result.heads) == 2


def test_failures_are_the_wrong_outputs_with_the_step_where_each_first_goes_wrong(reverse):
    with ablation(reverse.model, ["cross:L2"]).applied(reverse.model):
        failures, count = find_failures(reverse.model, reverse.task, n=200, limit=5)
        accuracy = evaluate(reverse.model, reverse.task, n=200, seed=1234).accuracy
    assert count == round((1 - accuracy) * 200) and len(failures) == 5
    for f in failures:
        assert f.output[: f.first_wrong] == f.expected[: f.first_wrong]
        assert f.output[f.first_wrong : f.first_wrong + 1] != f.expected[f.first_wrong : f.first_wrong + 1]
        assert f.expected == reverse.task.expected_output(f.source) + [12]


def test_a_model_that_gets_everything_right_has_no_failures():
    copy = checkpoints.load("copy")  # 100% on fresh sequences
    assert find_failures(copy.model, copy.task, n=100) == ([], 0)
