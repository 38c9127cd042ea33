"""A data file's text as ids: flat arrays per side (2 bytes a token for vocabularies under
32,768), never Python lists per pair, so a million pairs fit in memory close to their text.

A Hugging Face model's file is read with its own tokeniser (level "subword", core/data/subword.py):
a source vocabulary reads the sources as typed text becomes ids, a target vocabulary the targets
as the labels transformers trains on, less their final end token; pieces the tokeniser does not
know are its <unk>, and counted.

Reading a training file gives provisional ids (each new token the next number); once the
hold-out is drawn, `count_tokens` counts the training side and `renumber` turns the ids into the
vocabulary's, in place. A file read for a trained model (eval --data) uses its vocabulary at once.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from minitx.core.data.pair_files import BY_NAME, Columns, DataError, Provenance, file_format, read_chunks
from minitx.core.data.subword import SUBWORD
from minitx.core.data.vocab import RESERVED_TOKENS, Vocab, build_vocab

MAX_CODEPOINT = 0x110000
SEPARATOR = "\U0010ffff"  # a noncharacter: joins texts for one split (texts holding it split alone)
REMAP_SPAN = 1 << 22  # ids renumbered at a time: bounds the temporaries


class _Unreadable(Exception):
    """Text `index` of a chunk holds `token`, which a vocabulary without UNK cannot read."""

    def __init__(self, index: int, token: str) -> None:
        self.index, self.token = index, token


class _Tokeniser:
    """Text -> ids, chunk by chunk. Growing (vocab None): every new token gets the next
    provisional id. Fixed (a vocab): unknown tokens become UNK and are counted."""

    def __init__(self, level: str, vocab: Vocab | None = None) -> None:
        self.level, self.vocab = level, vocab
        self.unknown = 0
        self.tokens: list[str] = []  # provisional id -> token (growing mode)
        if level == SUBWORD:  # a model's tokeniser: nothing to grow, nothing to look up here
            if vocab is None:
                raise ValueError("a subword data file is read with a model's tokeniser")
        elif level == "char":  # a table over every code point: one lookup per chunk, not per char
            self.table = torch.full((MAX_CODEPOINT,), -1, dtype=torch.int32)
            if vocab is not None:
                for i in vocab.real_ids():
                    self.table[ord(vocab.tokens[i])] = i
        else:
            self.ids: dict[str, int] = {SEPARATOR: -2}
            if vocab is not None:
                self.ids.update({vocab.tokens[i]: i for i in vocab.real_ids()})

    @property
    def size(self) -> int:
        return len(self.tokens) if self.vocab is None else self.vocab.size

    def encode(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (flat int32 ids of the texts one after another, (texts,) token counts)."""
        if self.level == SUBWORD:
            rows = self.vocab.row_ids(texts)
            ids = _int32(array.array("i", itertools.chain.from_iterable(rows)))
            if self.vocab.unk is not None:
                self.unknown += int((ids == self.vocab.unk).sum())
            return ids, torch.tensor([len(r) for r in rows], dtype=torch.int32)
        if self.level == "char":
            lengths = torch.tensor([len(t) for t in texts], dtype=torch.int32)
            with warnings.catch_warnings():  # read-only bytes, only ever read: no copy needed
                warnings.simplefilter("ignore", UserWarning)
                codepoints = torch.frombuffer("".join(texts).encode("utf-32-le"), dtype=torch.int32)
            ids = self.table[codepoints]
            missing = ids < 0
            if bool(missing.any()):
                if self.vocab is None:  # a presence table, not unique(): sorting 2M ids costs 40 MB
                    present = torch.zeros(MAX_CODEPOINT, dtype=torch.bool)
                    present[codepoints] = True
                    new = (present & (self.table < 0)).nonzero().flatten()
                    self.table[new] = torch.arange(len(self.tokens), len(self.tokens) + len(new),
                                                   dtype=torch.int32)
                    self.tokens.extend(chr(c) for c in new.tolist())
                    ids = self.table[codepoints]
                elif self.vocab.unk is None:  # an imported vocabulary without UNK
                    at = int(missing.nonzero()[0])
                    raise _Unreadable(int(torch.searchsorted(lengths.cumsum(0), at, right=True)),
                                      chr(int(codepoints[at])))
                else:
                    self.unknown += int(missing.sum())
                    ids[missing] = self.vocab.unk
            return ids, lengths
        flat, lengths = self._words(texts)
        ids = self._lookup(flat)  # (len(flat),) int32, -1 where unseen, -2 at separators
        if lengths is not None:
            ids[ids == -2] = -1  # no separators here: a text's own U+10FFFF is just unseen
        missing = (ids == -1).nonzero().flatten()
        if len(missing):
            if self.vocab is None:  # new words: number them, then look the chunk up again
                for word in dict.fromkeys(flat[i] for i in missing.tolist()):
                    self.ids[word] = len(self.tokens)
                    self.tokens.append(word)
                ids = self._lookup(flat)
            elif self.vocab.unk is None:  # the digits vocabulary (or an imported one) has no UNK
                at = int(missing[0])
                if lengths is None:  # joined texts: the separators before it count the texts
                    text = int((ids[:at] == -2).sum())
                else:
                    text = int(torch.searchsorted(lengths.cumsum(0), at, right=True))
                raise _Unreadable(text, flat[at])
            else:
                self.unknown += len(missing)
                ids[missing] = self.vocab.unk
        if lengths is None:  # texts were joined by separators: they mark where each ends
            ends = torch.cat([(ids == -2).nonzero().flatten(), torch.tensor([len(ids)])])
            lengths = (ends - torch.cat([torch.tensor([-1]), ends[:-1]]) - 1).to(torch.int32)
            ids = ids[ids != -2]
        return ids, lengths

    def _lookup(self, words: list[str]) -> torch.Tensor:
        get = self.ids.get
        return _int32(array.array("i", [get(w, -1) for w in words]))

    def _words(self, texts: list[str]) -> tuple[list[str], torch.Tensor | None]:
        """All the texts' words in one list, and how many each has; or, joined by separators
        for one split (a quarter of the cost of a split per text), None: the separators then
        say where each text ends."""
        if self.level == "word" and not any(SEPARATOR in t for t in texts):
            return f" {SEPARATOR} ".join(texts).split(), None
        split = str.split if self.level == "word" else self.vocab.split  # digits: "3 1 4" or "314"
        words = [split(t) for t in texts]
        return list(itertools.chain.from_iterable(words)), torch.tensor([len(w) for w in words],
                                                                         dtype=torch.int32)


