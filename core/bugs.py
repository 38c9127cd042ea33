"""Deliberately broken variants, so a person can see what each classic bug looks like.

A preset is one hook in two places, applied once at construction and nowhere else:
- a model patch (`patch_model`, called by Seq2Seq.__init__ when ModelConfig.bug names it), so
  a checkpoint of a broken model rebuilds broken;
- a change to training: its configs (`train_changes`), the task its data comes from
  (`data_task`), or how a batch is fed to the model (`feed`), read once by the Trainer.
The diagnostics never read this: they recognise a bug from measurements alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from minitx.core.model import DecoderLayer, MultiHeadAttention, Seq2Seq
from minitx.core.tasks import Batch

Feed = Callable[[Batch], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def standard_feed(batch: Batch):
    """(source, decoder input, labels): teacher forcing with the target shifted right."""
    return batch.src, batch.decoder_input, batch.labels


def _unshifted_feed(batch: Batch):
    return batch.src, batch.labels, batch.labels  # the decoder sees the token it must predict


def _unscaled(model: Seq2Seq) -> None:
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.score_divisor = 1.0


def _no_causal_mask(model: Seq2Seq) -> None:
    model.causal = False


class SwappedCrossLayer(DecoderLayer):
    """Cross-attention with keys and values from the decoder stream, masked like
    self-attention, instead of from the encoder's memory."""

    cross_reads_decoder = True

    def cross_inputs(self, h, memory, src_mask, tgt_mask, causal):
        return self.cross_attn.keys_values(h), tgt_mask, causal


def _swapped_cross(model: Seq2Seq) -> None:
    for layer in model.decoder:
        layer.__class__ = SwappedCrossLayer  # the same weights; only what cross-attention reads changes


@dataclass(frozen=True)
class Bug:
    description: str
    patch: Callable[[Seq2Seq], None] | None = None  # how the model is broken, if it is
    train_changes: dict = field(default_factory=dict)  # TrainConfig fields the preset sets
    data_task: str = ""  # the task the training data comes from, when not the run's own
    feed: Feed = standard_feed


BUG_PRESETS: dict[str, Bug] = {
    "no-shift": Bug("target not shifted right: the decoder sees the token it must predict",
                    feed=_unshifted_feed),
    "no-causal-mask": Bug("decoder self-attention sees future tokens", patch=_no_causal_mask),
    "no-scale": Bug("attention scores not divided by sqrt(d_k)", patch=_unscaled),
    "swap-cross": Bug("cross-attention keys/values come from the decoder, not the encoder",
                      patch=_swapped_cross),
    "no-reverse": Bug("data generation forgot to reverse: targets are copies", data_task="copy"),
    "no-warmup": Bug("full learning rate from step 1", train_changes={"warmup": 0}),
}
BUGS: dict[str, str] = {name: bug.description for name, bug in BUG_PRESETS.items()}
MODEL_BUGS = tuple(name for name, bug in BUG_PRESETS.items() if bug.patch is not None)
NO_BUG = Bug("no deliberate bug")


def bug_preset(name: str) -> Bug:
    if not name:
        return NO_BUG
    if name not in BUG_PRESETS:
        raise ValueError(f"bug: must be one of {', '.join(BUG_PRESETS)}; got {name!r}")
    return BUG_PRESETS[name]


def patch_model(model: Seq2Seq, name: str) -> None:
    """Break a freshly built model the way preset `name` says (Seq2Seq.__init__ calls this)."""
    bug = bug_preset(name)
    if bug.patch is not None:
        bug.patch(model)


def apply_bug(model_cfg, train_cfg):
    """(model_cfg, train_cfg) with train_cfg.bug's effects on the configs applied: a preset that
    breaks the model is recorded in the model config, so its checkpoints rebuild broken."""
    bug = bug_preset(train_cfg.bug)
    if bug.patch is not None:
        model_cfg = model_cfg.replace(bug=train_cfg.bug)
    return model_cfg, train_cfg.replace(**bug.train_changes)
