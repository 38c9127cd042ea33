"""Word alignment from cross-attention: which source word each target word comes from, read off
one head (or a layer's mean over heads) while the model is teacher-forced on the pair's own
target, and scored against gold alignments.

- Words are the text's whitespace-separated words, numbered from 0, as fast_align, eflomal and
  awesome-align write them (Pharaoh format: `i-j`, source word i, target word j).
- Pieces to words: each target piece is linked to the source piece its attention row weighs
  most (special tokens and language codes never take part), and a word pair is linked when any
  of their pieces is. A piece belongs to the word its first non-space character is in; a piece
  of whitespace only (sentencepiece's lone "▁", a character-level space) to the word after it.
- Methods: "output" reads the row of the step that predicts the target piece (Naive-Att);
  "input" the row of the step whose decoder input is that piece (Shift-Att, Chen et al. 2020).
- Gold (talp format): `i-j` a sure link, `ipj` a possible one. Scores as Och & Ney (2003), summed
  over the corpus: precision |A∩P|/|A|, recall |A∩S|/|S|, AER 1 - (|A∩S| + |A∩P|)/(|A| + |S|),
  with P holding the sure links too.
- Symmetrization of a forward and a reverse model's links: intersection, union and
  grow-diag-final-and as fast_align's atools computes it (Koehn's rule).

Every head is read in one teacher-forced pass per batch (core/interp/alignment.py's
cross_attention); the links of all heads are computed on tensors at once.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.pair_files import DataError, read_text_pairs
from minitx.core.data.pair_task import read_for_model
from minitx.core.data.subword import SubwordVocab, piece_bytes
from minitx.core.data.task import Task
from minitx.core.data.vocab import Vocab
from minitx.core.interp.alignment import cross_attention
from minitx.core.model.transformer import Seq2Seq

METHODS = ("output", "input")  # the step that predicts the piece; the step the piece is fed to
SYMMETRIZATIONS = ("intersect", "union", "gdfa")
BATCH_SIZE = 64  # pairs per teacher-forced pass
MAX_GOLD_LINKS = 100_000  # links on one gold line: more is not an alignment of a sentence pair

Link = tuple[int, int]  # (source word, target word), 0-based


class Unmappable(ValueError):
    """A side's pieces do not make the words of its text (one line saying how)."""


# ---------------------------------------------------------------------------------------------
# Which heads


@dataclass(frozen=True)
class Head:
    """A cross-attention head to align with, 0-based; head None: the layer's mean over heads."""

    layer: int
    head: int | None = None

    @property
    def name(self) -> str:
        """As minitx names heads (from 1): L2.H3, or L2 mean."""
        return f"L{self.layer + 1}.H{self.head + 1}" if self.head is not None else f"L{self.layer + 1} mean"

    def to_dict(self) -> dict:
        return {"layer": self.layer + 1, "head": None if self.head is None else self.head + 1}


def every_head(layers: int, heads: int) -> list[Head]:
    """Every layer's heads, then the layer's mean, layer by layer."""
    return [Head(layer, head) for layer in range(layers) for head in [*range(heads), None]]


def head_of(layers: int, heads: int, layer: int | None = None, head: int | None = None) -> Head:
    """The Head a person names from 1 (`layer` None: the last layer; `head` None: the layer's
    mean) in a decoder of `layers` layers of `heads` heads; ValueError (one line) if it has none."""
    if head is not None and layer is None:
        raise ValueError("a head needs its layer")
    if layer is not None and not 1 <= layer <= layers:
        raise ValueError(f"layer {layer}: the model's decoder has {layers} layers")
    if head is not None and not 1 <= head <= heads:
        raise ValueError(f"head {head}: the model's layers have {heads} heads")
    return Head(layers - 1 if layer is None else layer - 1, None if head is None else head - 1)


def head_rows(cross: torch.Tensor, heads: Sequence[Head]) -> torch.Tensor:
    """cross (B, L, h, T, S) -> (B, len(heads), T, S): each head's weights, or a layer's mean."""
    return torch.stack([cross[:, c.layer].mean(dim=1) if c.head is None else cross[:, c.layer, c.head]
                        for c in heads], dim=1)


# ---------------------------------------------------------------------------------------------
# Pieces to words


