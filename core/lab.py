"""The components lab: variants of one model, each with a part swapped, trained side by side on
the same task, data and seeds, and measured the same way.

A variant is a set of named options (the same names `minitx train` takes) applied to one base
recipe through configs_from_options(), so "rope" here is exactly `--position-encoding rope`
there. For each variant and seed the lab records the held-out exact match every `eval_every`
steps (the first step at or above the target), the final accuracy on the trained lengths, the
accuracy on longer sources than any seen in training, the parameter count and the training
speed (steps per second of training, evaluation excluded). Within a seed the variants take
training steps in turn, so a machine that slows down mid-lab slows every variant alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import torch

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.model.components import VARIANTS
from minitx.core.model.transformer import parameter_breakdown
from minitx.core.options import configs_from_options
from minitx.core.training.evaluation import evaluate
from minitx.core.training.events import RunListener
from minitx.core.training.trainer import Trainer

DEFAULT_VARIANTS = ("baseline", "rms", "learned", "rope", "swiglu", "gqa", "modern")


def variant_options(name: str) -> dict[str, object]:
    """The options of a variant name such as "rope" or "rope+swiglu"; ValueError if unknown."""
    options: dict[str, object] = {}
    for part in name.split("+"):
        if part not in VARIANTS:
            raise ValueError(f"unknown variant {part!r}; choose from {', '.join(VARIANTS)} "
                             "(join them with +, e.g. rope+swiglu)")
        options.update(VARIANTS[part])
    return options


@dataclass(frozen=True)
class LabPlan:
    """What every run of one lab shares."""

    model: ModelConfig  # the base recipe's model; each variant swaps parts of it
    train: TrainConfig  # the base recipe's training (seed and steps are set per run)
    steps: int
    eval_every: int = 50
    eval_size: int = 500
    target: float = 0.99
    beyond: tuple[int, int] = (11, 16)  # source lengths after training, none of them trained on

    def configs(self, variant: str, seed: int) -> tuple[ModelConfig, TrainConfig]:
        model_cfg, train_cfg = configs_from_options(self.model, self.train, variant_options(variant))
        if model_cfg.max_len < self.beyond[1] + 2:
            raise ValueError(f"beyond: sources of {self.beyond[1]} tokens need max_len >= "
                             f"{self.beyond[1] + 2}, the model has {model_cfg.max_len}")
        # the trainer's own held-out evaluations, every eval_every steps, feed each curve
        return model_cfg, train_cfg.replace(seed=seed, steps=self.steps, eval_every=self.eval_every,
                                            eval_size=self.eval_size, until=0.0)


@dataclass
class LabRun:
    variant: str
    seed: int
    params: int
    steps_to_target: int | None  # first evaluation at or above the target; None: not reached
    final_accuracy: float  # held-out exact match on the trained lengths after the last step
    beyond_accuracy: float  # the same on the `beyond` lengths
    beyond_by_length: dict[int, float]
    steps_per_s: float
    curve: list[tuple[int, float]] = field(default_factory=list)  # (step, held-out accuracy)


class _Run(RunListener):
    """One variant's run within a lab: its trainer, the evaluations it heard of, and its own state
    of torch's global RNG (dropout draws from it), so that variants stepping in turn each draw
    what they would draw alone."""

    def __init__(self, plan: LabPlan, variant: str, seed: int) -> None:
        self.plan, self.variant, self.seed = plan, variant, seed
        self.trainer = Trainer(*plan.configs(variant, seed))  # seeds the global RNG, builds
        self.rng = self._rng_state()
        self.curve: list[tuple[int, float]] = []
        self.reached: int | None = None

    def _rng_state(self) -> list[torch.Tensor]:
        states = [torch.get_rng_state()]
        if self.trainer.device.type == "cuda":
            states.append(torch.cuda.get_rng_state(self.trainer.device))
        return states

    def step_to(self, step: int) -> None:
        """The trainer's run up to `step` (one step, as the variants take turns)."""
        torch.set_rng_state(self.rng[0])
        if len(self.rng) > 1:
            torch.cuda.set_rng_state(self.rng[1], self.trainer.device)
        self.trainer.run(self, until_step=step)  # trainer.seconds counts the steps alone
        self.rng = self._rng_state()

    def on_evaluation(self, trainer: Trainer, result) -> None:
        self.curve.append((trainer.step_count, result.accuracy))
        if self.reached is None and result.accuracy >= self.plan.target:
            self.reached = trainer.step_count

    def result(self) -> LabRun:
        trainer = self.trainer
        lo, hi = self.plan.beyond
        beyond = evaluate(trainer.model, trainer.task, self.plan.eval_size, seed=trainer.heldout_seed,
                          min_len=lo, max_len=hi)
        return LabRun(self.variant, self.seed, parameter_breakdown(trainer.model)["total"],
                      self.reached, self.curve[-1][1], beyond.accuracy, beyond.by_length,
                      trainer.step_count / trainer.seconds, self.curve)


def run_lab(plan: LabPlan, variants: list[str], seeds: list[int],
            progress: Callable[[int, int], None] | None = None) -> Iterator[LabRun]:
    """Every variant for every seed. Within a seed the variants train step by step in turn,
    so a burst of load on a shared machine slows all of them alike and their steps/s compare;
    yields each seed's runs when its last step is done. progress(seed, step) after every
    evaluation period."""
    for variant in variants:
        plan.configs(variant, seeds[0])  # every bad name or option fails before any training
    for seed in seeds:
        runs = [_Run(plan, variant, seed) for variant in variants]
        for step in range(1, plan.steps + 1):
            for run in runs:
                run.step_to(step)
            if progress is not None and (step % plan.eval_every == 0 or step == plan.steps):
                progress(seed, step)
        yield from (run.result() for run in runs)


@dataclass
class LabRow:
    """One variant over its seeds: what the lab's table shows."""

    variant: str
    parts: str  # what this variant swapped, e.g. "position_encoding=rope"
    params: int
    steps_to_target: list[int | None]  # per seed
    final_accuracy: float  # mean over seeds
    beyond_accuracy: float
    steps_per_s: float  # median over seeds
    runs: list[LabRun]

    @property
    def beyond_by_length(self) -> dict[int, float]:
        """Source length -> accuracy on it, mean over seeds (a seed's 500 beyond sources fall
        about evenly on the lengths)."""
        lengths = sorted({n for run in self.runs for n in run.beyond_by_length})
        return {n: statistics.fmean(r.beyond_by_length[n] for r in self.runs if n in r.beyond_by_length)
                for n in lengths}

    def to_dict(self) -> dict:
        data = asdict(self)
        for run in data["runs"]:  # JSON object keys must be strings
            run["beyond_by_length"] = {str(k): v for k, v in run["beyond_by_length"].items()}
        return data


def summarise(plan: LabPlan, runs: list[LabRun]) -> list[LabRow]:
    """Runs grouped by variant, in the order the variants first ran."""
    rows = []
    for variant in dict.fromkeys(r.variant for r in runs):
        mine = [r for r in runs if r.variant == variant]
        swapped = variant_options(variant)
        parts = ", ".join(f"{k}={v}" for k, v in swapped.items()) or "the base recipe's model"
        rows.append(LabRow(variant, parts, mine[0].params, [r.steps_to_target for r in mine],
                           statistics.fmean(r.final_accuracy for r in mine),
                           statistics.fmean(r.beyond_accuracy for r in mine),
                           statistics.median(r.steps_per_s for r in mine), mine))
    return rows

