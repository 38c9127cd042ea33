"""Clean/corrupted pairs: two sources of the same length whose known answers differ somewhere.

Patching, attribution, path patching and circuits all compare a clean run with a corrupted one
that differs only in the source. A pair is:
- typed: two sources of the same length, with the task's answers where it can tell the answer
  of any source (the digit tasks), else the model's own greedy outputs (a typed date, a data
  file's or a Hugging Face model's free text): then patching explains what the model says for
  each source, right or wrong;
- drawn (`draw_pairs`, every task): one seeded draw of the task's examples (fresh sequences for
  the digit tasks, fresh dates for dates, held-out pairs for a data file), grouped by source
  length and answer length; neighbours in a group become a pair when their answers differ at
  some step. Each example serves at most once.

Answers end with EOS; both runs are teacher-forced on the clean answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minitx.core.data.batch import Batch
from minitx.core.interp.decode import greedy_output

POOL_FACTOR = 4  # examples drawn per pair wanted: lengths spread, so groups need several each
MIN_POOL = 64  # and at least this many, so even one pair finds two examples of a length


@dataclass(frozen=True)
class Pair:
    clean: list[int]
    corrupted: list[int]
    clean_answer: list[int]  # the task's output for the clean source, then EOS
    corrupted_answer: list[int]
    by_model: bool = False  # the answers are the model's greedy outputs (the task could not tell them)

    @property
    def steps(self) -> list[int]:
        """The steps (0-based) where the two answers differ: the metric averages over them."""
        return [t for t, (a, b) in enumerate(zip(self.clean_answer, self.corrupted_answer)) if a != b]


def typed_pair(task, clean: list[int], corrupted: list[int], eos: int, model=None) -> Pair:
    """Two typed sources -> a Pair with the task's answers, or, where the task cannot tell them
    and a `model` is given, with the model's greedy outputs (by_model). ValueError (one sentence)
    when the sources differ in length, the answers cannot be told, the model's outputs differ
    in length (they are compared step by step) or the answers are the same."""
    if len(clean) != len(corrupted):
        raise ValueError(f"the clean and corrupted sources must have the same length "
                         f"(positions are patched one to one), not {len(clean)} and {len(corrupted)}")
    answers = [task.expected_output(list(ids)) for ids in (clean, corrupted)]
    if None not in answers:
        pair = Pair(list(clean), list(corrupted), answers[0] + [eos], answers[1] + [eos])
    elif model is None:  # dates, a data file: typed text has no known answer to patch towards
        raise ValueError(f"the {task.name} task cannot tell the answer for a typed source; a drawn "
                         "pair of its examples (known answers) can be patched instead")
    else:
        said = [model_output(model, task, ids) for ids in (clean, corrupted)]
        if len(said[0]) != len(said[1]):
            raise ValueError(f"the model's outputs for the two sources differ in length ({len(said[0])} and "
                             f"{len(said[1])} tokens): patching compares them step by step, so choose "
                             "sources whose outputs differ in a token")
        pair = Pair(list(clean), list(corrupted), said[0], said[1], by_model=True)
    if not pair.steps:
        raise ValueError(("the model says the same for both sources" if pair.by_model else
                          "the clean and corrupted sources have the same answer") +
                         ": there is no difference to recover")
    return pair


def model_output(model, task, src: list[int]) -> list[int]:
    """The model's greedy output for `src`, up to and including its end token."""
    return greedy_output(model, src, task.decode_cap(len(src), model.cfg.max_len))


def _examples(batch: Batch, eos: int, src_pad: int) -> list[tuple[list[int], list[int]]]:
    """A batch -> (source as fed, answer with EOS) per example, padding dropped (a source's
    padding follows it; an imported model's source also holds its start and end tokens)."""
    out = []
    for src, labels in zip(batch.src.tolist(), batch.labels.tolist()):
        answer = labels[: labels.index(eos) + 1] if eos in labels else labels
        while src and src[-1] == src_pad:
            src.pop()
        out.append((src, answer))
    return out


def draw_pairs(task, n: int, seed: int, eos: int, min_len: int | None = None,
               max_len: int | None = None) -> list[Pair]:
    """Up to n pairs from one seeded draw of the task's examples (see the module docstring).
    ValueError when no two examples share a source and answer length with different answers."""
    generator = torch.Generator().manual_seed(seed)
    examples = _examples(task.batch(max(POOL_FACTOR * n, MIN_POOL), generator, min_len, max_len), eos,
                         task.src_vocab.pad)
    groups: dict[tuple[int, int], list[tuple[list[int], list[int]]]] = {}
    for source, answer in examples:
        groups.setdefault((len(source), len(answer)), []).append((source, answer))
    pairs: list[Pair] = []
    for group in groups.values():
        waiting: list[tuple[list[int], list[int]]] = []
        for source, answer in group:
            partner = next((w for w in waiting if w[1] != answer and w[0] != source), None)
            if partner is None:
                waiting.append((source, answer))
                continue
            waiting.remove(partner)
            pairs.append(Pair(partner[0], source, partner[1], answer))
    if not pairs:
        raise ValueError(f"no two {task.evaluated_on} of the {task.name} task have the same source and "
                         "answer length with different answers: there is no pair to patch")
    # Interleave the lengths (the groups came one length at a time) and keep the first n.
    order = torch.randperm(len(pairs), generator=generator).tolist()
    return [pairs[i] for i in order][:n]


def source_lengths(task, pairs: list[Pair]) -> tuple[int, int]:
    """The shortest and longest clean source, counted in the source's own tokens as every length
    minitx reports (an imported model's start and end tokens not counted: task.source_length)."""
    sizes = [task.source_length(p.clean) for p in pairs]
    return min(sizes), max(sizes)


@dataclass(frozen=True)
class PairBatch:
    """Pairs as tensors, padded to the longest: what every clean/corrupted run feeds the model."""

    pairs: tuple[Pair, ...]
    clean: torch.Tensor  # (B, S) clean sources, PAD after each
    corrupted: torch.Tensor  # (B, S)
    decoder_input: torch.Tensor  # (B, T): SOS then the clean answer, teacher forcing
    clean_answer: torch.Tensor  # (B, T) with EOS, PAD after
    corrupted_answer: torch.Tensor  # (B, T)
    steps: torch.Tensor  # (B, T) bool: where the answers differ (the steps the metric reads)

    @classmethod
    def of(cls, pairs: list[Pair], pad: int, sos: int, src_pad: int | None = None) -> PairBatch:
        """`pad` pads the answers (and the sources, unless the model's source has its own PAD)."""
        if not pairs:
            raise ValueError("no pairs to patch")
        S = max(len(p.clean) for p in pairs)
        T = max(len(p.clean_answer) for p in pairs)

        def rows(lists, width, fill=pad):
            return torch.tensor([list(x) + [fill] * (width - len(x)) for x in lists])

        source_pad = pad if src_pad is None else src_pad
        clean_answer = rows([p.clean_answer for p in pairs], T)
        corrupted_answer = rows([p.corrupted_answer for p in pairs], T)
        decoder_input = torch.cat([torch.full((len(pairs), 1), sos), clean_answer[:, :-1]], dim=1)
        steps = (clean_answer != corrupted_answer) & (clean_answer != pad) & (corrupted_answer != pad)
        return cls(tuple(pairs), rows([p.clean for p in pairs], S, source_pad),
                   rows([p.corrupted for p in pairs], S, source_pad), decoder_input, clean_answer,
                   corrupted_answer, steps)

    def __len__(self) -> int:
        return len(self.pairs)
