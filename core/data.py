"""Files of source/target pairs: reading TSV, CSV and JSONL, and turning their text into ids.

A data file is untrusted input like a checkpoint: every problem is a DataError whose message is
one line naming the file (and the line, when one is to blame). Reading is streamed and the
tokens are kept as flat id arrays (2 bytes a token for vocabularies under 32,768), never as
Python lists per pair, so a million pairs load in seconds and in memory close to the size of
their text (benchmarks/data_load.py measures both).

Formats, chosen by the file's suffix (anything else is read as TSV):
- .tsv/.txt: `source<TAB>target` per line, an optional `source<TAB>target` header;
- .csv: two columns through the csv module (quoted fields may hold commas, quotes, newlines);
- .jsonl/.ndjson: one `{"source": ..., "target": ...}` object per line.
Blank lines are skipped; surrounding whitespace of a field is dropped (core/vocab.py).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from minitx.core.vocab import SPECIAL_NAMES, Vocab, build_vocab

CHUNK = 50_000  # pairs tokenised at a time: bounds the Python strings alive at once
MAX_CODEPOINT = 0x110000
SUFFIXES = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


class DataError(ValueError):
    """A data file that cannot be used; str(e) is one line naming the file (and line)."""

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()))


def file_format(path: str | os.PathLike) -> str:
    return SUFFIXES.get(Path(path).suffix.lower(), "tsv")


@dataclass(frozen=True)
class Provenance:
    """Which file a model was trained (or evaluated) on: enough to refuse another one."""

    file: str  # the name (without folders)
    path: str  # as given on the command line
    size: int  # bytes
    sha256: str
    format: str
    pairs: int  # pairs read

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def short(self) -> str:
        return f"{self.file} ({self.pairs:,} pairs, sha256 {self.sha256[:12]}…)"


# ---------------------------------------------------------------------------------------------
# Reading text


def _open(path: Path):
    if not path.exists():
        raise DataError(f"no such file: {path}")
    if path.is_dir():
        raise DataError(f"{path} is a directory, not a data file")
    try:
        return open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None


def _lines(path: Path, digest) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of every line, decoded as UTF-8."""
    with _open(path) as f:
        for number, raw in enumerate(f, 1):
            digest.update(raw)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}, line {number}: not UTF-8 text (byte 0x{raw[e.start]:02x} "
                                f"at column {e.start + 1})") from None
            if number == 1:
                text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
            yield number, text


def sha256_of(path: str | os.PathLike) -> str:
    """The file's sha256 (hex), read in blocks; DataError when it cannot be read."""
    digest = hashlib.sha256()
    with _open(Path(path)) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_header(fields: list[str]) -> bool:
    return [f.strip().lower() for f in fields] == ["source", "target"]


def _tsv(path: Path, digest) -> Iterator[tuple[int, str, str]]:
    first = True
    for number, line in _lines(path, digest):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            if len(fields) == 1:
                raise DataError(f"{path}, line {number}: no tab; a TSV line is source<TAB>target")
            raise DataError(f"{path}, line {number}: {len(fields)} tab-separated fields; "
                            "a pair has 2 (source<TAB>target)")
        if first and _is_header(fields):
            first = False
            continue
        first = False
        yield number, fields[0], fields[1]


def _csv(path: Path, digest) -> Iterator[tuple[int, str, str]]:
    numbered = _lines(path, digest)
    where = {"line": 0}

    def texts():
        for number, text in numbered:
            where["line"] = number
            yield text

    reader = csv.reader(texts())
    first = True
    try:
        for row in reader:
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) != 2:
                columns = f"{len(row)} column{'s' if len(row) != 1 else ''}"
                raise DataError(f"{path}, line {where['line']}: {columns}; a pair has 2 (source,target)")
            if first and _is_header(row):
                first = False
                continue
            first = False
            yield where["line"], row[0], row[1]
    except csv.Error as e:
        raise DataError(f"{path}, line {where['line']}: not valid CSV ({e})") from None


