"""Weight checks from the run's own record: how the training loss and learning rate went.

Only what a file may carry is read: the history's loss and learning-rate series, else the
training summary's final loss and step count. A model from other code has neither; each check
then says it was skipped and why. No check reads a bug preset or a training setting.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from minitx.core.doctor.code_checks import WEIGHTS, CheckResult, check_result, skipped

NEAR_ZERO_LOSS = 0.05  # a training loss this low with generation failing: the answer was visible
FAILING_ACCURACY = 0.5
STUCK = 0.9  # a final loss above this share of the first: nothing was learned
DIVERGED = 2.0  # the final loss above this many times its lowest (and 0.3 nats above): diverged
STILL_FALLING, STILL_FALLING_NATS = 0.05, 0.05  # the last quarter's fall that means "still learning"
WARMUP_LR = 0.5  # a learning rate at step 1 of at least this share of the peak: no warmup
EARLY_JUMP = 0.2  # nats above the first loss within the first tenth of the run: an early jump


@dataclass(frozen=True)
class RunRecord:
    """What the file says about the run that trained the weights; every part may be missing."""

    steps: list[int] = field(default_factory=list)  # the history's recorded steps
    losses: list[float] = field(default_factory=list)  # training loss at those steps
    lrs: list[float] = field(default_factory=list)  # learning rate at those steps
    final_loss: float | None = None  # the summary's, when there is no history
    total_steps: int | None = None
    base_scores: dict | None = None  # a fine-tune's base on its held-out pairs, when the run began
    scores: dict | None = None  # ... and the fine-tune at its last evaluation
    general_loss: list[float] = field(default_factory=list)  # a watched fine-tune's, from the base's

    @property
    def fine_tune(self) -> bool:
        """The run trained weights that were trained already (its record holds its base's scores)."""
        return self.base_scores is not None

    @classmethod
    def of(cls, history=None, summary: dict | None = None) -> RunRecord:
        """From a core.history.History (or None) and a training summary (or None)."""
        summary = summary or {}
        steps, losses, lrs = [], [], []
        if history is not None:
            steps, losses = history.series("loss")
            lr_steps, lrs = history.series("lr")
            if lr_steps != steps:
                lrs = []
        loss, total = summary.get("loss"), summary.get("steps")
        final = float(loss) if _number(loss) and math.isfinite(loss) else None
        if not (_number(total) and float(total).is_integer()):
            total = steps[-1] if steps else None
        watched = history.watched if history is not None else None
        base, scores = summary.get("base_scores"), summary.get("scores")
        return cls(list(steps), list(losses), list(lrs), final, None if total is None else int(total),
                   base if isinstance(base, dict) else None, scores if isinstance(scores, dict) else None,
                   list(watched.general_loss) if watched is not None else [])

    @property
    def has_curve(self) -> bool:
        return len(self.losses) >= 10

    def window(self) -> int:
        return max(5, len(self.losses) // 20)

    def smoothed(self) -> list[float]:
        """Running medians of the loss (one source length per batch makes single steps jumpy)."""
        w = self.window()
        return [statistics.median(self.losses[max(0, i - w + 1): i + 1]) for i in range(len(self.losses))]

    def last_loss(self) -> float | None:
        """The loss the run ended at: the median of its last points, else the summary's."""
        if self.losses:
            return statistics.median(self.losses[-self.window():])
        return self.final_loss


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


NO_HISTORY = "no training history in the file"


def check_answer_seen(record: RunRecord, accuracy: float | None) -> CheckResult:
    """A training loss near zero while greedy decoding fails: during training the decoder could
    see the token it had to predict (which generation cannot)."""
    name = "answer-seen"
    description = (f"a training loss below {NEAR_ZERO_LOSS:g} comes with a model that generates: greedy "
                   f"exact match at least {FAILING_ACCURACY:g}")
    threshold = f">= {NEAR_ZERO_LOSS:g}, or works"
    loss = record.last_loss()
    if loss is None:
        return skipped(name, description, threshold, "no training history or summary in the file", WEIGHTS)
    if accuracy is None:
        return skipped(name, description, threshold, "accuracy was not measured", WEIGHTS)
    seen = loss < NEAR_ZERO_LOSS and accuracy < FAILING_ACCURACY
    steps = f" after {record.total_steps} steps" if record.total_steps else ""
    return check_result(name, description, loss, threshold, not seen, "saw-answer",
                        f"training loss {loss:.3g}{steps}, greedy exact match {accuracy:.0%}", WEIGHTS)


def check_training_progress(record: RunRecord) -> CheckResult:
    """The loss curve: did it fall from where it started, and did it stay down (not diverge)."""
    name = "training-progress"
    description = (f"the training loss (its running median) fell below {STUCK:g} x its first value and did "
                   f"not rise back above {DIVERGED:g} x its lowest")
    threshold = f"< {STUCK:g}"
    if not record.has_curve:
        return skipped(name, description, threshold, NO_HISTORY, WEIGHTS)
    smooth = record.smoothed()
    first, last, lowest = record.losses[0], smooth[-1], min(smooth)
    detail = (f"{first:.3g} at step {record.steps[0]}, {last:.3g} at step {record.steps[-1]} "
              f"(lowest {lowest:.3g})")
    if not all(math.isfinite(x) for x in record.losses) or (last > DIVERGED * lowest and last - lowest > 0.3):
        return check_result(name, description, last / first, threshold, False, "diverged", detail, WEIGHTS)
    if record.fine_tune:  # from trained weights a small fall is the usual one: fine-tune-loss judges it
        detail += "; a fine-tune: its held-out loss against its base's is the measure"
    return check_result(name, description, last / first, threshold,
                        last < STUCK * first or record.fine_tune, "no-learning", detail, WEIGHTS)


def check_still_falling(record: RunRecord, task_passed: bool | None) -> CheckResult:
    """For a model that fails its task: had the loss levelled off when training stopped? One still
    falling over the last quarter of the run was stopped too soon."""
    name = "still-falling"
    description = (f"for a model that fails its task, the training loss (its running median) fell by "
                   f"less than {STILL_FALLING_NATS:g} nats (or {STILL_FALLING:.0%} of itself, if more) over "
                   "the last quarter of the run")
    threshold = f"< {STILL_FALLING_NATS:g} nats"
    if not record.has_curve:
        return skipped(name, description, threshold, NO_HISTORY, WEIGHTS)
    smooth = record.smoothed()
    quarter, last = smooth[-len(smooth) // 4], smooth[-1]
    fall = quarter - last
    applied = max(STILL_FALLING * quarter, STILL_FALLING_NATS)
    threshold = f"< {applied:.3g} nats"  # the bar this curve is held to, as printed
    falling = fall >= applied
    detail = f"{quarter:.3g} -> {last:.3g} over the last quarter"
    if task_passed:
        detail += "; the model passes its task"
    return check_result(name, description, fall, threshold, not (falling and task_passed is False),
                        "too-few-steps", detail, WEIGHTS)


def check_warmup(record: RunRecord, task_passed: bool | None) -> CheckResult:
    """Without warmup the learning rate is at its peak from step 1; the classic symptom is a
    loss that jumps above where it started in the first steps. A run without warmup that fails
    its task without that jump fails too, with a weaker cause (another bug found explains the
    failure better). A run without warmup that works passes: a warmup is a cure, not a rule."""
    name = "warmup"
    description = (f"with the learning rate at its peak from step 1, the loss did not jump {EARLY_JUMP:g} "
                   "nats above its first value in the first tenth of the run, and the model works")
    threshold = f"< {EARLY_JUMP:g}, or warmup"
    if not record.has_curve or len(record.lrs) != len(record.losses):
        return skipped(name, description, threshold, NO_HISTORY, WEIGHTS)
    if record.fine_tune:
        return skipped(name, description, threshold, "a fine-tune starts from trained weights: a flat "
                       "learning rate from step 1 is how fine-tunes are run", WEIGHTS)
    early = max(10, record.steps[-1] // 10)
    first = record.losses[0]
    jumps = [(loss - first, step) for step, loss in zip(record.steps[1:], record.losses[1:]) if step <= early]
    jump, at = max(jumps, default=(0.0, record.steps[0]))
    jump = max(jump, 0.0)
    peak, start = max(record.lrs), record.lrs[0]
    if peak <= 0 or start < WARMUP_LR * peak:
        return check_result(name, description, jump, threshold, True, "",
                            f"a warmup: lr {start:.2g} at step {record.steps[0]}, peak {peak:.2g}", WEIGHTS)
    detail = f"no warmup: lr {start:.2g} at step {record.steps[0]} (peak {peak:.2g}); "
    if jump >= EARLY_JUMP:
        detail += f"the loss rose from {first:.3g} to {first + jump:.3g} by step {at}"
        return check_result(name, description, jump, threshold, False, "no-warmup", detail, WEIGHTS)
    detail += f"the loss never rose {EARLY_JUMP:g} above its start ({first:.3g}) by step {early}"
    return check_result(name, description, jump, threshold, task_passed is not False, "no-warmup-failing",
                        detail, WEIGHTS)
