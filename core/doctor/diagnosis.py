"""The doctor: which checks run on a model, in what order, and what their failures mean.

Two kinds of evidence, kept apart: code checks (core/doctor/code_checks.py: does minitx's forward
pass with this config have the bug?) and weight checks (core/doctor/trained_checks.py,
counterfactuals.py, history_checks.py: were these weights trained under one?). A cause is named
when its evidence holds, of either kind: a passing code check says the code is fine now and
nothing about what the weights were trained under. A cause that only a less specific check
suggests is not named when its own checks ran and showed nothing. A model below its task's bar
always gets a verdict: the cause found, or what it learned and what to look at, in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.task import Task
from minitx.core.data.tasks import task_for_config
from minitx.core.doctor.code_checks import (
    CAUSES,
    CODE,
    NEEDS_EXAMPLES,
    WEIGHTS,
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
from minitx.core.doctor.counterfactuals import (
    NEAR_CHANCE,
    SOURCE_GAIN,
    VARIANTS,
    chance_loss,
    check_counterfactuals,
    check_source_use,
    percent,
)
from minitx.core.doctor.counterfactuals import THRESHOLD as COUNTERFACTUAL_THRESHOLD
from minitx.core.doctor.fine_tune_checks import FINE_TUNE_CHECKS, fine_tune_checks
from minitx.core.doctor.history_checks import (
    EARLY_JUMP,
    NEAR_ZERO_LOSS,
    STILL_FALLING_NATS,
    STUCK,
    RunRecord,
    check_answer_seen,
    check_still_falling,
    check_training_progress,
    check_warmup,
)
from minitx.core.doctor.precision import NAME as FP16_RANGE
from minitx.core.doctor.precision import THRESHOLD as FP16_THRESHOLD
from minitx.core.doctor.precision import check_fp16_range
from minitx.core.doctor.trained_checks import (
    ALIGNMENT_THRESHOLD,
    SATURATED_SHARE,
    TASK_BAR,
    check_accuracy,
    check_alignment,
    check_copies_decoder_input,
    check_copies_source,
    check_saturated_attention,
)
from minitx.core.model.transformer import Seq2Seq, eval_mode
from minitx.core.training.bug_presets import apply_bug

# When several checks fail, the most specific measurement names the cause first: the
# counterfactual runs (strongest first), then the code checks, then the symptoms.
COUNTERFACTUALS = tuple(v.check for v in VARIANTS)
PRIORITY = ("future-leakage-values", "future-leakage-gradients", "copies-decoder-input",
            "source-dependence", "fused-agreement", "attention-saturation", "saturated-attention",
            "permutation", "fp16-range", "copies-source", "warmup", "training-progress", "answer-seen",
            "source-use", "still-falling", "alignment", "rows-sum-to-one", "initial-loss",
            "overfit-one-batch", "fine-tune-loss", "fine-tune-bleu", "forgetting", "accuracy")

# The checks that measure a cause directly, code and weights: a failure names the cause. A
# cause that a less specific check only suggests (a stalled overfit suggests missing scaling)
# is named only when none of these ran: when they ran and passed, neither the code nor the
# weights show it. A passing code check never clears a weight check: the code being right now
# says nothing about what the weights were trained under.
DIRECT = {
    "no-scale": ("attention-saturation", "fused-agreement", "trained-unscaled"),
    "no-causal-mask": ("future-leakage-values", "future-leakage-gradients", "trained-without-mask"),
    "swap-cross": ("source-dependence", "trained-cross-on-decoder", "source-use"),
    "no-shift": ("trained-unshifted",),
    "no-reverse": ("trained-on-copies",),
    "bad-init": ("initial-loss",),
    "label-leak": ("initial-loss",),
    "softmax": ("rows-sum-to-one",),
    "attention-maths": ("fused-agreement",),
    "no-positions": ("permutation",),
    "position-leak": ("permutation",),
    "no-learning": ("overfit-one-batch", "training-progress"),
    "no-warmup": ("warmup",),
    "no-warmup-failing": ("warmup",),
    "diverged": ("training-progress",),
    "too-few-steps": ("still-falling",),
    "saw-answer": ("answer-seen",),
    "fp16-overflow": ("fp16-range",),
    "fine-tune-no-gain": ("fine-tune-loss",),
    "fine-tune-worse": ("fine-tune-bleu",),
    "forgetting": ("forgetting",),
}
# Symptoms of a bug on the trained weights, which other bugs can leave too (a model trained
# without the causal mask also tends to repeat its decoder input): they name the bug unless its
# counterfactual run (counterfactuals.py) ran and showed nothing, or was explained by another.
SYMPTOMS = {
    "no-scale": ("saturated-attention",),
    "no-shift": ("copies-decoder-input",),
    "no-reverse": ("copies-source",),
}
COUNTERFACTUAL_OF = {v.bug: v.check for v in VARIANTS}
# Causes that describe a state, not a reason: any bug can leave a model that has not learned its
# task or ignores its source. They are never named; the verdict describes the state, and with no
# cause found it lists what to look at, in order (Diagnosis.suspects). "saw-answer" is what two
# bugs look like from the training loss (and any model trained under a variant, or on other
# targets than its task's, can end with a loss near zero): left out when one of them is named.
STATES = ("undertrained", "unused-cross", "ignores-source")
EXPLAINED_BY = {
    # the weights trained under any variant fit their training run, not the correct code
    "saw-answer": ("no-shift", "no-causal-mask", "label-leak", "no-reverse", "no-scale", "swap-cross"),
    # a loss still falling on the wrong objective (or one that cannot reach the source) is no
    # reason to train longer
    "too-few-steps": ("no-shift", "no-causal-mask", "label-leak", "no-reverse", "swap-cross", "saw-answer"),
}
# A run without warmup that fails its task (with no jump of the loss to show for it): any other
# cause found explains the failure better.
EXPLAINED_BY["no-warmup-failing"] = tuple(k for k in CAUSES if k not in (*STATES, "no-warmup-failing"))


def looks_trained(model: Seq2Seq, task: Task) -> tuple[bool, float]:
    """(trained?, mean top probability) on teacher-forced task data. A fresh model spreads its
    probability (~0.2-0.35); a trained one is confident (> 0.9), even a broken one, unless it
    cannot see its source (swapped cross-attention: ~0.2). It explains a failure, never hides one."""
    batch = probe_batch(task, 64)
    device = model.device
    with eval_mode(model), torch.no_grad():
        logits = model(batch.src.to(device), batch.decoder_input.to(device))  # (B, T, V)
    real = batch.labels.to(device) != model.cfg.pad_id  # (B, T)
    top = logits.softmax(-1).max(-1).values[real].mean()
    return bool(top > 0.5), float(top)


# ---------------------------------------------------------------------------------------------
# Running the checks


def run_doctor(model: Seq2Seq, task: Task, quick: bool = False, trained: bool = True,
               record: RunRecord | None = None,
               callback: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Every check that applies, code checks then weight checks (docs/checks.md's order);
    callback(result) after each one (the overfit check takes seconds, so a UI can show rows as
    they come).

    quick skips the overfit check and uses fewer sequences for accuracy. trained=False (a fresh
    model built from options, not trained) skips the weight checks. `record` is what the file
    says about the run (its history or summary); without one the history checks say why they
    were skipped. A task without examples (an imported model that keeps no pairs) runs every
    check that needs only inputs; the ones that need known answers say so (NEEDS_EXAMPLES)."""
    record = record or RunRecord()
    results: list[CheckResult] = []

    def add(*found: CheckResult) -> None:
        for result in found:
            results.append(result)
            if callback is not None:
                callback(result)

    for check in (
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
    ):
        add(check())
    if trained:  # fp16's range needs inputs only: on the model's pairs, or its vocabularies'
        add(check_fp16_range(model, task))
    if not trained or not task.has_examples:
        why = "a fresh model: no trained weights to check" if not trained else NEEDS_EXAMPLES
        for name, threshold in WEIGHT_CHECKS[1:-len(HISTORY_CHECKS)] if trained else WEIGHT_CHECKS:
            add(skipped(name, "a check of trained weights", threshold, why, WEIGHTS))
        if trained:  # the run's own record needs no examples
            add(check_answer_seen(record, None), check_training_progress(record),
                check_still_falling(record, None), check_warmup(record, None))
        return results
    # a translation (a tokeniser's text) or a fine-tune is judged by its loss and BLEU, not a bar
    # of exact match (fine_tune_checks.py)
    bar = not record.fine_tune and task.vocab.level != "subword"
    accuracy = check_accuracy(model, task, 100 if quick else 300, bar=bar)
    add(accuracy)
    if record.fine_tune:
        add(*fine_tune_checks(model, task, record))
    add(*check_counterfactuals(model, task))
    for check in (
        lambda: check_source_use(model, task),
        lambda: check_saturated_attention(model, task),
        lambda: check_copies_decoder_input(model, task),
        lambda: check_copies_source(model, task),
        lambda: check_alignment(model, task),
        lambda: check_answer_seen(record, accuracy.value),
        lambda: check_training_progress(record),
        lambda: check_still_falling(record, accuracy.passed),
        lambda: check_warmup(record, accuracy.passed),
    ):
        add(check())
    return results


