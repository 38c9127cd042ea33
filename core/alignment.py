"""Alignment score: how much of a head's cross-attention lands where the task says it should.

For each layer and head, the mean over output positions of the attention mass on the source
positions the task expects (reverse: n-1-i). 1.0 is a perfect alignment head; a head that
spreads attention uniformly over n positions scores about 1/n.
"""

from __future__ import annotations

import torch

from minitx.core.model import Seq2Seq, eval_mode
from minitx.core.tasks import Task


@torch.no_grad()
def alignment_scores(model: Seq2Seq, task: Task, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """src (B, S) right-padded, lengths (B,) -> (layers, heads) scores in [0, 1].

    Uses teacher forcing on the task's own targets, so the score measures the attention the
    model pays while producing correct outputs."""
    with eval_mode(model):
        device = model.device
        batch = task.batch_from_sources(src.cpu(), lengths.cpu())
        _, maps = model(batch.src.to(device), batch.decoder_input.to(device), return_attention=True)
        expected = task.alignment(batch.src, batch.lengths).to(device)  # (B, S, S)
        return scores_from_cross(maps.cross, expected)


def scores_from_cross(cross: list[torch.Tensor], expected: torch.Tensor) -> torch.Tensor:
    """cross: per layer (B, h, T, S) with T >= S; expected (B, S_out, S) bool -> (layers, heads)."""
    B, S_out, S = expected.shape
    rows = expected.any(dim=-1)  # (B, S_out): output positions that have an expected source
    scores = []
    for weights in cross:
        w = weights[:, :, :S_out, :S]  # (B, h, S_out, S)
        mass = (w * expected[:, None].to(w.dtype)).sum(dim=-1)  # (B, h, S_out)
        per_head = (mass * rows[:, None]).sum(dim=(0, 2)) / rows.sum().clamp(min=1)  # (h,)
        scores.append(per_head)
    return torch.stack(scores).cpu()  # (layers, heads)


def best_head(scores) -> tuple[int, int]:
    """(layer, head), 0-based, of the highest score in a (layers, heads) tensor or nested list:
    the head that does the task's work."""
    rows = scores.tolist() if isinstance(scores, torch.Tensor) else scores
    cells = [(layer, head) for layer, row in enumerate(rows) for head in range(len(row))]
    return max(cells, key=lambda lh: rows[lh[0]][lh[1]])


def random_alignment_scores(model: Seq2Seq, task: Task, n: int = 256, seed: int = 4321) -> torch.Tensor:
    """Scores on n fresh random sources of the task's length range."""
    batch = task.batch(n, torch.Generator().manual_seed(seed))
    return alignment_scores(model, task, batch.src, batch.lengths)
