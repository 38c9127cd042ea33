"""Clean/corrupted pairs: two sources of the same length whose known answers differ somewhere.

Patching, attribution, path patching and circuits all compare a clean run with a corrupted one
that differs only in the source. A pair is:
- typed: two sources of the same length, for a task that can tell the answer of any source (the
  digit tasks);
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

POOL_FACTOR = 4  # examples drawn per pair wanted: lengths spread, so groups need several each
MIN_POOL = 64  # and at least this many, so even one pair finds two examples of a length


@dataclass(frozen=True)
class Pair:
    clean: list[int]
    corrupted: list[int]
    clean_answer: list[int]  # the task's output for the clean source, then EOS
    corrupted_answer: list[int]

    @property
    def steps(self) -> list[int]:
        """The steps (0-based) where the two answers differ: the metric averages over them."""
        return [t for t, (a, b) in enumerate(zip(self.clean_answer, self.corrupted_answer)) if a != b]


def typed_pair(task, clean: list[int], corrupted: list[int], eos: int) -> Pair:
    """Two typed sources -> a Pair with the task's answers; ValueError (one sentence) when they
    differ in length, the task cannot tell their answers, or the answers are the same."""
    if len(clean) != len(corrupted):
        raise ValueError(f"the clean and corrupted sources must have the same length "
                         f"(positions are patched one to one), not {len(clean)} and {len(corrupted)}")
    answers = [task.expected_output(list(ids)) for ids in (clean, corrupted)]
    if None in answers:  # dates, a data file: typed text has no known answer to patch towards
        raise ValueError(f"the {task.name} task cannot tell the answer for a typed source; a drawn "
                         "pair of its examples (known answers) can be patched instead")
    pair = Pair(list(clean), list(corrupted), answers[0] + [eos], answers[1] + [eos])
    if not pair.steps:
        raise ValueError("the clean and corrupted sources have the same answer: "
                         "there is no difference to recover")
    return pair


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