# The weight checks, in the order run_doctor runs them (names and thresholds, for skipped rows);
# the first needs inputs only, the last four read the run's history only.
HISTORY_CHECKS = ("answer-seen", "training-progress", "still-falling", "warmup")
WEIGHT_CHECKS = (
    (FP16_RANGE, FP16_THRESHOLD),
    ("accuracy", f">= {TASK_BAR}"),
    *((check, COUNTERFACTUAL_THRESHOLD) for check in COUNTERFACTUALS),
    ("source-use", f"> {SOURCE_GAIN:g}"),
    ("saturated-attention", f"< {SATURATED_SHARE:g}"),
    ("copies-decoder-input", "< 0.5"),
    ("copies-source", "< 0.5"),
    ("alignment", f">= {ALIGNMENT_THRESHOLD}"),
    ("answer-seen", f">= {NEAR_ZERO_LOSS:g}, or works"),
    ("training-progress", f"< {STUCK:g}"),
    ("still-falling", f"< {STILL_FALLING_NATS:g} nats"),
    ("warmup", f"< {EARLY_JUMP:g}, or warmup"),
)


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


# ---------------------------------------------------------------------------------------------
# What the failures mean


NO_PROBLEMS = "no problems found"  # only ever the verdict of a model with no failed check


@dataclass(frozen=True)
class Evidence:
    kind: str  # CODE or WEIGHTS
    check: str  # the check that measured it
    figure: str  # the numbers behind it


