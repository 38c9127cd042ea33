"""Forgetting, measured: how far a fine-tune has moved a model from its base on pairs it should
still handle (a general-domain sample), teacher-forced, the measurements a run takes at each
evaluation.

- the general-domain loss: mean cross-entropy per target token (end token included, padding
  not), the figure `minitx eval` gives (evaluation.target_loss), summed over every batch and
  divided by their target tokens;
- the mean KL divergence of the model's next-token distributions from the base's,
  KL(P_model || P_base) = sum_v P_model(v) (log P_model(v) - log P_base(v)), at every target
  position that is not padding, both models fed the same source and the same target prefix.
  0: the model predicts exactly what its base did; it grows as the fine-tune moves the
  distributions, whether or not the reference tokens' probabilities change.

What the KL can and cannot tell: it measures change, not damage. On general pairs a rising KL
with a flat general loss is a model that redistributes probability among tokens the reference
does not use (its outputs may change while the loss does not); a rising loss is forgetting
proper. On the probes (the run's own test sentences, which have no references) only the KL can
be measured, and a large KL there is what a successful fine-tune is meant to cause: it tells
that the model changed on those sentences, never whether for better. Two models must read the
same tokens (a fine-tune and its base do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass

import torch

from minitx.core.config import TrainConfig
from minitx.core.data.batch import Batch
from minitx.core.model.loss import LOSS_LOGITS, summed_cross_entropy
from minitx.core.model.transformer import Seq2Seq, eval_mode
from minitx.core.training.evaluation import real_stream, target_loss

FORGET_ALARM = TrainConfig.forget_alarm  # the default: the general loss more than 20% above the base's
FORGET_ALARM_LIMITS = (0.0, 10.0)  # 0% to 1000%: a rise the alarm may be set to


def general_loss(model: Seq2Seq, batches: Iterable[Batch]) -> tuple[float, int]:
    """(loss per target token, target tokens) over every batch, teacher-forced, no dropout."""
    total, tokens = 0.0, 0
    for batch in batches:
        summed, count = target_loss(model, batch)
        total, tokens = total + summed, tokens + count
    if not tokens:
        raise ValueError("no target tokens to measure the loss on")
    return total / tokens, tokens


def base_log_probs(base: Seq2Seq, batches: Iterable[Batch]) -> list[torch.Tensor]:
    """The base's next-token log-probabilities on each batch, teacher-forced, at its target
    positions that are not padding, each (N, V) float32: what the KL to the base compares with,
    measured once (then the base itself need not be kept beside the model being trained)."""
    with eval_mode(base), torch.inference_mode():
        out = []
        for batch in batches:
            stream = real_stream(base, batch)  # (N, d)
            out.append(torch.cat([base.stream_logits(stream[i: i + n]).float().log_softmax(-1)
                                  for i, n in _chunks(base, len(stream))]))  # (N, V)
        return out


def _chunks(model: Seq2Seq, positions: int) -> Iterator[tuple[int, int]]:
    """(start, count) of the positions whose logits are made at once: LOSS_LOGITS floats."""
    rows = max(1, LOSS_LOGITS // model.cfg.vocab_size)
    for start in range(0, positions, rows):
        yield start, min(rows, positions - start)


# What the base is run under: nothing for a base of its own; a LoRA fine-tune's model with its
# adapters off when the base is the model itself (core/model/lora.py's adapters_off)
BaseView = Callable[[], AbstractContextManager]


def _summed_loss_and_kl(model: Seq2Seq, base: Seq2Seq | list[torch.Tensor], batches: Iterable[Batch],
                        base_view: BaseView = nullcontext) -> tuple[float, float, int]:
    """(summed cross-entropy, summed KL(P_model || P_base), non-padding target positions) over
    every batch, both models teacher-forced on the same ids: each batch's logits serve both.
    `base`: the base model, or its base_log_probs on these batches."""
    vocab = base.cfg.vocab_size if isinstance(base, Seq2Seq) else base[0].shape[-1]
    if model.cfg.vocab_size != vocab:
        raise ValueError(f"the model writes {model.cfg.vocab_size} tokens and its base "
                         f"{vocab}: the KL needs one vocabulary")
    loss, kl, tokens = 0.0, 0.0, 0
    with eval_mode(model), torch.inference_mode():
        for i, batch in enumerate(batches):
            labels = batch.labels.to(model.device)
            labels = labels[labels != model.cfg.pad_id]  # (N,): the target positions that count
            stream = real_stream(model, batch)  # (N, d)
            if isinstance(base, Seq2Seq):
                with eval_mode(base), base_view():
                    base_stream = real_stream(base, batch).to(model.device)  # (N, d)
            for start, n in _chunks(model, len(labels)):
                logits = model.stream_logits(stream[start: start + n])  # (n, V)
                mine = logits.float().log_softmax(-1)
                if isinstance(base, Seq2Seq):
                    with eval_mode(base), base_view():
                        theirs = base.stream_logits(base_stream[start: start + n].to(base.device))
                    theirs = theirs.float().log_softmax(-1).to(model.device)
                else:
                    theirs = base[i][start: start + n].to(model.device)  # (n, V)
                loss += float(summed_cross_entropy(logits, labels[start: start + n], model.cfg.pad_id))
                kl += float((mine.exp() * (mine - theirs)).sum())
            tokens += len(labels)
    return loss, kl, tokens


def kl_to_base(model: Seq2Seq, base: Seq2Seq | list[torch.Tensor], batches: Iterable[Batch],
               base_view: BaseView = nullcontext) -> float:
    """Mean KL(P_model || P_base) of the next-token distributions over every non-padding target
    position of the batches, both models teacher-forced on the same ids (nats); `base` the base
    model or its base_log_probs on these batches."""
    _, kl, positions = _summed_loss_and_kl(model, base, batches, base_view)
    if not positions:
        raise ValueError("no target positions to measure the KL on")
    return kl / positions


def general_loss_and_kl(model: Seq2Seq, base: Seq2Seq, batches: Iterable[Batch],
                        base_view: BaseView = nullcontext) -> tuple[float, float]:
    """(general_loss, kl_to_base) of the same batches in one pass: each batch's model logits serve
    both (what a watched evaluation measures; a third fewer forward passes than the two apart)."""
    loss, kl, tokens = _summed_loss_and_kl(model, base, batches, base_view)
    if not tokens:
        raise ValueError("no target tokens to measure the loss on")
    return loss / tokens, kl / tokens


def check_forget_alarm(rise: float) -> float:
    """The alarm's rise as a fraction (0.2 = 20%); ValueError outside 0% to 1000%."""
    low, high = FORGET_ALARM_LIMITS
    if not low <= rise <= high:  # NaN fails both
        raise ValueError(f"the forgetting alarm must be a rise of {low:.0%} to {high:.0%}, not {rise:.0%}")
    return rise


