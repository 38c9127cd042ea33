"""Checks of tensors read from a file (a checkpoint, another code's weights, a Hugging Face
folder), before any of them becomes a model's weight."""

from __future__ import annotations

import torch


def all_finite(t: torch.Tensor) -> bool:
    """Whether every value of a floating-point tensor is finite (no NaN, no infinity). Its
    minimum and maximum in one pass (both propagate NaN): torch.isfinite(t).all() makes a mask as
    large as t first, and took 0.4-0.6 s of loading a 74M-parameter folder, this 0.04 s."""
    if t.numel() == 0:
        return True
    low, high = torch.aminmax(t)
    return bool(torch.isfinite(low) & torch.isfinite(high))
