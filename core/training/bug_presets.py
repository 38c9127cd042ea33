"""What each deliberate bug (core/config.py's BUGS) changes in training, so a person can see what
each classic bug looks like.

A preset breaks either the model or its training, once, at construction:
- the model's own variants (MODEL_BUGS: no causal mask, no scaling, swapped cross-attention)
  are recorded in ModelConfig.bug, so a checkpoint of a broken model rebuilds broken, and
  core/model/transformer.py computes them;
- a change to training: its configs (`train_changes`), the task its data comes from
  (`data_task`), or how a batch is fed to the model (`feed`), read once by the Trainer.
The doctor never reads this: it recognises a bug from measurements alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from minitx.core.config import BUGS, MODEL_BUGS
from minitx.core.data.batch import Batch

Feed = Callable[[Batch], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def standard_feed(batch: Batch):
    """(source, decoder input, labels): teacher forcing with the target shifted right."""
    return batch.src, batch.decoder_input, batch.labels


def _unshifted_feed(batch: Batch):
    return batch.src, batch.labels, batch.labels  # the decoder sees the token it must predict


@dataclass(frozen=True)
class Bug:
    """How one preset changes training (a model variant changes nothing here)."""

    train_changes: dict = field(default_factory=dict)  # TrainConfig fields the preset sets
    data_task: str = ""  # the task the training data comes from, when not the run's own
    feed: Feed = standard_feed


# The presets that change training; every other name of BUGS is one of the model's variants.
TRAINING_CHANGES: dict[str, Bug] = {
    "no-shift": Bug(feed=_unshifted_feed),
    "no-reverse": Bug(data_task="copy"),
    "no-warmup": Bug(train_changes={"warmup": 0}),
}
NO_BUG = Bug()


def bug_preset(name: str) -> Bug:
    """What preset `name` changes in training ("" and the model's variants: nothing)."""
    if name and name not in BUGS:
        raise ValueError(f"bug: must be one of {', '.join(BUGS)}; got {name!r}")
    return TRAINING_CHANGES.get(name, NO_BUG)


def apply_bug(model_cfg, train_cfg):
    """(model_cfg, train_cfg) with train_cfg.bug's effects on the configs applied: a preset that
    breaks the model is recorded in the model config, so its checkpoints rebuild broken."""
    bug = bug_preset(train_cfg.bug)
    if train_cfg.bug in MODEL_BUGS:
        model_cfg = model_cfg.replace(bug=train_cfg.bug)
    return model_cfg, train_cfg.replace(**bug.train_changes)