def _jsonl(path: Path, digest) -> Iterator[tuple[int, str, str]]:
    for number, line in _lines(path, digest):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as e:
            reason = str(e).split(":")[0] if str(e) else type(e).__name__
            raise DataError(f"{path}, line {number}: not valid JSON ({reason})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}, line {number}: not a JSON object with \"source\" and \"target\"")
        for key in ("source", "target"):
            if key not in record:
                raise DataError(f"{path}, line {number}: no \"{key}\" field")
            if not isinstance(record[key], str):
                raise DataError(f"{path}, line {number}: \"{key}\" is not a string")
        yield number, record["source"], record["target"]


READERS = {"tsv": _tsv, "csv": _csv, "jsonl": _jsonl}


def read_text_pairs(path: str | os.PathLike, digest=None) -> Iterator[tuple[int, str, str]]:
    """(line number, source, target) of every pair, stripped; DataError at the first problem."""
    path = Path(path)
    digest = digest if digest is not None else hashlib.sha256()
    for number, source, target in READERS[file_format(path)](path, digest):
        source, target = source.strip(), target.strip()
        if not source:
            raise DataError(f"{path}, line {number}: the source is empty")
        if not target:
            raise DataError(f"{path}, line {number}: the target is empty")
        yield number, source, target


# ---------------------------------------------------------------------------------------------
# Text -> ids


class _Tokeniser:
    """Text -> ids, chunk by chunk. Growing (vocab None): every new token gets the next
    provisional id, to be renumbered once the vocabulary is known. Fixed (a vocab): unknown
    tokens become UNK and are counted."""

    def __init__(self, level: str, vocab: Vocab | None = None) -> None:
        self.level, self.vocab = level, vocab
        self.unknown = 0
        self.tokens: list[str] = []  # provisional id -> token (growing mode)
        if level == "char":
            self.table = torch.full((MAX_CODEPOINT,), -1, dtype=torch.int32)
            if vocab is not None:
                for i in vocab.real_ids():
                    self.table[ord(vocab.tokens[i])] = i
        else:
            self.ids: dict[str, int] = {}
            if vocab is not None:
                self.ids = {vocab.tokens[i]: i for i in vocab.real_ids()}

    def encode(self, texts: list[str]) -> tuple[torch.Tensor, list[int]]:
        """-> (flat ids, int32, the texts' tokens one after another; the number of each's)."""
        if self.level == "char":
            lengths = [len(t) for t in texts]
            codepoints = torch.frombuffer(bytearray("".join(texts).encode("utf-32-le")), dtype=torch.int32)
            ids = self.table[codepoints]
            missing = ids < 0
            if bool(missing.any()):
                if self.vocab is None:
                    new = codepoints[missing].unique()
                    self.table[new] = torch.arange(len(self.tokens), len(self.tokens) + len(new),
                                                   dtype=torch.int32)
                    self.tokens.extend(chr(c) for c in new.tolist())
                    ids = self.table[codepoints]
                else:
                    self.unknown += int(missing.sum())
                    ids[missing] = self.vocab.unk
            return ids, lengths
        flat, lengths = [], []
        split = str.split if self.level == "word" else self.vocab.split  # digits: "3 1 4" or "314"
        for number, text in enumerate(texts):
            words = split(text)
            lengths.append(len(words))
            for word in words:
                i = self.ids.get(word)
                if i is None:
                    if self.vocab is None:
                        i = self.ids[word] = len(self.tokens)
                        self.tokens.append(word)
                    elif self.vocab.unk is None:  # the digits vocabulary has no UNK to read it as
                        raise _Unreadable(number, word)
                    else:
                        self.unknown += 1
                        i = self.vocab.unk
                flat.append(i)
        return torch.tensor(flat, dtype=torch.int32), lengths


class _Unreadable(Exception):
    """Text `index` of a chunk holds `token`, which a vocabulary without UNK cannot read."""

    def __init__(self, index: int, token: str) -> None:
        self.index, self.token = index, token


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
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        flat = torch.tensor([i for r in rows for i in r], dtype=torch.int32)
        return cls(flat, offsets)


@dataclass
class PairData:
    """Many pairs as ids: `source` and `target` sides, and the file line each came from."""

    source: Side
    target: Side
    lines: torch.Tensor  # (pairs,) int32

    def __len__(self) -> int:
        return len(self.lines)


@dataclass
class Loaded:
    data: PairData
    provenance: Provenance
    tokens: list[str]  # provisional id -> token (growing mode); empty with a fixed vocabulary
    unknown: int  # tokens read as UNK (fixed vocabulary)


