"""The positional encoding as numbers to look at: the table itself (positions x dimensions) and
how alike two positions look to the model (cosine similarity of their rows)."""

from __future__ import annotations

import torch

from minitx.core.model import Seq2Seq


def positional_table(model: Seq2Seq, positions: int) -> torch.Tensor | None:
    """(positions, d) of the added positional encoding, or None for a model that adds none (its
    positions act inside attention, e.g. rotary embeddings)."""
    table = getattr(model, "positional", None)
    if not isinstance(table, torch.Tensor) or table.dim() != 2:
        return None
    return table[: min(positions, table.shape[0])].detach().float().cpu()


def position_similarity(table: torch.Tensor) -> torch.Tensor:
    """(n, d) -> (n, n): cosine similarity of every pair of positions (1 on the diagonal)."""
    unit = table / table.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    return unit @ unit.T
