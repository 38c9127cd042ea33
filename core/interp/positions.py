"""The positional encoding as numbers to look at: the table added to the embeddings (positions x
dimensions) and how alike two positions look to the model (cosine similarity of their rows)."""

from __future__ import annotations

import torch

from minitx.core.model.transformer import Seq2Seq


def positional_table(model: Seq2Seq, positions: int, side: str = "tgt") -> torch.Tensor | None:
    """(positions, d) of what is added to the `side` ("src" or "tgt") embeddings: the sinusoids,
    or that side's learned table; None when nothing is added (rope turns queries and keys inside
    self-attention; none has no positions)."""
    table = model.position_table(side)
    if table is None:
        return None
    return table[: min(positions, table.shape[0])].detach().float().cpu()


def position_similarity(table: torch.Tensor) -> torch.Tensor:
    """(n, d) -> (n, n): cosine similarity of every pair of positions (1 on the diagonal)."""
    unit = table / table.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    return unit @ unit.T
