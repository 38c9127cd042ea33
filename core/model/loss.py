"""The teacher-forced cross-entropy every figure of minitx is: training's step, evaluation's
loss per target token, forgetting's general loss and the numerics' backward pass. One function,
so a change to how the loss is counted (padding left out, float32, label smoothing) reaches
them all."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def summed_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, pad: int,
                         label_smoothing: float = 0.0) -> torch.Tensor:
    """The cross-entropy of logits (B, T, V) against labels (B, T), summed over every label
    that is not PAD, in float32 (label smoothing as transformers' Trainer gives it)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=pad, reduction="sum", label_smoothing=label_smoothing)
