"""What a run and an evaluation report, as plain records: a training step's numbers, an
evaluation's result and its failures. No torch: the command line's and the app's listeners
(core/training/events.py) and the app's messages use them before torch has loaded."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a plain record too (sacrebleu's figures); imported only where it is computed
    from minitx.core.training.text_scores import TextScores


@dataclass(frozen=True)
class StepStats:
    step: int
    loss: float
    grad_norm: float
    lr: float
    examples_per_s: float
    seconds: float  # wall-clock training time so far (evaluation excluded)
    accuracy: float | None = None  # held-out exact match, on evaluation steps only
    eval_n: int | None = None  # examples that evaluation measured
    eval_complete: bool = True  # False: it stopped early, once --until was out of reach

    def to_dict(self) -> dict:
        """The step's own numbers (an evaluation is reported on its own)."""
        return {k: getattr(self, k) for k in ("step", "loss", "grad_norm", "lr", "examples_per_s", "seconds")}


@dataclass(frozen=True)
class Failure:
    source: list[int]
    expected: list[int]  # the task's output, then EOS
    output: list[int]  # what the model produced (up to and including EOS, if it emitted one)
    first_wrong: int  # 0-based step of the first wrong token
    line: int | None = None  # the data file's line, when the pair came from one

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class EvalResult:
    accuracy: float
    n: int
    by_length: dict[int, float] = field(default_factory=dict)  # source length -> accuracy
    count_by_length: dict[int, int] = field(default_factory=dict)  # source length -> examples
    failures: list[Failure] = field(default_factory=list)  # the first ones, in order
    unknown: int = 0  # source and target tokens read as <unk>
    wrong: int = 0  # examples whose output is not exactly right
    complete: bool = True  # False: scoring stopped early (max_wrong), so `n` is fewer than asked
    # Asked for with score(loss=True): cross-entropy per target token (end token included, padding
    # not), summed over every pair and divided by `target_tokens`: transformers' `labels` loss of
    # the whole set at once.
    loss: float | None = None
    target_tokens: int = 0
    text: TextScores | None = None  # score(text=True): corpus BLEU and chrF of the outputs