def _int32(values: array.array) -> torch.Tensor:
    """An array of C ints as an int32 tensor of its own."""
    if not values:
        return torch.zeros(0, dtype=torch.int32)
    return torch.frombuffer(values, dtype=torch.int32).clone()


@dataclass
class Side:
    """One side (sources or targets) of many pairs: flat ids and where each pair's begin."""

    ids: torch.Tensor  # (tokens,) int16 or int32
    offsets: torch.Tensor  # (pairs + 1,) int64

    @property
    def lengths(self) -> torch.Tensor:  # (pairs,)
        return self.offsets[1:] - self.offsets[:-1]

    def rows(self, index: torch.Tensor, pad: int) -> torch.Tensor:
        """Pairs `index` (B,) -> (B, L) int64 ids right-padded with `pad`, L the longest."""
        start, length = self.offsets[index], self.lengths[index]
        width = int(length.max()) if len(index) else 0
        at = start[:, None] + torch.arange(width)[None, :]  # (B, L)
        inside = torch.arange(width)[None, :] < length[:, None]
        picked = self.ids[at.clamp(max=max(len(self.ids) - 1, 0))].long()
        return picked.masked_fill(~inside, pad)

    def row(self, i: int) -> list[int]:
        return self.ids[int(self.offsets[i]) : int(self.offsets[i + 1])].tolist()

    @classmethod
    def from_lists(cls, rows: list[list[int]]) -> Side:
        lengths = torch.tensor([len(r) for r in rows], dtype=torch.int64)
        flat = torch.tensor([i for r in rows for i in r], dtype=torch.int32)
        return cls(flat, _offsets(lengths))

    @classmethod
    def from_chunks(cls, chunks: list[torch.Tensor], lengths: list[torch.Tensor]) -> Side:
        """Concatenated into one array, each chunk let go once copied: the chunks and the
        whole are never all held at once (torch.cat would double the peak)."""
        dtype = chunks[0].dtype if chunks else torch.int16
        ids = torch.empty(sum(len(c) for c in chunks), dtype=dtype)
        at = 0
        chunks.reverse()
        while chunks:
            chunk = chunks.pop()
            ids[at : at + len(chunk)] = chunk
            at += len(chunk)
        return cls(ids, _offsets(torch.cat(lengths).long() if lengths else torch.zeros(0, dtype=torch.int64)))


def _offsets(lengths: torch.Tensor) -> torch.Tensor:
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = lengths.cumsum(0)
    return offsets


@dataclass
class PairData:
    """Many pairs as ids: `source` and `target` sides, and the file line each came from; with
    `texts`, the targets as the file holds them (the references BLEU and chrF score against:
    a tokeniser's round trip of the ids loses what it cannot write), None where not kept."""

    source: Side
    target: Side
    lines: torch.Tensor  # (pairs,) int32
    texts: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.lines)

    def texts_of(self, index: torch.Tensor) -> PairData:
        """The same pairs keeping the target texts of `index` (m,) only (a held-out share of a
        training file: the other texts let go)."""
        if self.texts is None:
            return self
        kept: list[str | None] = [None] * len(self)
        for i in index.tolist():
            kept[i] = self.texts[i]
        return PairData(self.source, self.target, self.lines, kept)


@dataclass
class Loaded:
    data: PairData
    provenance: Provenance
    tokens: list[str]  # provisional id -> token (growing mode); empty with a fixed vocabulary
    unknown: int  # tokens read as UNK (fixed vocabulary)