def piece_words(texts: Sequence[str | None]) -> tuple[list[int], int]:
    """The word of each piece (-1: a special token, never aligned) and how many words there are,
    from the text each piece stands for (with the space a piece stands for: "▁de" is " de")."""
    words = [-1] * len(texts)
    count, in_word, waiting = 0, False, []  # waiting: whitespace-only pieces before the next word
    for n, text in enumerate(texts):
        if text is None:
            continue
        first = None
        for c in text:
            if c.isspace():
                in_word = False
            else:
                if not in_word:
                    count, in_word = count + 1, True
                if first is None:
                    first = count - 1
        if first is None:
            waiting.append(n)
            continue
        words[n] = first
        for w in waiting:  # a lone word-start piece belongs to the word it starts
            words[w] = first
        waiting = []
    return words, count


def piece_texts(vocab: Vocab, ids: Sequence[int], text: str) -> list[str | None]:
    """The text each id of a side's row stands for (None: a special token or padding): a subword
    vocabulary's pieces as their bytes read (its <unk> as "?", one unknown character); another
    vocabulary's tokens found in `text` in turn, each with the whitespace before it."""
    if isinstance(vocab, SubwordVocab):
        t = vocab.tokeniser
        special = vocab.added_ids() | {vocab.pad}
        out: list[str | None] = []
        for i in ids:
            if i == vocab.unk:
                out.append("?")
            elif i in special or not 0 <= i < vocab.size or not vocab.tokens[i]:
                out.append(None)
            else:
                out.append(piece_bytes(vocab.tokens[i], t.pieces_style, t.marker, t.byte_fallback)
                           .decode("utf-8", errors="replace"))
        return out
    stripped = text.strip()
    tokens = iter(vocab.split(stripped))
    out, at = [], 0
    for i in ids:
        if i in vocab.specials and i != vocab.unk:
            out.append(None)
            continue
        token = next(tokens, None)
        if token is None:
            raise Unmappable("the model's row holds more tokens than the text")
        found = stripped.find(token, at)
        found = at if found < 0 else found  # an unknown token read as <unk>: where the text is
        out.append(stripped[at:found] + token)
        at = found + len(token)
    return out


@dataclass(frozen=True)
class PairWords:
    """A pair's words and the word of each position of its batch rows (-1: none)."""

    source: list[int]  # per source position as fed
    target: list[int]  # per label position (the target pieces, then the end token)
    source_count: int
    target_count: int


def side_words(vocab: Vocab, ids: Sequence[int], text: str, side: str) -> tuple[list[int], int]:
    """piece_words of one side's row, checked against its text's whitespace words."""
    words, count = piece_words(piece_texts(vocab, ids, text))
    wanted = len(text.split())
    if count != wanted:
        raise Unmappable(f"the {side}'s pieces make {count} words, its text has {wanted}")
    return words, count


def pair_words(task: Task, src_ids: Sequence[int], label_ids: Sequence[int], source: str,
               target: str) -> PairWords:
    """The words of a pair's rows as `task` feeds them (a source as fed, the labels: target
    pieces then the end token, padding after); Unmappable when the pieces do not make the words."""
    src, n_src = side_words(task.src_vocab, [int(i) for i in src_ids], source, "source")
    tgt, n_tgt = side_words(task.vocab, [int(i) for i in label_ids], target, "target")
    return PairWords(src, tgt, n_src, n_tgt)


# ---------------------------------------------------------------------------------------------
# Attention rows to word links


