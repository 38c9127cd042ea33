"""The doctor's precision check: would this model's activations overflow fp16?

The model runs teacher-forced in its own precision on its pairs (or, for a model that keeps
none, on sequences of its vocabularies) while core/interp/numerics.py records every sublayer's
largest |activation|; the first point in forward order above fp16's largest value (65504) is
named, with the figure and what to do. Measured before any fp16 run: transformers'
DebugUnderflowOverflow names the module only after the inf has happened.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.data.task import Task
from minitx.core.doctor.code_checks import CAUSES, WEIGHTS, CheckResult, input_batch
from minitx.core.interp.numerics import (
    ActivationRange,
    first_overflow,
    first_overflow_dict,
    recording_ranges,
)
from minitx.core.model.transformer import Seq2Seq, eval_mode
from minitx.core.number_formats import FP16_MAX

NAME = "fp16-range"
SEQUENCES = 32  # the pairs (or inputs) the check runs on
THRESHOLD = f"< {FP16_MAX:g}"
DESCRIPTION = ("every sublayer's largest |activation| on the model's pairs (teacher-forced, in its own "
               f"precision) stays below fp16's largest value, {FP16_MAX:g}")


@dataclass(frozen=True)
class PrecisionResult(CheckResult):
    """A CheckResult with what was measured: every point's range, in forward order."""

    ranges: tuple[ActivationRange, ...] = ()

    @property
    def first_overflow(self) -> dict | None:
        """{stack, layer, sublayer, max} of the first point above fp16's range, or None."""
        first = first_overflow(list(self.ranges))
        return None if first is None else first_overflow_dict(first)

    def to_dict(self) -> dict:
        data = super().to_dict()
        data.pop("ranges")
        return data


def place(r: ActivationRange) -> str:
    """'encoder layer 2 feed-forward'."""
    return f"{r.stack} layer {r.layer} {r.sublayer}"


def advice(r: ActivationRange) -> str:
    """What to do about an overflow at `r`."""
    part = ("the residual stream from there" if r.sublayer.startswith("residual")
            else f"that {r.sublayer} block")
    return f"run in bf16 (fp32's range, up to about 3.4e38), or keep {part} in fp32"


def check_fp16_range(model: Seq2Seq, task: Task, n: int = SEQUENCES) -> PrecisionResult:
    """The largest |activation| of every sublayer on n of the task's pairs (its inputs where it
    keeps none); fails when one exceeds fp16's range, naming the first in forward order."""
    batch = input_batch(task, n)
    device = model.device
    with eval_mode(model), torch.no_grad(), recording_ranges(model) as ranges:
        model(batch.src.to(device), batch.decoder_input.to(device))
    top = max(ranges, key=lambda r: r.max)
    first = first_overflow(ranges)
    on = f"on {len(batch)} {'pairs' if task.has_examples else 'inputs of its vocabularies'}"
    if first is None:
        return PrecisionResult(NAME, DESCRIPTION, top.max, THRESHOLD, True,
                               detail=f"largest at {place(top)}: fp16 headroom x{top.headroom():.3g} {on}",
                               kind=WEIGHTS, ranges=tuple(ranges))
    figure = (f"{place(first)} reaches {first.max:.4g}, above fp16's {FP16_MAX:g} "
              f"(x{first.max / FP16_MAX:.3g}) {on}: {advice(first)}")
    return PrecisionResult(NAME, DESCRIPTION, first.max, THRESHOLD, False, CAUSES["fp16-overflow"],
                           detail=f"first above fp16: {place(first)}", kind=WEIGHTS,
                           figure=figure, ranges=tuple(ranges))


def precision_summary(results: list[CheckResult]) -> dict:
    """What `doctor --json` says under "precision": the first overflow (None where none, or
    where the check did not run: `measured` says which) and every point's range in forward order."""
    found = next((r for r in results if isinstance(r, PrecisionResult)), None)
    if found is None:
        return {"measured": False, "first_overflow": None, "activations": []}
    return {"measured": True, "first_overflow": found.first_overflow,
            "activations": [r.to_dict() for r in found.ranges]}
