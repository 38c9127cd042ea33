"""Guided alignment: one cross-attention head taught word links while a model trains (Garg et al.
2019, "Jointly Learning to Align and Translate with Transformer Models"; Marian's
--guided-alignment with its cost "ce").

For each target piece that has links, the head's attention row of the step that predicts it (the
"output" rows) is compared with the gold links of that piece, normalised over the source pieces
they link (a distribution over the source): the cross-entropy -sum_s g(s) log(a(s) + EPSILON).
The guided loss is the mean of that over the rows that have links; a step's loss is the
translation loss plus `weight` x the guided loss (docs/alignment.md, "Guided training").

Links come per training pair as word links (Pharaoh/talp `i-j`: source word i, target word j);
a word link links every piece of the two words (core/interp/word_alignment.py's piece_grid: the
pieces-to-words rule `minitx align` reads alignments out with, read the other way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch

from minitx.core.config import guided_head_parts
from minitx.core.data.batch import Batch
from minitx.core.data.pair_files import read_text_pairs
from minitx.core.data.pair_task import PairSet
from minitx.core.interp.alignment import cross_attention
from minitx.core.interp.word_alignment import (
    Gold,
    Head,
    PairWords,
    Score,
    TextPair,
    Unmappable,
    head_of,
    pair_words,
    piece_grid,
    read_gold,
    score_grids,
    word_grids,
)
from minitx.core.model.hooks import HeadHook, hooks_active
from minitx.core.model.transformer import Seq2Seq

EPSILON = 1e-6  # inside the log, as Marian's: a weight that underflowed to 0 still has a gradient


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
def head_weights(model: Seq2Seq, head: Head) -> Iterator[list[torch.Tensor]]:
    """While the block runs, each forward of `model` appends the head's cross-attention weights
    (B, T, S), after the softmax and before dropout, with their gradient: the training forward
    computes them as it always does (explicit attention) and hands them on unchanged."""
    seen: list[torch.Tensor] = []
    block = model.decoder[head.layer].cross_attn

    def keep(weights: torch.Tensor, mask, offset: int) -> torch.Tensor:  # (B, h, T, S)
        seen.append(weights[:, head.head])
        return weights

    with hooks_active({block: HeadHook(weights=keep)}):
        yield seen


# -- the links of the training pairs, in pieces ---------------------------------------------------
class TrainingLinks:
    """Each pair's piece links (label row, source column as fed), by the pair's index in its data
    (file order): what a batch of those pairs carries as its `alignment` (core/data/batch.py)."""

    def __init__(self, per_pair: list[list[tuple[int, int]]]) -> None:
        self.per_pair = [torch.tensor(links, dtype=torch.long).reshape(-1, 2) for links in per_pair]

    def __len__(self) -> int:
        return len(self.per_pair)

    def for_pairs(self, pairs: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
        """pairs (B,): indices into the data -> (B, rows, columns) bool: the links of each label
        row (row t predicts target piece t) with each fed source column."""
        links = torch.zeros(len(pairs), rows, columns, dtype=torch.bool)
        for b, k in enumerate(pairs.tolist()):
            pair = self.per_pair[k]  # (n, 2) (t, s)
            if len(pair):
                t, s = pair[:, 0], pair[:, 1]
                keep = (t < rows) & (s < columns)
                links[b, t[keep], s[keep]] = True
        return links

    def batches(self, make_batch: Callable) -> Callable:
        """A task's make_batch(pairs, which) whose batches carry these links as `alignment`."""

        def with_links(pairs, which: torch.Tensor) -> Batch:
            batch = make_batch(pairs, which)
            rows, columns = batch.labels.shape[1], batch.src.shape[1]
            return replace(batch, alignment=self.for_pairs(pairs.index[which], rows, columns))

        return with_links


def guided_head(text: str, layers: int, heads: int) -> Head:
    """TrainConfig.guided_head ('L:H', from 1) as the Head of a decoder of `layers` x `heads`;
    ValueError ('guided_head: ...') when the model has no such head."""
    try:
        return head_of(layers, heads, *guided_head_parts(text))
    except ValueError as e:
        message = str(e).removeprefix("guided_head: ")
        raise ValueError(f"guided_head: {message}") from None


# -- a run's guided alignment -----------------------------------------------------------------------
WORDS_BATCH = 256  # pairs fed at once while their pieces' words are found
EVAL_BATCH = 64  # held-out pairs read at once for the head's AER


@dataclass
class Aligned:
    """Pairs of a PairSet with gold: their positions in it, their rows' words and their gold; pairs
    whose pieces do not make their words have no words (`unmapped`: how many)."""

    positions: list[int]
    words: list[PairWords | None]
    gold: list[Gold]

    @property
    def unmapped(self) -> int:
        return sum(w is None for w in self.words)


