"""The events of a training run: what Trainer.run tells whoever watches it, in the manner of
minGPT's trainer callbacks, named. A listener is told of each step, each evaluation, each probe
snapshot and each save, and asked before every step whether to stop (where an app pauses, too).

It imports nothing heavy, so the command line and the app can define listeners before torch
has loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from minitx.core.training.results import EvalResult, StepStats

if TYPE_CHECKING:  # the class that calls these hooks, named in their signatures only
    from minitx.core.training.trainer import Trainer


class RunListener:
    """What a run tells whoever watches it. Every hook is optional (these defaults do nothing);
    they run on the training thread, between steps, with the trainer in a consistent state."""

    def on_step(self, trainer: Trainer, stats: StepStats) -> None:
        """After every optimiser step (and its evaluation and snapshot, when it had them)."""

    def on_evaluating(self, trainer: Trainer, what: str) -> None:
        """Before each held-out evaluation (the base's first, for a fine-tune): `what` it
        measures, e.g. 'the base on 200 held-out pairs'. A fine-tune's greedy decoding can take
        a while: a listener says so, not leaving a silent wait."""

    def on_evaluation(self, trainer: Trainer, result: EvalResult) -> None:
        """After each of the run's held-out evaluations (result.complete: it measured them all)."""

    def on_base_evaluation(self, trainer: Trainer, result: EvalResult) -> None:
        """After a fine-tune's evaluation of its base, before the first step (step 0: where its
        scores start; the history has them)."""

    def on_snapshot(self, trainer: Trainer, step: int) -> None:
        """After each probe snapshot (the history holds it)."""

    def on_save(self, trainer: Trainer, path: Path, resumable: bool) -> None:
        """After the trainer wrote a checkpoint."""

    def stop_requested(self, trainer: Trainer) -> bool:
        """Asked before every step: True ends the run there. A listener may wait here (a paused
        app); the time it waits is not the run's."""
        return False
