"""Which heads matter: each head ablated alone, and what that costs in accuracy and loss.

Accuracy is greedy exact match; loss is the teacher-forced cross-entropy of the correct output
(the training loss without label smoothing), both on the same fresh sequences as the baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from minitx.core.interp.decode import exact_match, greedy_decode
from minitx.core.interp.interventions import Head, Interventions, ablation, all_heads, head_means
from minitx.core.model.transformer import Seq2Seq, eval_mode


@dataclass(frozen=True)
class Score:
    accuracy: float  # exact match, 0..1
    loss: float  # mean cross-entropy per target token, nats


@dataclass(frozen=True)
class HeadEffect:
    head: str  # "cross:L2.H1"
    accuracy: float
    loss: float
    accuracy_change: float  # ablated minus baseline (negative: the head helps)
    loss_change: float  # ablated minus baseline (positive: the head helps)


@dataclass(frozen=True)
class Importance:
    kind: str  # "zero" | "mean"
    n: int  # the examples measured on (a task of fixed pairs: no more than it keeps)
    seed: int
    baseline: Score
    heads: list[HeadEffect]  # the most important first
    examples: str = ""  # what they were, in words (Task.examples_words)

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def score(model: Seq2Seq, task, batch, interventions: Interventions | None = None) -> Score:
    """Exact match and loss of `model` on `batch` under `interventions`."""
    device = model.device
    src, labels = batch.src.to(device), batch.labels.to(device)
    with eval_mode(model), (interventions or Interventions()).applied(model):
        generated = greedy_decode(model, src, max_new_tokens=task.decode_cap(src.shape[1], model.cfg.max_len))
        logits = model(src, batch.decoder_input.to(device))  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=model.cfg.pad_id)
    right = exact_match(generated.cpu(), batch.labels, eos=model.cfg.eos_id, pad=model.cfg.pad_id)
    return Score(float(right.float().mean()), float(loss))


def head_importance(model: Seq2Seq, task, n: int = 500, seed: int = 1234, kind: str = "zero",
                    heads: list[Head] | None = None, min_len: int | None = None,
                    max_len: int | None = None,
                    progress: Callable[[int, int], bool | None] | None = None) -> Importance:
    """Ablate each head alone on the same n fresh sequences (a task of fixed pairs: n of them, at
    most all); sorted by loss gained, then by
    accuracy lost (the loss separates heads whose ablation every sequence survives).
    `progress(done, total)` after each head; returning True stops early (the heads measured so
    far are returned)."""
    batch = task.batch(n, torch.Generator().manual_seed(seed), min_len, max_len)
    heads = heads if heads is not None else all_heads(model)
    means = head_means(model, task) if kind == "mean" else None
    baseline = score(model, task, batch)
    effects = []
    for i, head in enumerate(heads):
        s = score(model, task, batch, ablation(model, [head], kind, task, means))
        effects.append(HeadEffect(str(head), s.accuracy, s.loss, s.accuracy - baseline.accuracy,
                                  s.loss - baseline.loss))
        if progress is not None and progress(i + 1, len(heads)):
            break
    effects.sort(key=lambda e: (-e.loss_change, e.accuracy_change))
    return Importance(kind, len(batch), seed, baseline, effects, task.examples_words(len(batch)))