@dataclass(frozen=True)
class Cause:
    key: str  # a CAUSES key
    text: str  # its CAUSES text
    evidence: tuple[Evidence, ...]

    @property
    def kinds(self) -> list[str]:
        return sorted({e.kind for e in self.evidence}, key=(CODE, WEIGHTS).index)

    def to_dict(self) -> dict:
        return {"key": self.key, "cause": self.text, "kinds": self.kinds,
                "evidence": [asdict(e) for e in self.evidence]}


@dataclass(frozen=True)
class Diagnosis:
    causes: list[Cause]  # named on evidence, most specific first
    verdict: str  # a sentence or a few: never "no problems found" for a model that fails its task
    fails_task: bool | None  # below its task's bar (None: accuracy not measured)
    suspects: list[str] = field(default_factory=list)  # a failing model with no cause found: in order

    @property
    def likely(self) -> list[str]:
        """What the verdict's list shows: the causes found, else the suspects."""
        return self.texts or self.suspects

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.causes]

    def to_dict(self) -> dict:
        """causes: their texts, most specific first; evidence: each cause with what it rests on."""
        return {"verdict": self.verdict, "fails_task": self.fails_task, "causes": self.texts,
                "evidence": [c.to_dict() for c in self.causes], "suspects": self.suspects}


def _figure(r: CheckResult) -> str:
    """The numbers behind a failure: its own words when the check gives them, else the measured
    value against its threshold, and the check's note."""
    if r.figure:
        return r.figure
    return f"{format_number(r.value)} (threshold {r.threshold})" + (f"; {r.detail}" if r.detail else "")


def _ranked_failures(results: list[CheckResult]) -> list[CheckResult]:
    """Failed checks, most specific first: counterfactuals by how much better the weights did
    under them, then PRIORITY's order."""
    failed = [r for r in results if r.passed is False]
    counterfactual = sorted((r for r in failed if r.name in COUNTERFACTUALS), key=lambda r: -(r.value or 0.0))
    order = {name: i for i, name in enumerate(PRIORITY)}
    rest = sorted((r for r in failed if r.name not in COUNTERFACTUALS), key=lambda r: order.get(r.name, 99))
    return counterfactual + rest


def _named_causes(results: list[CheckResult]) -> list[Cause]:
    key_of = {text: key for key, text in CAUSES.items()}
    outcome = {r.name: r.passed for r in results}
    evidence: dict[str, list[Evidence]] = {}
    for r in _ranked_failures(results):
        key = key_of.get(r.cause, "")
        if not key:
            continue
        direct = DIRECT.get(key)
        if key in SYMPTOMS and r.name in SYMPTOMS[key]:
            if outcome.get(COUNTERFACTUAL_OF[key]) is True:
                continue  # the weights did no better under the bug's own variant
        elif direct is not None and r.name not in direct and any(outcome.get(n) is not None for n in direct):
            continue  # only suggested here, and its own checks ran: they would have named it
        evidence.setdefault(key, []).append(Evidence(r.kind, r.name, _figure(r)))
    named = [k for k in evidence
             if k not in STATES and not any(b in evidence for b in EXPLAINED_BY.get(k, ()))]
    return [Cause(k, CAUSES[k], tuple(evidence[k])) for k in named]