def word_grids(cross: torch.Tensor, words: Sequence[PairWords], heads: Sequence[Head],
               method: str) -> torch.Tensor:
    """cross (B, L, h, T, S), teacher-forced on the pairs' labels (T = their length) -> (B,
    len(heads), Ws, Wt) bool: [b, c, i, j] when head c links source word i to target word j."""
    if method not in METHODS:
        raise ValueError(f"the method is one of {', '.join(METHODS)}, not {method!r}")
    device = cross.device
    B, _, _, T, S = cross.shape
    src_word = torch.full((B, S), -1, dtype=torch.long)
    tgt_word = torch.full((B, T), -1, dtype=torch.long)
    for b, w in enumerate(words):
        src_word[b, : len(w.source)] = torch.tensor(w.source[:S])
        tgt_word[b, : min(T, len(w.target))] = torch.tensor(w.target[:T])
    src_word, tgt_word = src_word.to(device), tgt_word.to(device)
    rows = head_rows(cross, heads)  # (B, C, T, S)
    if method == "input":  # the piece at label t is the decoder's input at step t + 1
        rows, tgt_word = rows[:, :, 1:], tgt_word[:, :-1]  # (B, C, T - 1, S), (B, T - 1)
    alignable = src_word >= 0  # (B, S)
    scores = rows.float().masked_fill(~alignable[:, None, None, :], float("-inf"))
    best = scores.argmax(dim=-1)  # (B, C, R): the source piece each row weighs most
    linked_src = src_word.gather(1, best.flatten(1)).view(best.shape)  # (B, C, R) its word
    linked_tgt = tgt_word[:, None, :].expand_as(linked_src)  # (B, C, R)
    Ws = max(1, max((w.source_count for w in words), default=1))
    Wt = max(1, max((w.target_count for w in words), default=1))
    valid = (linked_tgt >= 0) & (linked_src >= 0)  # (B, C, R)
    cells = torch.where(valid, linked_src * Wt + linked_tgt, Ws * Wt)  # invalid: one spare cell
    grid = torch.zeros(B, len(heads), Ws * Wt + 1, dtype=torch.bool, device=device)
    grid.scatter_(2, cells, True)
    return grid[:, :, :-1].view(B, len(heads), Ws, Wt)


def piece_grid(words: Sequence[PairWords], links: Sequence[frozenset[Link]], T: int, S: int) -> torch.Tensor:
    """Word links back on the pieces: (B, T, S) bool, [b, t, s] when the word of label position
    t and the word of source position s are linked (a gold alignment over an attention grid,
    or what a head is taught to attend to); special tokens and padding never."""
    grid = torch.zeros(len(words), T, S, dtype=torch.bool)
    for b, (w, pair_links) in enumerate(zip(words, links, strict=True)):
        inside = [(i, j) for i, j in pair_links if i < w.source_count and j < w.target_count]
        if not inside:
            continue
        word_grid = torch.zeros(w.source_count + 1, w.target_count + 1, dtype=torch.bool)  # last: none
        at = torch.tensor(inside)
        word_grid[at[:, 0], at[:, 1]] = True
        src = torch.tensor(w.source[:S]).masked_fill(torch.tensor(w.source[:S]) < 0, w.source_count)
        tgt = torch.tensor(w.target[:T]).masked_fill(torch.tensor(w.target[:T]) < 0, w.target_count)
        grid[b, : len(tgt), : len(src)] = word_grid[src][:, tgt].T  # (T', S')
    return grid


def grid_links(grid: torch.Tensor) -> frozenset[Link]:
    """(Ws, Wt) bool -> its links."""
    return frozenset((int(i), int(j)) for i, j in grid.nonzero().tolist())


def pharaoh(links) -> str:
    """Links as one Pharaoh line: `i-j` sorted by source word, then target word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


@dataclass(frozen=True)
class OutputAlignment:
    """A model's own output aligned to its source: the links and the words they number."""

    links: frozenset[Link]
    source_words: list[str]
    output_words: list[str]

    def to_dict(self) -> dict:
        return {"links": pharaoh(self.links), "source_words": self.source_words,
                "output_words": self.output_words}


def words_of(texts: Sequence[str | None], words: Sequence[int], count: int) -> list[str]:
    """The words pieces make (piece_words' numbering), as text."""
    joined = [""] * count
    for text, w in zip(texts, words):
        if text is not None and w >= 0:
            joined[w] += text
    return [w.strip() for w in joined]


def output_alignment(model: Seq2Seq, task: Task, src_ids: Sequence[int], out_ids: Sequence[int], source: str,
                     head: Head, method: str) -> OutputAlignment:
    """The links between a typed source (its ids as fed) and the model's own output (ids, cut
    at the first end token if any), teacher-forced on that output. The output's words are the
    ones its pieces make (a tokeniser's decode may tidy spaces; the links number these);
    Unmappable when the source's pieces do not make its typed words."""
    ends = set(model.generation.eos)
    body = [int(t) for t in out_ids]
    body = body[: next((n for n, t in enumerate(body) if t in ends), len(body))]
    labels = [*body, model.cfg.eos_id]
    batch = Batch(torch.tensor([list(src_ids)]), torch.tensor([[model.generation.start, *labels]]),
                  torch.tensor([task.source_length(list(src_ids))]))
    src, n_src = side_words(task.src_vocab, list(src_ids), source, "source")
    texts = piece_texts(task.vocab, labels, task.format(body))
    tgt, n_tgt = piece_words(texts)
    grid = word_grids(torch.stack(cross_attention(model, batch), dim=1),
                      [PairWords(src, tgt, n_src, n_tgt)], [head], method)
    return OutputAlignment(grid_links(grid[0, 0, :n_src, :n_tgt].cpu()), source.split(),
                           words_of(texts, tgt, n_tgt))


