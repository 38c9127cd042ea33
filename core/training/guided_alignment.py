"""Guided alignment: one cross-attention head taught word links while a model trains (Garg et al.
2019, "Jointly Learning to Align and Translate with Transformer Models"; Marian's
--guided-alignment with its cost "ce").

For each target piece that has links, the head's attention row of the step that predicts it (the
"output" rows) is compared with the gold links of that piece, normalised over the source pieces
they link (a distribution over the source): the cross-entropy -sum_s g(s) log(a(s) + EPSILON).
The guided loss is the mean of that over the rows that have links; a step's loss is the
translation loss plus `weight` x the guided loss (docs/alignment.md, "Guided training").

Links come per training pair as word links (Pharaoh/talp `i-j`: source word i, target word j);
a word link links every piece of the two words, so the links a row gets are those of its piece's
word. How pieces map to words is core/interp/word_alignment.py's rule, the one `minitx align`
reads alignments out with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch

from minitx.core.config import guided_head_parts
from minitx.core.data.batch import Batch
from minitx.core.model.hooks import HeadHook, hooks_active
from minitx.core.model.transformer import Seq2Seq

# Marian's --guided-alignment-weight default since its cost became "ce" (Marian 1.9's default cost
# was "mse", at this same weight; its first versions weighed by 1): the guided loss is a tenth of
# the translation loss, a hint that shapes one head without trading translation away for it.
DEFAULT_WEIGHT = 0.1
EPSILON = 1e-6  # inside the log, as Marian's: a weight that underflowed to 0 still has a gradient


@dataclass(frozen=True)
class GuidedHead:
    """A decoder layer's cross-attention head, as minitx numbers them (both from 1)."""

    layer: int
    head: int

    @classmethod
    def parse(cls, text: str) -> GuidedHead:
        """'L:H' -> GuidedHead; ValueError ('guided_head: ...', one line) otherwise."""
        return cls(*guided_head_parts(text))

    def check(self, layers: int, heads: int) -> None:
        """ValueError (one line) when the model has no such head."""
        if self.layer > layers or self.head > heads:
            raise ValueError(f"guided_head: the model has {layers} decoder layers of {heads} heads; "
                             f"there is no head {self.layer}:{self.head}")

    def __str__(self) -> str:
        return f"{self.layer}:{self.head}"


# -- the loss -------------------------------------------------------------------------------------
def guided_row_losses(weights: torch.Tensor, links: torch.Tensor) -> torch.Tensor:
    """weights (B, T, S): a head's attention rows; links (B, T, S) bool: the gold links of each
    row's target piece -> (B, T) each row's cross-entropy against its links normalised over the
    source (0 for a row without links)."""
    counts = links.sum(dim=-1, keepdim=True)  # (B, T, 1)
    gold = links.to(weights.dtype) / counts.clamp(min=1)  # (B, T, S): each linked row sums to 1
    return -(gold * (weights + EPSILON).log()).sum(dim=-1)  # (B, T)


def guided_loss(weights: torch.Tensor, links: torch.Tensor) -> torch.Tensor:
    """The guided loss: guided_row_losses averaged over the rows that have links (0 if none)."""
    rows = links.any(dim=-1)  # (B, T)
    return guided_row_losses(weights, links).sum() / rows.sum().clamp(min=1)


def linked_rows(links: torch.Tensor) -> int:
    """How many rows of (B, T, S) links have at least one link: what the loss is averaged over."""
    return int(links.any(dim=-1).sum())


@contextmanager
def head_weights(model: Seq2Seq, head: GuidedHead) -> Iterator[list[torch.Tensor]]:
    """While the block runs, each forward of `model` appends the head's cross-attention weights
    (B, T, S), after the softmax and before dropout, with their gradient: the training forward
    computes them as it always does (explicit attention) and hands them on unchanged."""
    seen: list[torch.Tensor] = []
    block = model.decoder[head.layer - 1].cross_attn

    def keep(weights: torch.Tensor, mask, offset: int) -> torch.Tensor:  # (B, h, T, S)
        seen.append(weights[:, head.head - 1])
        return weights

    with hooks_active({block: HeadHook(weights=keep)}):
        yield seen


# -- the links of the training pairs, in pieces ---------------------------------------------------
def piece_links(word_links: Iterable[tuple[int, int]], source_words: list[int | None],
                target_words: list[int | None]) -> list[tuple[int, int]]:
    """Word links (source word i, target word j) -> piece links (target piece t, source piece s):
    every piece of word j with every piece of word i. `source_words[s]` is the word of source
    piece s (None: a special token or language code, never linked), `target_words` the same."""
    by_source: dict[int, list[int]] = {}
    by_target: dict[int, list[int]] = {}
    for s, word in enumerate(source_words):
        if word is not None:
            by_source.setdefault(word, []).append(s)
    for t, word in enumerate(target_words):
        if word is not None:
            by_target.setdefault(word, []).append(t)
    return sorted({(t, s) for i, j in word_links for t in by_target.get(j, ()) for s in by_source.get(i, ())})


class TrainingLinks:
    """Each pair's piece links (target piece, source piece) in the pieces a pair's ids hold, by
    the pair's index in its data (file order): what a batch of those pairs carries as its
    `alignment` (core/data/batch.py), one row per label."""

    def __init__(self, per_pair: list[list[tuple[int, int]]], source_offset: int = 0) -> None:
        """source_offset: columns fed before a pair's own source ids (1: a wrapped source's start)."""
        self.per_pair = [torch.tensor(links, dtype=torch.long).reshape(-1, 2) for links in per_pair]
        self.source_offset = source_offset

    def __len__(self) -> int:
        return len(self.per_pair)

    def for_pairs(self, pairs: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
        """pairs (B,): indices into the data -> (B, rows, columns) bool: the links of each label
        row (row t predicts target piece t) with each fed source column."""
        links = torch.zeros(len(pairs), rows, columns, dtype=torch.bool)
        for b, k in enumerate(pairs.tolist()):
            pair = self.per_pair[k]  # (n, 2) (t, s)
            if len(pair):
                t, s = pair[:, 0], pair[:, 1] + self.source_offset
                keep = (t < rows) & (s < columns)  # a pair cut to --max-length keeps what fits
                links[b, t[keep], s[keep]] = True
        return links

    def batches(self, make_batch: Callable) -> Callable:
        """A task's make_batch(pairs, which) whose batches carry these links as `alignment`."""

        def with_links(pairs, which: torch.Tensor) -> Batch:
            batch = make_batch(pairs, which)
            rows, columns = batch.labels.shape[1], batch.src.shape[1]
            return replace(batch, alignment=self.for_pairs(pairs.index[which], rows, columns))

        return with_links