@dataclass
class Forgetting:
    """A run's forgetting record: the base's general loss, then each evaluation's general loss
    and KL to the base; the alarm goes off at the first evaluation whose general loss is more
    than `alarm_rise` above the base's, and stays on (what `train --json` reports)."""

    general_loss_base: float
    alarm_rise: float = FORGET_ALARM
    general_loss_end: float | None = None
    kl_to_base_end: float | None = None
    alarm: bool = False
    alarm_step: int | None = None

    def record(self, step: int, loss: float, kl: float | None) -> bool:
        """One evaluation's figures; True when the alarm goes off at this one."""
        self.general_loss_end, self.kl_to_base_end = loss, kl
        if self.alarm or loss <= self.general_loss_base * (1 + self.alarm_rise):
            return False
        self.alarm, self.alarm_step = True, step
        return True

    def line(self) -> str:
        """'forgetting: general-domain loss 1.92 -> 2.61 (+36%) at step 400', the CLI's alarm."""
        rise = loss_rise(self.general_loss_base, self.general_loss_end)
        return (f"forgetting: general-domain loss {self.general_loss_base:.3g} -> "
                f"{self.general_loss_end:.3g} ({rise:+.0%}) at step {self.alarm_step}")

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("alarm_rise")
        return data


def loss_rise(base: float, end: float) -> float:
    """How much the general-domain loss rose over the base's (0.36: +36%); inf from a zero base."""
    return end / base - 1 if base else float("inf")
