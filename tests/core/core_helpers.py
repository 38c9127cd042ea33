"""Helpers the core tests share (imported as `core_helpers`, like tests/tui's tui_helpers)."""

import torch
import torch.nn.functional as F

from minitx.core.data.batch import Batch
from minitx.core.data.vocab import DIGITS

PAD = DIGITS.pad  # the digit tasks' padding id


def fit(model: torch.nn.Module, batch: Batch, steps: int, lr: float = 1e-3) -> float:
    """Train `model` on one fixed batch with Adam (the reference betas and eps) for `steps`
    steps, teacher-forced; returns the loss of the last step."""
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    for _ in range(steps):
        logits = model(batch.src, batch.decoder_input)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()
