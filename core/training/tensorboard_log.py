"""A run's numbers as TensorBoard event files (`train --tensorboard DIR`): a RunListener that writes
through torch.utils.tensorboard's SummaryWriter, under transformers' Trainer's tag names where it
has one (train/loss, train/learning_rate, train/grad_norm, eval/loss, eval/bleu, eval/chrf), so a
minitx run and a Trainer run draw side by side in one TensorBoard. Beside them: held-out exact
match, a fine-tune's forgetting (eval/general_loss, eval/kl_to_base) and its probes' outputs (text).

tensorboard is an optional extra (`pip install 'minitx[tensorboard]'`), imported when a log opens.
"""

from __future__ import annotations

from pathlib import Path

from minitx.core.training.events import RunListener
from minitx.core.training.results import EvalResult, StepStats

INSTALL = "pip install 'minitx[tensorboard]'"
STEP_TAGS = {"loss": "train/loss", "lr": "train/learning_rate", "grad_norm": "train/grad_norm"}
EVAL_TAGS = {"loss": "eval/loss", "bleu": "eval/bleu", "chrf": "eval/chrf", "accuracy": "eval/exact_match",
             "general_loss": "eval/general_loss", "kl_to_base": "eval/kl_to_base"}


def open_writer(log_dir: str | Path):
    """torch's SummaryWriter on `log_dir`; ValueError (one line) naming the extra when tensorboard
    is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package
    except ImportError:
        raise ValueError(f"tensorboard: --tensorboard writes TensorBoard's event files, which needs the "
                         f"tensorboard package: {INSTALL}") from None
    try:
        return SummaryWriter(log_dir=str(log_dir))
    except OSError as e:
        raise ValueError(f"tensorboard: cannot write to {log_dir}: {e.strerror or e}") from None


class TensorBoardLog(RunListener):
    """Every step's loss, learning rate and gradient norm; every evaluation's figures (a
    fine-tune's base at step 0); each watched evaluation's forgetting and probe outputs."""

    def __init__(self, log_dir: str | Path) -> None:
        self.log_dir = Path(log_dir)
        self.writer = open_writer(log_dir)

    def on_step(self, trainer, stats: StepStats) -> None:
        for name, tag in STEP_TAGS.items():
            self.writer.add_scalar(tag, getattr(stats, name), stats.step)

    def on_base_evaluation(self, trainer, result: EvalResult) -> None:
        self._evaluation(trainer, result)

    def on_evaluation(self, trainer, result: EvalResult) -> None:
        self._evaluation(trainer, result)

    def on_save(self, trainer, path: Path, resumable: bool) -> None:
        self.writer.flush()  # what a saved run holds, TensorBoard shows

    def close(self) -> None:
        self.writer.close()

    def _evaluation(self, trainer, result: EvalResult) -> None:
        step = trainer.step_count
        figures = {"accuracy": result.accuracy if result.complete else None, "loss": result.loss,
                   "bleu": result.text.bleu if result.text else None,
                   "chrf": result.text.chrf if result.text else None}
        watched = trainer.history.watched
        if watched is not None and watched.steps and watched.steps[-1] == step:
            for name in ("general_loss", "kl_to_base"):
                values = watched.series_of(name)
                if len(values) == len(watched.steps):
                    figures[name] = values[-1]
            for record in (r for r in watched.probes if r.step == step):
                self.writer.add_text(f"probes/{record.probe + 1}",
                                     f"source: {record.source}  \nbase: {record.base_output}  \n"
                                     f"now: {record.output}", step)
        for name, value in figures.items():
            if value is not None:
                self.writer.add_scalar(EVAL_TAGS[name], value, step)
        self.writer.flush()