def diagnose(results: list[CheckResult], steps: int | None = None, loss: float | None = None,
             confidence: float | None = None, task: Task | None = None) -> Diagnosis:
    """The causes the failed checks name, and the verdict. `steps`, `loss` (the run's final
    training loss) and `confidence` (looks_trained's mean top probability) only colour the
    verdict; `task` gives what guessing costs (ln of its token count)."""
    causes = _named_causes(results)
    by_name = {r.name: r for r in results}
    accuracy = by_name.get("accuracy")
    failed = any(r.passed is False for r in results)
    tuned = [by_name[n] for n in FINE_TUNE_CHECKS if n in by_name and by_name[n].passed is not None]
    if tuned:  # a fine-tune: judged against its base
        short = [r for r in tuned if r.passed is False]
        figures = "; ".join(r.detail for r in tuned)
        if short:
            return Diagnosis(causes, f"falls short of its base: {figures}", True)
        others = ", but some checks failed" if failed else ""
        return Diagnosis(causes, f"improves on its base: {figures}{others}", False)
    if accuracy is None or accuracy.passed is None:
        return Diagnosis(causes, "some checks failed" if failed else NO_PROBLEMS, None)
    if accuracy.passed:
        if failed:
            return Diagnosis(causes, f"passes its task (exact match {percent(accuracy.value)}), but some "
                             "checks failed", False)
        return Diagnosis(causes, NO_PROBLEMS, False)
    parts = [f"fails its task: exact match {percent(accuracy.value)} (its bar is {percent(TASK_BAR)})"]
    source = by_name.get("source-use")
    learned_nothing = source is not None and source.passed is False
    trained = f"training loss {loss:.3g}" if loss is not None else ""
    if trained and steps:
        trained += f" after {steps} steps"
    if learned_nothing:
        chance_words = ""
        if task is not None and loss is not None:
            tokens, chance = chance_loss(task)
            if loss > chance + NEAR_CHANCE:
                chance_words = f", worse than guessing (ln {tokens} = {chance:.2f})"
            elif loss >= chance - 2 * NEAR_CHANCE:
                chance_words = f", about what guessing gives (ln {tokens} = {chance:.2f})"
        if trained and not chance_words and task is not None:  # a low loss, yet the source unused
            what = f"{trained}, yet its output does not depend on the source"
        else:
            what = "it learned nothing from its source" + (f": {trained}" if trained else "") + chance_words
            what += "; its output does not depend on the source"
        what += f" ({source.figure.split(' (')[0]})"
        if confidence is not None and confidence <= 0.5:
            what += f"; its predictions are unsure (mean top probability {confidence:.2f})"
        parts.append(what)
    elif trained:
        parts.append(trained)
    suspects: list[str] = []
    if not causes:  # what to look at, in order: no check singled one out
        keys = ("too-few-steps", "no-learning")
        if learned_nothing:  # worse than guessing: not even the output's frequencies learned yet
            above = task is not None and loss is not None and loss > chance_loss(task)[1] + NEAR_CHANCE
            keys = ("too-few-steps", "no-learning", "swap-cross") if above else ("swap-cross", *keys)
        suspects = [CAUSES[k] for k in keys]
        parts.append("no check singles out one cause")
    return Diagnosis(causes, "; ".join(parts), True, suspects)


def diagnose_model(results: list[CheckResult], model: Seq2Seq, task: Task,
                   record: RunRecord | None = None) -> Diagnosis:
    """diagnose() with the verdict's colour measured: the run's steps and final loss from
    `record`, and the model's confidence."""
    record = record or RunRecord()
    confidence = looks_trained(model, task)[1] if any(r.name == "accuracy" and r.passed is False
                                                      for r in results) else None
    return diagnose(results, record.total_steps, record.last_loss(), confidence, task)


def format_number(value: float | None) -> str:
    """Numbers for a table: 0.0312, 3.27, 1.2e-08, or '-' when not measured."""
    if value is None:
        return "-"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e4):
        return f"{value:.2e}"
    return f"{value:.4g}" if not math.isnan(value) else "nan"
