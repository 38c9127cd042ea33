"""A teacher-forced look at one source: the cross-attention a model pays while producing the
task's correct output. Used to watch an alignment (reverse: the anti-diagonal) form during
training, where greedy decoding of a half-trained model would give rows of varying count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.alignment import scores_from_cross
from minitx.core.model import Seq2Seq, eval_mode
from minitx.core.tasks import Task


@dataclass(frozen=True)
class Probe:
    src: list[int]
    target: list[int]  # the task's output followed by EOS: one grid row each
    cross_attention: torch.Tensor  # (layers, heads, len(target), S), rows sum to one
    scores: torch.Tensor  # (layers, heads) alignment score on this one source


DEFAULT_DIGITS = (7, 2, 9, 0, 4, 6, 1, 8, 3, 5)


def probe_source(task: Task, text: str = "") -> list[int]:
    """The probe's source ids: `text` parsed by the task, or by default six digits (or the
    nearest length the task trains on) that repeat none of their neighbours."""
    if text:
        return task.parse(text)
    length = min(max(6, task.min_len), task.max_len)
    return [DEFAULT_DIGITS[i % len(DEFAULT_DIGITS)] for i in range(length)]


@torch.no_grad()
def probe(model: Seq2Seq, task: Task, src_ids: list[int]) -> Probe:
    with eval_mode(model):
        device = model.device
        src = torch.tensor([src_ids])
        batch = task.batch_from_sources(src, torch.tensor([len(src_ids)]))
        _, maps = model(batch.src.to(device), batch.decoder_input.to(device), return_attention=True)
        n = len(src_ids) + 1  # outputs and EOS
        cross = torch.stack([w[0, :, :n, :] for w in maps.cross]).cpu()  # (L, h, n, S)
        expected = task.alignment(batch.src, batch.lengths)  # (1, S, S)
        scores = scores_from_cross([w.cpu() for w in maps.cross], expected)
        return Probe(list(src_ids), batch.labels[0, :n].tolist(), cross, scores)