# ---------------------------------------------------------------------------------------------
# A file's pairs


@dataclass(frozen=True)
class TextPair:
    line: int  # in the file
    source: str
    target: str

    @property
    def shape(self) -> tuple[int, int]:
        """(source words, target words)."""
        return len(self.source.split()), len(self.target.split())


class AlignmentPairs:
    """Every pair of a pairs file, as a model's task feeds them, with the words of each row.
    A pair that cannot be aligned (longer than the model's positions, or pieces that do not make
    its words) stays in its place with the reason in `unaligned`: its links are empty."""

    def __init__(self, task: Task, path: str | Path, positions: int) -> None:
        self.task = task
        self.path = str(path)
        self.pairs = [TextPair(*p) for p in read_text_pairs(path)]
        index_of = {p.line: n for n, p in enumerate(self.pairs)}
        read = read_for_model(self.path, task, positions)
        self.unaligned: dict[int, str] = {}
        kept = {index_of[line]: k for k, line in enumerate(read.lines())}
        for n in range(len(self.pairs)):
            if n not in kept:
                self.unaligned[n] = "longer than the model's positions allow"
        self._read = read
        self._kept = kept  # pair index -> position in read.pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def batches(self, batch_size: int = BATCH_SIZE) -> Iterator[tuple[list[int], Batch, list[PairWords]]]:
        """(pair indices, the batch as the task feeds it, each pair's words), pairs of similar
        source length together (less padding); a pair whose words cannot be made is left out and
        noted in `unaligned`."""
        lengths = self._read.pairs.source_lengths().tolist()
        order = sorted(self._kept, key=lambda n: lengths[self._kept[n]])
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch = self.task.pairs_batch(self._read.pairs, torch.tensor([self._kept[n] for n in chunk]))
            indices, rows, words = [], [], []
            for b, n in enumerate(chunk):
                pair = self.pairs[n]
                try:
                    words.append(pair_words(self.task, batch.src[b].tolist(), batch.labels[b].tolist(),
                                            pair.source, pair.target))
                except Unmappable as e:
                    self.unaligned[n] = str(e)
                    continue
                indices.append(n)
                rows.append(b)
            if rows:
                keep = torch.tensor(rows)
                yield indices, Batch(batch.src[keep], batch.tgt[keep], batch.lengths[keep]), words

    def reversed(self) -> Path:
        """A JSONL file of the pairs with their sides swapped (for a model trained target to
        source), in a temporary folder; the caller removes it."""
        folder = Path(tempfile.mkdtemp(prefix="minitx-align-"))
        path = folder / "reversed.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for p in self.pairs:
                f.write(json.dumps({"source": p.target, "target": p.source}, ensure_ascii=False) + "\n")
        return path


def grids(model: Seq2Seq, pairs: AlignmentPairs, heads: Sequence[Head], method: str,
          batch_size: int = BATCH_SIZE,
          progress: Callable[[int, int], object] | None = None) -> Iterator[tuple[list[int], torch.Tensor]]:
    """(pair indices, (B, len(heads), Ws, Wt) bool word links) per batch: one teacher-forced pass
    each, every head read from it. `progress(done, total)` after each batch."""
    done = 0
    for indices, batch, words in pairs.batches(batch_size):
        cross = torch.stack(cross_attention(model, batch), dim=1)  # (B, L, h, T, S)
        yield indices, word_grids(cross, words, heads, method)
        done += len(indices)
        if progress is not None:
            progress(done, len(pairs))


