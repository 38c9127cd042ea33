"""Weight checks of a fine-tune, against its base: what a fine-tune is for.

A fine-tune starts from trained weights, so the checks of a model trained from scratch judge it
wrongly: a flat learning rate from step 1 is the usual fine-tuning schedule (no warmup to blame),
and a translation is not judged by exact match (a 90% bar almost no translation fine-tune
meets). What it is judged by instead:

- held-out loss: the loss per target token on its held-out pairs now (measured here), against
  its base's on the same pairs, recorded when the run began (the summary's base scores);
- BLEU: its last evaluation's corpus BLEU against the base's (both recorded by the run);
- forgetting: the loss on the run's general pairs (`--general`) at its end against the base's,
  when the run watched them (the history's watched series).

Numerics (activations within fp16's range) is the fp16-range check every model gets. A model is
known as a fine-tune by its run's record (the base's scores in its summary), never by a setting.
"""

from __future__ import annotations

from minitx.core.doctor.code_checks import WEIGHTS, CheckResult, check_result, skipped
from minitx.core.doctor.history_checks import RunRecord
from minitx.core.model.transformer import Seq2Seq
from minitx.core.training.evaluation import target_loss
from minitx.core.training.forgetting import FORGET_ALARM, loss_rise

BLEU_DROP = 1.0  # BLEU points below the base's that count as a fine-tune made worse
FINE_TUNE_CHECKS = ("fine-tune-loss", "fine-tune-bleu", "forgetting")


def check_fine_tune_loss(model: Seq2Seq, task, record: RunRecord) -> CheckResult:
    """The held-out loss now against the base's on the same pairs (the first n it measured)."""
    name = "fine-tune-loss"
    description = "the held-out loss per target token is below its base's on the same pairs"
    base = record.base_scores or {}
    if base.get("loss") is None:
        return skipped(name, description, "< base", "the file records no base loss", WEIGHTS)
    summed = tokens = 0.0
    for batch in task.evaluation_batches(int(base.get("n") or 500), 0, 64):
        s, t = target_loss(model, batch)
        summed, tokens = summed + s, tokens + t
    if not tokens:
        return skipped(name, description, "< base", "no held-out pairs to measure on", WEIGHTS)
    now, before = summed / tokens, float(base["loss"])
    threshold = f"< {before:.4g} (base)"
    pairs = int(base.get("n") or 0)
    return check_result(name, description, now, threshold, now < before, "fine-tune-no-gain",
                        f"held-out loss {before:.4g} -> {now:.4g} (base -> now, {pairs} pairs)", WEIGHTS)


def check_fine_tune_bleu(record: RunRecord) -> CheckResult:
    """The last evaluation's BLEU against the base's (recorded by the run)."""
    name = "fine-tune-bleu"
    description = f"the held-out BLEU is no more than {BLEU_DROP:g} below its base's"
    base, now = (record.base_scores or {}).get("bleu"), (record.scores or {}).get("bleu")
    if base is None or now is None:
        return skipped(name, description, f">= base - {BLEU_DROP:g}", "the file records no BLEU of both",
                       WEIGHTS)
    threshold = f">= {base - BLEU_DROP:.3g} (base - {BLEU_DROP:g})"
    return check_result(name, description, now, threshold, now >= base - BLEU_DROP, "fine-tune-worse",
                        f"BLEU {base:.3g} -> {now:.3g} (base -> the run's last evaluation)", WEIGHTS)


def check_forgetting(record: RunRecord) -> CheckResult:
    """The general pairs' loss at the end against the base's (a run that watched them)."""
    name = "forgetting"
    description = f"the loss on the general pairs rose no more than {FORGET_ALARM:.0%} over the base's"
    threshold = f"< +{FORGET_ALARM:.0%}"
    general = record.general_loss
    if len(general) < 2:
        return skipped(name, description, threshold, "the run watched no --general pairs", WEIGHTS)
    rise = loss_rise(general[0], general[-1])
    return check_result(name, description, rise, threshold, rise < FORGET_ALARM, "forgetting",
                        f"general loss {general[0]:.4g} -> {general[-1]:.4g} ({rise:+.0%})", WEIGHTS)


def fine_tune_checks(model: Seq2Seq, task, record: RunRecord) -> list[CheckResult]:
    return [check_fine_tune_loss(model, task, record), check_fine_tune_bleu(record), check_forgetting(record)]
