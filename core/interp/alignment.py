"""Alignment score: how much of a head's cross-attention lands where the task says it should.

For each layer and head, the mean over output positions of the attention mass on the source
positions the task expects (reverse: n-1-i). 1.0 is a perfect alignment head; a head that
spreads attention uniformly over n positions scores about 1/n.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.imported_task import MissingPairs
from minitx.core.data.task import Task
from minitx.core.interp.decode import greedy_decode
from minitx.core.model.transformer import AttentionMaps, Seq2Seq, eval_mode


@torch.no_grad()
def cross_attention(model: Seq2Seq, batch: Batch) -> list[torch.Tensor]:
    """Per decoder layer (B, h, T, S): the cross-attention paid while teacher-forced on the
    batch's own (correct) targets."""
    with eval_mode(model):
        device = model.device
        maps = AttentionMaps()  # the decoder's alone, and no logits: nothing else is read here
        memory, src_mask = model.encode(batch.src.to(device))
        model.decoder_stream(batch.decoder_input.to(device), memory, src_mask, maps)
        return maps.cross


def alignment_scores(model: Seq2Seq, task: Task, batch: Batch) -> torch.Tensor | None:
    """(layers, heads) scores in [0, 1] on `batch`, or None when the task expects no pattern.

    Uses teacher forcing on the task's own targets, so the score measures the attention the
    model pays while producing correct outputs."""
    batch = task.relabel(batch)
    expected = task.expected_alignment(batch)  # (B, S_out, S)
    if expected is None:
        return None
    return scores_from_cross(cross_attention(model, batch), expected.to(model.device))


def head_sharpness(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """(layers, heads): each head's largest weight over the source, averaged over the real
    output positions (up to EOS). 1 is a head that always looks at one position; uniform
    attention over n positions is 1/n. What can be said of a head when no pattern is expected."""
    real = (batch.labels != model.cfg.pad_id).to(model.device)  # (B, T)
    rows = []
    for weights in cross_attention(model, batch):  # (B, h, T, S)
        peak = weights.max(dim=-1).values  # (B, h, T)
        rows.append((peak * real[:, None]).sum(dim=(0, 2)) / real.sum().clamp(min=1))  # (h,)
    return torch.stack(rows).cpu()  # (layers, heads)


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


def head_scores(model: Seq2Seq, task: Task, n: int = 256, seed: int = 4321) -> tuple[str, torch.Tensor]:
    """("alignment", scores) when the task expects a pattern, else ("sharpness", head_sharpness):
    one (layers, heads) table to show per head either way, and which one it is."""
    batch = task.batch(n, torch.Generator().manual_seed(seed))
    scores = alignment_scores(model, task, batch)
    if scores is not None:
        return "alignment", scores
    return "sharpness", head_sharpness(model, batch)


def shown_head_scores(model: Seq2Seq, task: Task, n: int = 128,
                      progress: Callable[[int, int], bool | None] | None = None) -> tuple[str, torch.Tensor]:
    """What a picture of every head is labelled with: head_scores on n of the task's examples,
    or, for a task with none to draw (an imported model without pairs), the sharpness of each
    head on the task's example source alone (`progress` as example_sharpness's)."""
    try:
        return head_scores(model, task, n=n)
    except MissingPairs:
        return "sharpness", example_sharpness(model, task, progress)


def example_sharpness(model: Seq2Seq, task: Task,
                      progress: Callable[[int, int], bool | None] | None = None) -> torch.Tensor:
    """(layers, heads) head_sharpness on the task's example source alone, teacher-forced on the
    model's own greedy output: what can be shown per head for a task with no examples to draw
    (an imported model without pairs). `progress(step, cap)` as the output is decoded (a big
    model's example may run to hundreds of steps), as greedy_decode's."""
    ids = task.parse(task.example(), max_len=task.source_limit(model.cfg.max_len))
    src = torch.tensor([ids])  # (1, S)
    cfg = model.cfg
    out = greedy_decode(model, src.to(model.device), task.decode_cap(len(ids), cfg.max_len),
                        progress=progress)[0].tolist()
    out = out[: out.index(cfg.eos_id)] if cfg.eos_id in out else out[: cfg.max_len - 2]
    tgt = torch.tensor([[cfg.sos_id, *out, cfg.eos_id]])  # (1, T + 2)
    return head_sharpness(model, Batch(src, tgt, torch.tensor([task.source_length(ids)])))
