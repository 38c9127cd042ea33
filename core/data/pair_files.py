"""Files of source/target pairs: reading TSV, CSV and JSONL (core/data/pair_ids.py turns the text
into ids).

A data file is untrusted input like a checkpoint: every problem is a DataError whose message is
one line naming the file (and the line, when one is to blame). Reading is streamed in chunks of
pairs; TSV, the common case, is read in blocks of bytes with one decode and one split per block
(benchmarks/data_load.py measures a million pairs).

Formats, chosen by the file's suffix (anything else is read as TSV):
- .tsv/.txt: `source<TAB>target` per line, an optional `source<TAB>target` header;
- .csv: two columns through the csv module (quoted fields may hold commas, quotes, newlines);
- .jsonl/.ndjson: one `{"source": ..., "target": ...}` object per line.
Blank lines are skipped; surrounding whitespace of a field is dropped (core/data/vocab.py).
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

CHUNK = 50_000  # pairs handed on at a time (CSV, JSONL): bounds the Python strings alive at once
BLOCK = 4 << 20  # bytes of TSV read at a time (~100,000 short lines)
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


def _decode(block: bytes, path: Path, first_line: int) -> str:
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + block.count(b"\n", 0, e.start)
        column = e.start - (block.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}, line {line}: not UTF-8 text (byte 0x{block[e.start]:02x} at "
                        f"column {column})") from None


def _blocks(path: Path, digest) -> Iterator[tuple[int, str]]:
    """(number of the first line, whole lines joined by \\n without the last one's) per block."""
    first_line, carry = 1, b""
    with _open(path) as f:
        while True:
            data = f.read(BLOCK)
            digest.update(data)
            block = carry + data
            cut = len(block) if not data else block.rfind(b"\n") + 1  # the last block: all of it
            carry, block = block[cut:], block[:cut]
            if block:
                text = _decode(block, path, first_line)
                if first_line == 1:
                    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
                text = text.removesuffix("\n")
                yield first_line, text
                first_line += text.count("\n") + 1
            if not data:
                return


def _tsv(path: Path, digest) -> Iterator[tuple[torch.Tensor, list[str], list[str]]]:
    """Chunks of (line numbers, sources, targets). A block whose lines all hold one tab is split
    in one call (a split per line is 3-4x slower); blank lines, a header and errors are found
    from each line's tab count."""
    header_possible = True
    for first, text in _blocks(path, digest):
        lines = text.split("\n")
        tabs = [line.count("\t") for line in lines]
        skip = set()
        for i in (i for i, n in enumerate(tabs) if n != 1):
            if not lines[i].strip():
                skip.add(i)  # a blank line
            elif tabs[i] == 0:
                raise DataError(f"{path}, line {first + i}: no tab; a TSV line is source<TAB>target")
            else:
                raise DataError(f"{path}, line {first + i}: {tabs[i] + 1} tab-separated fields; a pair "
                                "has 2 (source<TAB>target)")
        if header_possible:
            start = next((i for i in range(len(lines)) if i not in skip), None)
            if start is not None:
                header_possible = False
                if _is_header(lines[start].split("\t")):
                    skip.add(start)
        numbers = torch.arange(first, first + len(lines), dtype=torch.int32)
        if skip:
            keep = [i for i in range(len(lines)) if i not in skip]
            numbers, text = numbers[keep], "\n".join(lines[i] for i in keep)
        if len(numbers):
            fields = text.replace("\n", "\t").split("\t")  # source, target, source, target, ...
            yield numbers, fields[0::2], fields[1::2]


def _csv_pairs(path: Path, digest) -> Iterator[tuple[int, str, str]]:
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


def _jsonl_pairs(path: Path, digest) -> Iterator[tuple[int, str, str]]:
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


def _chunked(pairs: Iterator[tuple[int, str, str]]) -> Iterator[tuple[torch.Tensor, list[str], list[str]]]:
    numbers, sources, targets = [], [], []
    for number, source, target in pairs:
        numbers.append(number)
        sources.append(source)
        targets.append(target)
        if len(numbers) == CHUNK:
            yield torch.tensor(numbers, dtype=torch.int32), sources, targets
            numbers, sources, targets = [], [], []
    if numbers:
        yield torch.tensor(numbers, dtype=torch.int32), sources, targets


READERS = {"tsv": _tsv, "csv": lambda path, digest: _chunked(_csv_pairs(path, digest)),
           "jsonl": lambda path, digest: _chunked(_jsonl_pairs(path, digest))}


def read_chunks(path: str | os.PathLike, digest=None) -> Iterator[tuple[torch.Tensor, list[str], list[str]]]:
    """Chunks of (line numbers (int32), sources, targets) of every pair, each field stripped of
    surrounding whitespace; DataError at the first problem."""
    path = Path(path)
    digest = digest if digest is not None else hashlib.sha256()
    for numbers, sources, targets in READERS[file_format(path)](path, digest):
        sources = [t.strip() for t in sources]
        targets = [t.strip() for t in targets]
        for side, texts in (("source", sources), ("target", targets)):
            if not all(texts):
                i = texts.index("")
                raise DataError(f"{path}, line {int(numbers[i])}: the {side} is empty")
        yield numbers, sources, targets


def read_text_pairs(path: str | os.PathLike, digest=None) -> Iterator[tuple[int, str, str]]:
    """(line number, source, target) of every pair: read_chunks one pair at a time."""
    for numbers, sources, targets in read_chunks(path, digest):
        yield from zip(numbers.tolist(), sources, targets)