def _side(chunks: list[torch.Tensor], lengths: list[int]) -> Side:
    ids = torch.cat(chunks) if chunks else torch.zeros(0, dtype=torch.int32)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.tensor(lengths, dtype=torch.int64).cumsum(0)
    return Side(ids, offsets)


def load(path: str | os.PathLike, level: str, vocab: Vocab | None = None) -> Loaded:
    """Read and tokenise a whole file. Without `vocab`, ids are provisional (see Loaded.tokens
    and `renumber`); with it, they are the vocabulary's and unknown tokens are UNK."""
    path = Path(path)
    digest = hashlib.sha256()
    tokeniser = _Tokeniser(level, vocab)
    src_chunks, tgt_chunks, src_lengths, tgt_lengths, lines = [], [], [], [], []
    sources, targets = [], []

    def flush() -> None:
        sides = ((sources, src_chunks, src_lengths), (targets, tgt_chunks, tgt_lengths))
        first = len(lines) - len(sources)  # this chunk's first pair
        for texts, chunks, lengths in sides:
            try:
                ids, counts = tokeniser.encode(texts)
            except _Unreadable as e:
                line = lines[first + e.index]
                shown = e.token if len(e.token) <= 12 else e.token[:12] + "…"
                raise DataError(f"{path}, line {line}: {shown!r} is not a token of this model "
                                "(digits 0-9 only)") from None
            chunks.append(_compact(ids, len(tokeniser.tokens) if vocab is None else vocab.size))
            lengths.extend(counts)
            texts.clear()

    for number, source, target in read_text_pairs(path, digest):
        sources.append(source)
        targets.append(target)
        lines.append(number)
        if len(sources) == CHUNK:
            flush()
    if sources:
        flush()
    size = path.stat().st_size
    if not lines:
        if size == 0:
            raise DataError(f"{path} is empty: a data file holds one source/target pair per line")
        raise DataError(f"{path} holds no pairs (only blank lines or a header)")
    data = PairData(_side(src_chunks, src_lengths), _side(tgt_chunks, tgt_lengths),
                    torch.tensor(lines, dtype=torch.int32))
    provenance = Provenance(path.name, str(path), size, digest.hexdigest(), file_format(path), len(lines))
    return Loaded(data, provenance, tokeniser.tokens, tokeniser.unknown)


def _compact(ids: torch.Tensor, vocabulary_size: int) -> torch.Tensor:
    """int16 when every id fits (half the memory), else int32."""
    return ids.to(torch.int16) if vocabulary_size < 2**15 else ids


def count_tokens(data: PairData, pairs: torch.Tensor, n_tokens: int) -> torch.Tensor:
    """(n_tokens,) how often each (provisional) id occurs on either side of `pairs` (bool, (n,))."""
    counts = torch.zeros(n_tokens, dtype=torch.int64)
    for side in (data.source, data.target):
        owner = torch.repeat_interleave(pairs, side.lengths)  # (tokens,): is the token's pair counted
        counts += torch.bincount(side.ids[owner].long(), minlength=n_tokens)
    return counts


def renumber(data: PairData, tokens: list[str], counts: torch.Tensor, level: str,
             max_tokens: int = 50_000) -> tuple[PairData, Vocab, int]:
    """Provisional ids -> a vocabulary built from `counts` (the training pairs'); tokens it
    leaves out (unseen in training, too long, beyond max_tokens) read as UNK. Returns the data
    in final ids, the vocabulary, and how many distinct tokens it left out."""
    vocab, left_out = build_vocab(dict(zip(tokens, counts.tolist())), level, max_tokens)
    final = {t: i for i, t in enumerate(vocab.tokens) if t not in SPECIAL_NAMES}
    table = torch.tensor([final.get(t, vocab.unk) for t in tokens] or [vocab.unk], dtype=torch.int32)

    def remap(side: Side) -> Side:
        chunks = [_compact(table[side.ids[i : i + (1 << 22)].long()], vocab.size)
                  for i in range(0, len(side.ids), 1 << 22)]  # bounded temporaries
        return Side(torch.cat(chunks) if chunks else side.ids, side.offsets)

    return PairData(remap(data.source), remap(data.target), data.lines), vocab, left_out
