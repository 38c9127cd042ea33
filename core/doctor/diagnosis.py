"""The doctor: which checks run on a model, in what order, and what their failures mean.

The checks themselves (core/doctor/code_checks.py) measure; this decides which apply (checks for a trained
model are skipped for one that looks untrained: its predictions are not confident) and turns
the failures into likely causes, most specific measurement first, never blaming a cause whose
own check passed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.task import Task
from minitx.core.data.tasks import task_for_config
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
    probe_batch,
    skipped,
)
from minitx.core.doctor.trained_checks import (
    ALIGNMENT_THRESHOLD,
    check_accuracy,
    check_alignment,
    check_copies_decoder_input,
    check_copies_source,
)
from minitx.core.model.transformer import Seq2Seq, eval_mode
from minitx.core.training.bug_presets import apply_bug

# When several checks fail, the most specific measurement names the cause (see `diagnose`).
PRIORITY = ("future-leakage-values", "future-leakage-gradients", "copies-decoder-input",
            "source-dependence", "fused-agreement", "attention-saturation", "permutation", "copies-source",
            "alignment", "rows-sum-to-one", "initial-loss", "overfit-one-batch", "accuracy")

# The checks that measure a cause directly. A cause that another, less specific check suggests
# (a stalled overfit suggests missing scaling) is not blamed when its own checks ran and passed.
OWN_CHECKS = {
    "no-scale": ("attention-saturation", "fused-agreement"),
    "no-causal-mask": ("future-leakage-values", "future-leakage-gradients"),
    "swap-cross": ("source-dependence",),
    "no-shift": ("copies-decoder-input",),
    "no-reverse": ("copies-source",),
    "bad-init": ("initial-loss",),
    "label-leak": ("initial-loss",),
    "softmax": ("rows-sum-to-one",),
    "attention-maths": ("fused-agreement",),
    "no-positions": ("permutation",),
    "position-leak": ("permutation",),
}


def looks_trained(model: Seq2Seq, task: Task) -> tuple[bool, float]:
    """(trained?, mean top probability) on teacher-forced task data. A fresh model spreads its
    probability (~0.2-0.35); a trained one is confident (> 0.9), even a broken one, unless it
    cannot see its source (swapped cross-attention: ~0.2, and source-dependence says why)."""
    batch = probe_batch(task, 64)
    device = model.device
    with eval_mode(model), torch.no_grad():
        logits = model(batch.src.to(device), batch.decoder_input.to(device))  # (B, T, V)
    real = batch.labels.to(device) != model.cfg.pad_id  # (B, T)
    top = logits.softmax(-1).max(-1).values[real].mean()
    return bool(top > 0.5), float(top)


# ---------------------------------------------------------------------------------------------
# The doctor


def run_doctor(model: Seq2Seq, task: Task, quick: bool = False, trained: bool | None = None,
               callback: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run every check that applies, in docs/checks.md's order; callback(result) after each one
    (the overfit check takes seconds, so a UI can show rows as they come).

    quick skips the overfit check and uses fewer sequences. trained=None decides from the
    model's confidence (looks_trained) whether the trained-model checks apply."""
    checks: list[Callable[[], CheckResult]] = [
        lambda: check_initial_loss(model, task),
        lambda: check_future_leakage_values(model, task),
        lambda: check_future_leakage_gradients(model, task),
        (lambda: skipped("overfit-one-batch", "a fresh model (dropout 0) fits one batch of 8",
                       "< 0.01", "skipped in quick mode"))
        if quick else (lambda: check_overfit_one_batch(model, task)),
        lambda: check_attention_saturation(model),
        lambda: check_rows_sum_to_one(model, task),
        lambda: check_fused_agreement(model),
        lambda: check_permutation(model),
        lambda: check_source_dependence(model, task),
    ]
    why = ""
    if trained is None:
        trained, confidence = looks_trained(model, task)
        why = f"looks untrained (p={confidence:.2f})"  # p: mean top probability
    trained_checks = [
        ("accuracy", "held-out exact match", ">= 0.9",
         lambda: check_accuracy(model, task, 100 if quick else 300)),
        ("alignment", "the task's cross-attention alignment", f">= {ALIGNMENT_THRESHOLD}",
         lambda: check_alignment(model, task)),
        ("copies-decoder-input", "predictions are not copies of the decoder input", "< 0.5",
         lambda: check_copies_decoder_input(model, task)),
        ("copies-source", "outputs are not copies of the source", "< 0.5",
         lambda: check_copies_source(model, task)),
    ]
    for name, description, threshold, check in trained_checks:
        if trained:
            checks.append(check)
        else:
            checks.append(lambda n=name, d=description, t=threshold: skipped(
                n, d, t, why or "the model is not trained"))
    results = []
    for check in checks:
        results.append(check())
        if callback is not None:
            callback(results[-1])
    return results


def fresh_model(model_cfg: ModelConfig, train_cfg: TrainConfig) -> tuple[Seq2Seq, Task]:
    """An untrained model and task for `minitx doctor` without a checkpoint. A bug preset
    shapes the model here (it is being built, not diagnosed); presets that only change
    training (no-shift, no-reverse, no-warmup) leave no trace in an untrained model.
    Seeds the global RNG from train_cfg.seed, as Trainer does, so the model is the one that
    training with these configs would start from."""
    model_cfg, train_cfg = apply_bug(model_cfg, train_cfg)
    task = task_for_config(train_cfg, model_cfg.max_len)  # a data file: its held-out pairs
    torch.manual_seed(train_cfg.seed)
    return Seq2Seq(model_cfg.replace(**task.model_fields())), task


def diagnose(results: list[CheckResult]) -> list[str]:
    """The distinct likely causes of the failed checks, most specific measurement first,
    leaving out every cause whose own checks (OWN_CHECKS) ran and all passed."""
    order = {name: i for i, name in enumerate(PRIORITY)}
    failed = sorted((r for r in results if r.passed is False), key=lambda r: order.get(r.name, 99))
    outcome = {r.name: r.passed for r in results}
    key_of = {text: key for key, text in CAUSES.items()}

    def cleared(cause: str) -> bool:
        own = OWN_CHECKS.get(key_of.get(cause, ""), ())
        ran = [outcome[name] for name in own if outcome.get(name) is not None]
        return bool(ran) and all(ran)

    causes: list[str] = []
    for r in failed:
        if r.cause and r.cause not in causes and not cleared(r.cause):
            causes.append(r.cause)
    return causes


def format_number(value: float | None) -> str:
    """Numbers for a table: 0.0312, 3.27, 1.2e-08, or '-' when not measured."""
    if value is None:
        return "-"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e4):
        return f"{value:.2e}"
    return f"{value:.4g}" if not math.isnan(value) else "nan"
