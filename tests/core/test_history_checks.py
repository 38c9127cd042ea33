"""The doctor's checks of a run's own record (core/doctor/history_checks.py), on loss and learning
rate curves of known shape: each passes on a healthy run and fails with its cause on the run it is
meant to catch, and each says why when the file has no history."""

import math

from minitx.core.doctor.code_checks import CAUSES
from minitx.core.doctor.history_checks import (
    RunRecord,
    check_answer_seen,
    check_still_falling,
    check_training_progress,
    check_warmup,
)
from minitx.core.history import History

STEPS = list(range(1, 401))


def record(losses, lrs=None, summary=None) -> RunRecord:
    history = History()
    for step, loss, lr in zip(STEPS, losses, lrs or [1e-3 * min(1.0, s / 50) for s in STEPS]):
        history.record_step(step, loss, lr, 1.0, 100.0, step / 10)
    return RunRecord.of(history, summary)


def falling(start=3.3, end=0.01):
    """A healthy curve: down from `start` towards `end`, levelling off."""
    return [end + (start - end) * math.exp(-s / 40) for s in STEPS]


def test_a_healthy_run_passes_every_history_check():
    run = record(falling())
    assert check_training_progress(run).passed
    assert check_still_falling(run, task_passed=True).passed
    assert check_warmup(run, task_passed=True).passed
    assert check_answer_seen(run, accuracy=1.0).passed


def test_a_loss_that_never_fell_means_no_learning():
    stuck = record([3.3 - 0.0002 * s for s in STEPS])
    result = check_training_progress(stuck)
    assert result.passed is False and result.cause == CAUSES["no-learning"] and result.value > 0.9


def test_a_loss_that_rose_back_up_means_divergence():
    diverged = record(falling()[:200] + [0.01 + 0.02 * s for s in range(200)])
    assert check_training_progress(diverged).cause == CAUSES["diverged"]


def test_a_failing_model_whose_loss_was_still_falling_was_stopped_too_soon():
    early = record([3.3 - 0.006 * s for s in STEPS])  # still going down at the end
    assert check_still_falling(early, task_passed=False).cause == CAUSES["too-few-steps"]
    assert check_still_falling(early, task_passed=True).passed  # a model that works: nothing to say
    assert check_still_falling(record(falling()), task_passed=False).passed  # levelled off


def test_a_loss_jump_at_the_peak_learning_rate_from_step_one_means_no_warmup():
    jump = falling()
    jump[2] = jump[0] + 0.4  # the loss above its start at step 3
    no_warmup = [1e-2] * len(STEPS)
    result = check_warmup(record(jump, no_warmup), task_passed=False)
    assert result.passed is False and result.cause == CAUSES["no-warmup"] and "by step 3" in result.detail
    assert check_warmup(record(jump), task_passed=False).passed  # a warmup: the jump is noise then
    smooth = check_warmup(record(falling(), no_warmup), task_passed=True)
    assert smooth.passed and "no warmup" in smooth.detail  # no warmup, but nothing went wrong
    failing = check_warmup(record(falling(end=2.0), no_warmup), task_passed=False)
    assert failing.cause == CAUSES["no-warmup-failing"]  # no jump, yet it fails: a weaker cause


def test_a_loss_near_zero_with_generation_failing_means_the_answer_was_seen():
    run = record(falling(end=1e-4))
    seen = check_answer_seen(run, accuracy=0.0)
    assert seen.passed is False and seen.cause == CAUSES["saw-answer"] and "after 400 steps" in seen.detail


def test_without_a_history_each_check_says_so_and_the_summary_still_serves_the_final_loss():
    empty = RunRecord.of(None, {})
    for result in (check_training_progress(empty), check_still_falling(empty, False),
                   check_warmup(empty, False), check_answer_seen(empty, 0.0)):
        assert result.status == "skip" and "no training history" in result.detail
    summary_only = RunRecord.of(None, {"loss": 2e-4, "steps": 700})
    assert check_answer_seen(summary_only, 0.0).passed is False
    assert summary_only.total_steps == 700 and check_training_progress(summary_only).status == "skip"
