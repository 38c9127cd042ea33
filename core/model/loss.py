"""The teacher-forced cross-entropy every figure of minitx is: training's step, evaluation's
loss per target token, forgetting's general loss and the numerics' backward pass. One function,
so a change to how the loss is counted (padding left out, float32, label smoothing) reaches
them all."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def summed_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, pad: int,
                         label_smoothing: float = 0.0) -> torch.Tensor:
    """The cross-entropy of logits (B, T, V) against labels (B, T), summed over every label
    that is not PAD, in float32 (label smoothing as transformers' Trainer gives it)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=pad, reduction="sum", label_smoothing=label_smoothing)


LOSS_LOGITS = 1 << 23  # logits made at once (positions x vocabulary): 32 MiB of float32


def chunked_cross_entropy(stream: torch.Tensor, labels: torch.Tensor, to_logits: Callable, vocab: int,
                          pad: int) -> torch.Tensor:
    """summed_cross_entropy of to_logits(stream): (N, d) -> (N, V = vocab), against labels (N,),
    made a few positions at a time: (B, T, V) of a big vocabulary is gigabytes (NLLB's 256,206
    pieces: 650 MB for 16 pairs, and as much again for its log-softmax and its gradient). Where a
    gradient is wanted, each chunk's logits are made again in backward (torch.utils.checkpoint)
    instead of kept: the same gradients, the memory of one chunk."""
    rows = max(1, LOSS_LOGITS // vocab)
    grad = torch.is_grad_enabled() and stream.requires_grad

    def part(y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return summed_cross_entropy(to_logits(y), target, pad)

    total = stream.new_zeros((), dtype=torch.float32)
    for i in range(0, len(labels), rows):
        y, target = stream[i: i + rows], labels[i: i + rows]  # (n, d), (n,)
        total = total + (checkpoint(part, y, target, use_reentrant=False) if grad else part(y, target))
    return total