def aligned_pairs(task, pairs: PairSet, path: str, gold_path: str, name: str) -> Aligned:
    """The words of each pair of `pairs` (read from `path`, the file they came from) as `task` feeds
    them, and its gold links from `gold_path` (a talp line per pair of the file; DataError naming
    the file and line for one that does not fit)."""
    texts = [TextPair(*p) for p in read_text_pairs(path)]
    gold = read_gold(gold_path, [p.shape for p in texts], f"{name} has")
    at_line = {p.line: n for n, p in enumerate(texts)}
    positions, words, golds = [], [], []
    lines = pairs.data.lines[pairs.index].tolist()
    for start in range(0, len(pairs), WORDS_BATCH):
        which = torch.arange(start, min(len(pairs), start + WORDS_BATCH))
        batch = task.pairs_batch(pairs, which)
        for b, k in enumerate(which.tolist()):
            n = at_line[int(lines[k])]
            try:
                words.append(pair_words(task, batch.src[b].tolist(), batch.labels[b].tolist(),
                                        texts[n].source, texts[n].target))
            except Unmappable:  # a pair cut to --max-length, say: it trains without links
                words.append(None)
            positions.append(k)
            golds.append(gold[n])
    return Aligned(positions, words, golds)


class Guide:
    """A run's guided alignment: the head taught, the weight of its loss, the training pairs' links
    (batches carry them) and the held-out pairs' gold (the head's AER at each evaluation)."""

    def __init__(self, head: Head, weight: float, links: TrainingLinks, heldout: Aligned | None,
                 unlinked: int = 0) -> None:
        self.head, self.weight, self.links, self.heldout = head, weight, links, heldout
        self.unlinked = unlinked  # training pairs whose pieces do not make their words: no links

    def notes(self) -> list[str]:
        """What a person should hear once: pairs taught nothing, and no gold to measure on."""
        out = []
        if self.unlinked:
            out.append(f"{self.unlinked:,} training pairs' pieces do not make their words (cut by "
                       "--max-length?): they train without links")
        if self.heldout is None:
            out.append("no held-out gold: the guided head's AER is not measured (--valid-alignments "
                       "gives --valid's)")
        return out

    @property
    def name(self) -> str:
        return f"{self.head.layer + 1}:{self.head.head + 1}"

    @classmethod
    def for_run(cls, cfg, task, model_cfg) -> Guide:
        """The guidance `cfg` asks for on `task`'s pairs: the training pairs' links from
        cfg.alignments; gold from cfg.valid_alignments, or the held-out share of cfg.alignments'
        lines. DataError naming the file and line for links that do not fit the pairs."""
        head = guided_head(cfg.guided_head, model_cfg.n_decoder_layers, model_cfg.n_heads)
        data = task.train.data  # every pair of the data file, in file order
        everything = aligned_pairs(task, PairSet.whole(data), cfg.data, cfg.alignments, "--data")
        per_pair: list[list[tuple[int, int]]] = [[] for _ in range(len(data))]
        for k, words, gold in zip(everything.positions, everything.words, everything.gold):
            if words is not None:  # sure and possible: every link, on the pieces of both words
                grid = piece_grid([words], [gold.possible], len(words.target), len(words.source))[0]
                per_pair[k] = [(t, s) for t, s in grid.nonzero().tolist()]  # (label row, source column)
        in_train = set(task.train.index.tolist())
        unlinked = sum(words is None for k, words in zip(everything.positions, everything.words)
                       if k in in_train)
        heldout = None
        if cfg.valid_alignments:
            heldout = aligned_pairs(task, task.heldout, cfg.valid, cfg.valid_alignments, "--valid")
        elif not cfg.valid and task.heldout is not None and task.heldout.data is data:
            at = {k: n for n, k in enumerate(everything.positions)}
            rows = [at[k] for k in task.heldout.index.tolist()]  # the held-out share's lines
            heldout = Aligned(list(range(len(rows))), [everything.words[n] for n in rows],
                              [everything.gold[n] for n in rows])
        return cls(head, cfg.guided_weight, TrainingLinks(per_pair), heldout, unlinked)

    @torch.no_grad()
    def heldout_aer(self, model: Seq2Seq, task) -> float | None:
        """The head's AER on the held-out gold (None without any): each held-out pair teacher-forced
        on its own target and read with the output method, as `minitx align` reads it; a pair
        whose pieces do not make its words has no links (its sure links count as missed)."""
        held = self.heldout
        if held is None:
            return None
        total = Score(0, sum(len(g.sure) for g, w in zip(held.gold, held.words) if w is None), 0, 0)
        usable = [n for n, w in enumerate(held.words) if w is not None]
        for start in range(0, len(usable), EVAL_BATCH):
            chunk = usable[start:start + EVAL_BATCH]
            batch = task.pairs_batch(task.heldout, torch.tensor([held.positions[n] for n in chunk]))
            cross = torch.stack(cross_attention(model, batch), dim=1)  # (B, L, h, T, S)
            grid = word_grids(cross, [held.words[n] for n in chunk], [self.head], "output")
            total += score_grids(grid, [held.gold[n] for n in chunk])[0]
        return total.aer