def align(model: Seq2Seq, pairs: AlignmentPairs, heads: Sequence[Head], method: str,
          batch_size: int = BATCH_SIZE,
          progress: Callable[[int, int], object] | None = None) -> list[list[frozenset[Link]]]:
    """Per head, each pair's links, in file order (an unaligned pair's: empty)."""
    links = [[frozenset()] * len(pairs) for _ in heads]
    for indices, grid in grids(model, pairs, heads, method, batch_size, progress):
        grid = grid.cpu()
        for b, n in enumerate(indices):
            for c in range(len(heads)):
                links[c][n] = grid_links(grid[b, c])
    return links


# ---------------------------------------------------------------------------------------------
# Gold and scores


@dataclass(frozen=True)
class Gold:
    """One pair's gold links: sure ones, and possible ones (which hold the sure ones too)."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def parse_talp(line: str) -> Gold:
    """`0-0 1p2 …` -> Gold; ValueError naming the token for anything else."""
    sure, possible = set(), set()
    for token in line.split():
        mark = "p" if "p" in token else "-"
        left, sep, right = token.partition(mark)
        if not (sep and left.isdigit() and right.isdigit() and left.isascii() and right.isascii()):
            raise ValueError(f"{token[:20]!r} is not a link (i-j sure, ipj possible)")
        link = (int(left), int(right))
        possible.add(link)
        if mark == "-":
            sure.add(link)
    return Gold(frozenset(sure), frozenset(possible))


def read_gold(path: str | Path, shapes: Sequence[tuple[int, int]],
              pairs_name: str = "the pairs have") -> list[Gold]:
    """A talp file with one line per pair of `shapes` ((source words, target words) each);
    DataError naming the file and line when it cannot be read or does not fit the pairs."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a directory, not a gold alignment file") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None
    lines = text.splitlines()
    if len(lines) != len(shapes):
        at = min(len(lines), len(shapes)) + 1
        raise DataError(f"{path}, line {at}: the file has {len(lines)} lines, {pairs_name} "
                        f"{len(shapes)} pairs (one line of links per pair)")
    gold = []
    for number, (line, (n_src, n_tgt)) in enumerate(zip(lines, shapes), 1):
        try:
            links = parse_talp(line)
        except ValueError as e:
            raise DataError(f"{path}, line {number}: {e}") from None
        if len(links.possible) > MAX_GOLD_LINKS:
            raise DataError(f"{path}, line {number}: more than {MAX_GOLD_LINKS:,} links")
        for i, j in sorted(links.possible):
            if i >= n_src or j >= n_tgt:
                raise DataError(f"{path}, line {number}: link {i}-{j} is outside the pair's {n_src} source "
                                f"and {n_tgt} target words")
        gold.append(links)
    return gold


@dataclass(frozen=True)
class Score:
    """Link counts over a corpus and Och & Ney's (2003) measures of them."""

    links: int  # |A|
    sure: int  # |S|
    sure_hits: int  # |A ∩ S|
    possible_hits: int  # |A ∩ P|

    @property
    def precision(self) -> float:
        return self.possible_hits / self.links if self.links else 0.0

    @property
    def recall(self) -> float:
        return self.sure_hits / self.sure if self.sure else 0.0

    @property
    def aer(self) -> float:
        total = self.links + self.sure
        return 1.0 - (self.sure_hits + self.possible_hits) / total if total else 0.0

    def __add__(self, other: Score) -> Score:
        return Score(self.links + other.links, self.sure + other.sure, self.sure_hits + other.sure_hits,
                     self.possible_hits + other.possible_hits)

    def to_dict(self) -> dict:
        return {"aer": self.aer, "precision": self.precision, "recall": self.recall}


def score(predicted: Sequence[frozenset[Link]], gold: Sequence[Gold]) -> Score:
    """Corpus-level counts of `predicted` links against `gold`, pair by pair."""
    total = Score(0, 0, 0, 0)
    for links, g in zip(predicted, gold, strict=True):
        total += Score(len(links), len(g.sure), len(links & g.sure), len(links & g.possible))
    return total


