"""The best evaluation of a run and early stopping (`train --keep-best METRIC`, `--patience N`):
which evaluation was best by one metric, how many evaluations have gone by without a better one,
and where the best weights are kept (beside the run's file, as transformers' Trainer keeps its
best checkpoint with load_best_model_at_end). No torch: the CLI and the app read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from minitx.core.config import KEEP_BEST

BEST_SUFFIX = ".best"  # run.safetensors -> run.best.safetensors
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "loss": "held-out loss", "exact": "exact match"}


def best_path(out: str | Path) -> Path:
    """Where the best evaluation's weights of a run saved to `out` go: NAME.best.SUFFIX beside it."""
    out = Path(out)
    return out.with_name(out.stem + BEST_SUFFIX + out.suffix)


def watched_metric(keep_best: str, scored: bool) -> str:
    """What --patience watches: --keep-best's metric, else the held-out loss where the evaluations
    measure it (a fine-tune's, --eval-bleu's), else exact match."""
    return keep_best or ("loss" if scored else "exact")


def metric_value(metric: str, accuracy: float, scores: dict | None) -> float | None:
    """One evaluation's figure of `metric` (exact match from its accuracy, the others from its
    scores: scores_of's dict); None where it measured none."""
    if metric == "exact":
        return accuracy
    value = scores.get(metric) if scores else None  # scores_of's keys: loss, bleu, chrf
    return None if value is None else float(value)


def figure(metric: str, value: float) -> str:
    """'25.41' (BLEU, chrF), '1.032' (loss), '42.0%' (exact match)."""
    return f"{value:.1%}" if metric == "exact" else f"{value:.4g}" if metric == "loss" else f"{value:.2f}"


def shown(metric: str, value: float) -> str:
    """'BLEU 25.41', 'held-out loss 1.032', 'exact match 42.0%'."""
    return f"{METRIC_NAMES[metric]} {figure(metric, value)}"


@dataclass
class Best:
    """The best evaluation so far by `metric` and the evaluations since it (a tie is no better:
    the earlier one stays, as Trainer's early stopping counts a tie as no improvement)."""

    metric: str
    step: int | None = None
    value: float | None = None
    since: int = 0  # evaluations after the best one that did not beat it

    def offer(self, step: int, value: float) -> bool:
        """Record an evaluation; True when it is the new best."""
        higher = KEEP_BEST[self.metric]
        if self.value is None or (value > self.value if higher else value < self.value):
            self.step, self.value, self.since = step, value, 0
            return True
        self.since += 1
        return False

    def line(self) -> str:
        """'best BLEU 25.41 at step 400'."""
        return "no evaluation yet" if self.value is None else f"best {shown(self.metric, self.value)} " \
            f"at step {self.step}"

    def to_dict(self) -> dict:
        return {"metric": self.metric, "step": self.step, "value": self.value, "since": self.since}

    @classmethod
    def from_dict(cls, data, metric: str) -> Best:
        """A saved run's record (ValueError, one line, for one that is not such a record)."""
        if not isinstance(data, dict) or data.get("metric") != metric:
            raise ValueError(f"its best evaluation is not one of {metric}")
        step, value, since = data.get("step"), data.get("value"), data.get("since")
        if step is not None and (type(step) is not int or step < 0) \
                or value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))) \
                or type(since) is not int or since < 0:
            raise ValueError(f"its best evaluation record {data!r} is not a step, value and count")
        return cls(metric, step, None if value is None else float(value), since)