def load(path: str | os.PathLike, level: str, vocab: Vocab | None = None,
         src_vocab: Vocab | None = None, columns: Columns = BY_NAME, keep_texts: bool = False) -> Loaded:
    """Read and tokenise a whole file. Without `vocab`, ids are provisional (see Loaded.tokens
    and `renumber`); with it, they are the vocabulary's and unknown tokens are UNK (a
    vocabulary without UNK refuses them). `src_vocab` reads the sources in a vocabulary of their
    own (an imported model's); by default `vocab` reads both sides. `columns`: which fields are the
    source and the target (a translation record's languages). keep_texts: the targets' text too
    (PairData.texts)."""
    path = Path(path)
    sides = (getattr(src_vocab, "side", None), getattr(vocab, "side", None))
    if level == SUBWORD and sides != ("source", "target"):
        raise ValueError("a subword data file is read with a source and a target vocabulary")
    digest = hashlib.sha256()
    tokeniser = _Tokeniser(level, vocab)
    source_tokeniser = tokeniser if src_vocab is None else _Tokeniser(level, src_vocab)
    sides = {"source": ([], []), "target": ([], [])}  # side -> (id chunks, length chunks)
    lines = []
    texts: list[str | None] | None = [] if keep_texts else None
    for numbers, sources, targets in read_chunks(path, digest, columns):
        if texts is not None:
            texts += targets
        for (chunks, lengths), texts, reader in zip(sides.values(), (sources, targets),
                                                    (source_tokeniser, tokeniser)):
            try:
                ids, counts = reader.encode(texts)
            except _Unreadable as e:
                shown = e.token if len(e.token) <= 12 else e.token[:12] + "…"
                known = "digits 0-9 only" if level == "digits" else "and it has no <unk> token"
                raise DataError(f"{path}, line {int(numbers[e.index])}: {shown!r} is not a token of "
                                f"this model ({known})") from None
            chunks.append(ids if max(tokeniser.size, source_tokeniser.size) >= 2**15
                          else ids.to(torch.int16))  # half the memory
            lengths.append(counts)
        lines.append(numbers)
    size = path.stat().st_size
    if not lines:
        if size == 0:
            raise DataError(f"{path} is empty: a data file holds one source/target pair per line")
        raise DataError(f"{path} holds no pairs (only blank lines or a header)")
    if max(tokeniser.size, source_tokeniser.size) >= 2**15:  # outgrew int16 part way: one dtype
        for chunks, _ in sides.values():
            chunks[:] = [c.to(torch.int32) for c in chunks]
    data = PairData(Side.from_chunks(*sides["source"]), Side.from_chunks(*sides["target"]), torch.cat(lines),
                    texts)
    provenance = Provenance(path.name, str(path), size, digest.hexdigest(), file_format(path), len(data))
    unknown = tokeniser.unknown + (source_tokeniser.unknown if source_tokeniser is not tokeniser else 0)
    return Loaded(data, provenance, tokeniser.tokens, unknown)


def count_tokens(data: PairData, pairs: torch.Tensor, n_tokens: int) -> torch.Tensor:
    """(n_tokens,) how often each (provisional) id occurs on either side of `pairs` (bool, (n,)):
    every token counted, minus those of the pairs left out (the few held out)."""
    counts = torch.zeros(n_tokens, dtype=torch.int64)
    left_out = (~pairs).nonzero().flatten()
    for side in (data.source, data.target):
        for start in range(0, len(side.ids), REMAP_SPAN):
            counts += torch.bincount(side.ids[start : start + REMAP_SPAN], minlength=n_tokens)
        if len(left_out):
            rows = side.rows(left_out, -1)
            counts -= torch.bincount(rows[rows >= 0], minlength=n_tokens)
    return counts


def renumber(data: PairData, tokens: list[str], counts: torch.Tensor, level: str,
             max_tokens: int = 50_000) -> tuple[PairData, Vocab, int]:
    """Provisional ids -> a vocabulary built from `counts` (the training pairs'); tokens it
    leaves out (unseen in training, too long, beyond max_tokens) read as UNK. Renumbers in
    place where the dtype allows. Returns the data, the vocabulary, and how many distinct
    tokens it left out."""
    vocab, left_out = build_vocab(dict(zip(tokens, counts.tolist())), level, max_tokens)
    final = {t: i for i, t in enumerate(vocab.tokens) if t not in RESERVED_TOKENS}
    table = torch.tensor([final.get(t, vocab.unk) for t in tokens] or [vocab.unk], dtype=torch.int32)

    dtype = torch.int16 if vocab.size < 2**15 else torch.int32

    def remap(side: Side) -> Side:
        target = side.ids if side.ids.dtype == dtype else torch.empty(len(side.ids), dtype=dtype)
        for start in range(0, len(side.ids), REMAP_SPAN):
            span = slice(start, start + REMAP_SPAN)
            target[span] = table[side.ids[span].int()].to(target.dtype)
        return Side(target, side.offsets)

    return PairData(remap(data.source), remap(data.target), data.lines), vocab, left_out
