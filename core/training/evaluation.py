"""Exact-match accuracy of greedy decoding over a task's batches: the one scoring loop behind
training's evaluations, `minitx eval` (fresh sequences, held-out pairs, or a file) and the app.

Training's own evaluations take a shortcut to the same figure: for a causal decoder, greedy
decoding reproduces the target exactly when, and only when, every teacher-forced next-token
prediction is right (by induction over positions), so one forward pass per batch replaces the
decode loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.task import Task
from minitx.core.interp.decode import (
    accuracy_by_length,
    exact_match,
    first_wrong_step,
    greedy_decode,
)
from minitx.core.model.loss import chunked_cross_entropy
from minitx.core.model.transformer import Seq2Seq, eval_mode
from minitx.core.training.results import EvalResult, Failure
from minitx.core.training.text_scores import corpus_scores


def trimmed(ids: list[int], eos: int, pad: int) -> list[int]:
    """Up to and including the first EOS, without trailing PAD."""
    return [i for i in ids if i != pad] if eos not in ids else ids[: ids.index(eos) + 1]


def failure_of(source: list[int], generated: list[int], labels: list[int], eos: int, pad: int,
               line: int | None = None) -> Failure | None:
    """The Failure of one decoded example, or None when its output is right."""
    output, expected = trimmed(generated, eos, pad), trimmed(labels, eos, pad)
    step = first_wrong_step(output, expected, eos)
    return None if step is None else Failure(source, expected, output, step, line)



def score(model: Seq2Seq, task: Task, batches: Iterable[Batch], failures: int = 0,
          lines: list[int] | None = None, teacher_forced: bool = False,
          max_wrong: int | None = None, loss: bool = False, text: bool = False,
          generate: Callable[[torch.Tensor, int], torch.Tensor] | None = None) -> EvalResult:
    """Decode every batch greedily and compare with its labels. Keeps the first `failures`
    wrong outputs (Failure; with `lines`[i], the file line of example i, when given).
    teacher_forced: the same verdicts from one forward pass per batch (a model whose decoder
    sees later tokens, or a request for failures, still decodes). max_wrong: stop after the
    batch that brings the wrong examples past it; the result covers the batches scored.
    loss: also the teacher-forced cross-entropy per target token (target_loss). text: also
    corpus BLEU and chrF of the outputs as text (the task's `format`, as transformers'
    evaluation decodes with skip_special_tokens) against the targets exactly as the data file
    holds them (Batch.references; the task's `format` of the ids for pairs without their text).
    generate: how outputs are made instead of greedy decoding, (src (B, S) on the model's device,
    cap) -> generated ids (B, n) laid out as greedy_decode's (beam search's best, `eval --beams`)."""
    device, cfg = model.device, model.cfg
    correct, lengths, kept = [], [], []
    unknown, seen, wrong = 0, 0, 0
    loss_sum, tokens, outputs, references = 0.0, 0, [], []
    src_unk, unk = task.src_vocab.unk, task.vocab.unk
    # One forward pass gives greedy's verdicts only where no rule depends on the step or the
    # prefix (a Hugging Face folder's forced tokens, min_length, repeated n-grams); text needs
    # the outputs themselves.
    forced = (teacher_forced and model.causal and not failures and not text
              and model.generation.context_free and generate is None)
    batches = iter(batches)
    complete = True
    for batch in batches:
        cap = task.decode_cap(batch.src.shape[1], cfg.max_len)
        if forced:
            ok = teacher_forced_exact_match(model, batch, cap)
        else:
            generated = (greedy_decode(model, batch.src.to(device), max_new_tokens=cap) if generate is None
                         else generate(batch.src.to(device), cap)).cpu()
            ok = exact_match(generated, batch.labels, eos=cfg.eos_id, pad=cfg.pad_id)
        correct.append(ok)
        lengths.append(batch.lengths)
        if loss:
            batch_sum, batch_tokens = target_loss(model, batch)
            loss_sum, tokens = loss_sum + batch_sum, tokens + batch_tokens
        if text:  # the file's own targets where the batch has them, as sacrebleu reads the file
            outputs += [task.format(row) for row in generated.tolist()]
            references += (list(batch.references) if batch.references is not None
                           else [task.format(row) for row in batch.labels.tolist()])
        if src_unk is not None:
            unknown += int((batch.src == src_unk).sum())
        if unk is not None:
            unknown += int((batch.labels == unk).sum())
        for b in (~ok).nonzero().flatten().tolist():
            if len(kept) >= failures:
                break
            row = batch.src[b]
            source = row[row != task.src_vocab.pad].tolist()  # as fed, start and end tokens included
            found = failure_of(source, generated[b].tolist(), batch.labels[b].tolist(), cfg.eos_id,
                               cfg.pad_id, lines[seen + b] if lines else None)
            if found is not None:
                kept.append(found)
        seen += len(batch)
        wrong += int((~ok).sum())
        if max_wrong is not None and wrong > max_wrong:
            complete = next(batches, None) is None  # the last batch: it measured them all anyway
            break
    if not correct:
        return EvalResult(0.0, 0)
    ok, lens = torch.cat(correct), torch.cat(lengths)
    counts = {int(L): int((lens == L).sum()) for L in lens.unique()}
    return EvalResult(float(ok.float().mean()), len(ok), accuracy_by_length(ok, lens), counts, kept, unknown,
                      int((~ok).sum()), complete, loss_sum / tokens if loss and tokens else None, tokens,
                      corpus_scores(outputs, references) if text else None)


def target_loss(model: Seq2Seq, batch: Batch) -> tuple[float, int]:
    """(summed cross-entropy, target tokens) of one teacher-forced batch, no dropout: every
    label up to and including the end token, padding not (transformers' `labels` loss times
    its token count, so a file's loss is the sums' sum over the counts' sum)."""
    pad = model.cfg.pad_id
    with eval_mode(model), torch.inference_mode():
        labels = batch.labels.to(model.device)  # (B, T): the target, EOS, then PAD
        labels = labels[labels != pad]  # (N,): padding gets no logits
        total = chunked_cross_entropy(real_stream(model, batch), labels, model.stream_logits,
                                      model.cfg.vocab_size, pad)
        return float(total), len(labels)


def real_stream(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """(N, d): a teacher-forced batch's decoder stream at its target positions that are not
    padding, in order (their logits are then made a few at a time: (B, T, V) of a big
    vocabulary is gigabytes)."""
    device = model.device
    memory, src_mask = model.encode(batch.src.to(device))
    stream = model.decoder_stream(batch.decoder_input.to(device), memory, src_mask)  # (B, T, d)
    return stream[batch.labels.to(device) != model.cfg.pad_id]


def evaluate(model: Seq2Seq, task, n: int = 500, seed: int = 1234, batch_size: int = 500,
             min_len: int | None = None, max_len: int | None = None,
             teacher_forced: bool = False, stop_below: float = 0.0) -> EvalResult:
    """Exact-match accuracy of greedy decoding on the task's evaluation examples: n fresh
    sequences from `seed`, or (a data file's task) its first n held-out pairs. teacher_forced
    and stop_below: see score (stop_below is its max_wrong as an accuracy)."""
    max_wrong = math.floor((1 - stop_below) * n + 1e-9) if stop_below else None
    return score(model, task, task.evaluation_batches(n, seed, batch_size, min_len, max_len),
                 teacher_forced=teacher_forced, max_wrong=max_wrong)


def teacher_forced_exact_match(model: Seq2Seq, batch: Batch, cap: int) -> torch.Tensor:
    """(B,) bool: every target token up to EOS predicted (argmax) from the target before it,
    and the target within the `cap` tokens greedy decoding may write."""
    device, pad = model.device, model.cfg.pad_id
    cap = model.generation.cap(cap, model.cfg.max_len)  # as greedy decoding caps it
    with eval_mode(model), torch.inference_mode():
        logits = model(batch.src.to(device), batch.decoder_input.to(device))  # (B, T, V)
        labels = batch.labels.to(device)  # (B, T): the target, EOS, then PAD
        chosen = model.generation.emittable(logits).argmax(dim=-1)  # (B, T): greedy's choice
        right = (chosen == labels) | (labels == pad)
        fits = (labels != pad).sum(dim=1) <= cap  # (B,)
        return (right.all(dim=1) & fits).cpu()


@torch.no_grad()
def find_failures(model, task, n: int = 500, seed: int = 1234, limit: int = 10,
                  min_len: int | None = None, max_len: int | None = None,
                  batch_size: int = 500) -> tuple[list[Failure], int]:
    """Decode the examples evaluate() measures for this seed and batch size (fresh
    sequences, or a data file's held-out pairs) -> (the first `limit` failures, how many failed
    in all)."""
    result = score(model, task, task.evaluation_batches(n, seed, batch_size, min_len, max_len), limit)
    return result.failures, result.wrong