def gold_grids(gold: Sequence[Gold], Ws: int, Wt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, Ws, Wt) bool sure and possible links (links beyond Ws x Wt cannot be hit; score_grids
    counts them through `sure_counts`)."""
    sure = torch.zeros(len(gold), Ws, Wt, dtype=torch.bool)
    possible = torch.zeros(len(gold), Ws, Wt, dtype=torch.bool)
    for b, g in enumerate(gold):
        for grid, links in ((sure, g.sure), (possible, g.possible)):
            inside = [(i, j) for i, j in links if i < Ws and j < Wt]
            if inside:
                at = torch.tensor(inside)
                grid[b, at[:, 0], at[:, 1]] = True
    return sure, possible


def score_grids(grid: torch.Tensor, gold: Sequence[Gold]) -> list[Score]:
    """(B, C, Ws, Wt) bool links of C heads against the B pairs' gold -> a Score per head."""
    B, C, Ws, Wt = grid.shape
    sure, possible = (g.to(grid.device) for g in gold_grids(gold, Ws, Wt))
    links = grid.sum(dim=(0, 2, 3))  # (C,)
    sure_hits = (grid & sure[:, None]).sum(dim=(0, 2, 3))  # (C,)
    possible_hits = (grid & possible[:, None]).sum(dim=(0, 2, 3))  # (C,)
    n_sure = sum(len(g.sure) for g in gold)
    return [Score(int(a), n_sure, int(s), int(p))
            for a, s, p in zip(links.tolist(), sure_hits.tolist(), possible_hits.tolist())]


def score_heads(model: Seq2Seq, pairs: AlignmentPairs, gold: Sequence[Gold], heads: Sequence[Head],
                method: str, batch_size: int = BATCH_SIZE,
                progress: Callable[[int, int], object] | None = None) -> list[Score]:
    """Each head's Score on every pair (an unaligned pair has no links: its sure ones count
    against recall), from one teacher-forced pass per batch."""
    totals = [Score(0, 0, 0, 0) for _ in heads]
    seen = set()
    for indices, grid in grids(model, pairs, heads, method, batch_size, progress):
        seen.update(indices)
        totals = [t + s for t, s in zip(totals, score_grids(grid, [gold[n] for n in indices]))]
    missed = Score(0, sum(len(gold[n].sure) for n in range(len(gold)) if n not in seen), 0, 0)
    return [t + missed for t in totals]


def best(scores: Sequence[Score]) -> int:
    """The index of the lowest AER (the first of equals)."""
    return min(range(len(scores)), key=lambda c: scores[c].aer)


# ---------------------------------------------------------------------------------------------
# Symmetrization


def flipped(links) -> frozenset[Link]:
    """A reverse model's links (its source word, its target word) in the forward orientation."""
    return frozenset((j, i) for i, j in links)


def symmetrize(forward, backward, how: str) -> frozenset[Link]:
    """Forward and backward links (both as (source word, target word)) combined `how`:
    intersect, union, or gdfa: grow-diag-final-and as fast_align's atools computes it (the
    intersection; then, again and again until nothing is added, each union point in (i, j)
    order that has one of its 8 neighbours aligned while its source or its target word is not;
    then each forward, then each backward point whose source and target words are both
    unaligned)."""
    forward, backward = frozenset(forward), frozenset(backward)
    if how == "intersect":
        return forward & backward
    if how == "union":
        return forward | backward
    if how != "gdfa":
        raise ValueError(f"symmetrization is one of {', '.join(SYMMETRIZATIONS)}, not {how!r}")
    result = set(forward & backward)
    src_aligned = {i for i, _ in result}
    tgt_aligned = {j for _, j in result}

    def add(i: int, j: int) -> None:
        result.add((i, j))
        src_aligned.add(i)
        tgt_aligned.add(j)

    def one_unaligned(i: int, j: int) -> bool:
        return i not in src_aligned or j not in tgt_aligned

    def neighbour_aligned(i: int, j: int) -> bool:
        return any((i + di, j + dj) in result for di in (-1, 0, 1) for dj in (-1, 0, 1) if di or dj)

    candidates = sorted((forward | backward) - result)
    grown = True
    while grown:  # a pass adds as it goes: a later candidate sees the points added before it
        grown = False
        added = []
        for i, j in candidates:
            if one_unaligned(i, j) and neighbour_aligned(i, j):
                add(i, j)
                added.append((i, j))
                grown = True
        candidates = [c for c in candidates if c not in set(added)]
    for side in (forward, backward):  # final-and: points whose words are both still unaligned
        for i, j in sorted(side):
            if (i, j) not in result and i not in src_aligned and j not in tgt_aligned:
                add(i, j)
    return frozenset(result)
