"""Exact-match accuracy of greedy decoding over a task's batches: the one scoring loop behind
training's evaluations, `minitx eval` (fresh sequences, held-out pairs, or a file) and the app.

Training's own evaluations take a shortcut to the same figure: for a causal decoder, greedy
decoding reproduces the target exactly when, and only when, every teacher-forced next-token
prediction is right (by induction over positions), so one forward pass per batch replaces the
decode loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from minitx.core.decode import accuracy_by_length, exact_match, greedy_decode
from minitx.core.failures import Failure, failure_of
from minitx.core.model import Seq2Seq, eval_mode
from minitx.core.tasks import Batch, Task


@dataclass(frozen=True)
class EvalResult:
    accuracy: float
    n: int
    by_length: dict[int, float] = field(default_factory=dict)  # source length -> accuracy
    count_by_length: dict[int, int] = field(default_factory=dict)  # source length -> examples
    failures: list[Failure] = field(default_factory=list)  # the first ones, in order
    unknown: int = 0  # source and target tokens read as <unk>
    wrong: int = 0  # examples whose output is not exactly right


def score(model: Seq2Seq, task: Task, batches: Iterable[Batch], failures: int = 0,
          lines: list[int] | None = None, teacher_forced: bool = False,
          max_wrong: int | None = None) -> EvalResult:
    """Decode every batch greedily and compare with its labels. Keeps the first `failures`
    wrong outputs (core/failures.py; with `lines`[i], the file line of example i, when given).
    teacher_forced: the same verdicts from one forward pass per batch (a model whose decoder
    sees later tokens, or a request for failures, still decodes). max_wrong: stop after the
    batch that brings the wrong examples past it; the result covers the batches scored."""
    device, cfg = model.device, model.cfg
    correct, lengths, kept = [], [], []
    unknown, seen, wrong = 0, 0, 0
    unk = task.vocab.unk
    forced = teacher_forced and model.causal and not failures
    for batch in batches:
        cap = task.decode_cap(batch.src.shape[1], cfg.max_len)
        if forced:
            ok = teacher_forced_exact_match(model, batch, cap)
        else:
            generated = greedy_decode(model, batch.src.to(device), max_new_tokens=cap).cpu()
            ok = exact_match(generated, batch.labels, eos=cfg.eos_id, pad=cfg.pad_id)
        correct.append(ok)
        lengths.append(batch.lengths)
        if unk is not None:
            unknown += int((batch.src == unk).sum() + (batch.labels == unk).sum())
        for b in (~ok).nonzero().flatten().tolist():
            if len(kept) >= failures:
                break
            source = batch.src[b, : int(batch.lengths[b])].tolist()
            found = failure_of(source, generated[b].tolist(), batch.labels[b].tolist(), cfg.eos_id,
                               cfg.pad_id, lines[seen + b] if lines else None)
            if found is not None:
                kept.append(found)
        seen += len(batch)
        wrong += int((~ok).sum())
        if max_wrong is not None and wrong > max_wrong:
            break
    if not correct:
        return EvalResult(0.0, 0)
    ok, lens = torch.cat(correct), torch.cat(lengths)
    counts = {int(L): int((lens == L).sum()) for L in lens.unique()}
    return EvalResult(float(ok.float().mean()), len(ok), accuracy_by_length(ok, lens), counts, kept, unknown,
                      int((~ok).sum()))


def teacher_forced_exact_match(model: Seq2Seq, batch: Batch, cap: int) -> torch.Tensor:
    """(B,) bool: every target token up to EOS predicted (argmax) from the target before it,
    and the target within the `cap` tokens greedy decoding may write."""
    device, pad = model.device, model.cfg.pad_id
    with eval_mode(model), torch.inference_mode():
        logits = model(batch.src.to(device), batch.decoder_input.to(device))  # (B, T, V)
        labels = batch.labels.to(device)  # (B, T): the target, EOS, then PAD
        right = (logits.argmax(dim=-1) == labels) | (labels == pad)  # (B, T)
        fits = (labels != pad).sum(dim=1) <= cap  # (B,)
        return (right.all(dim=1) & fits).cpu()
