"""Files of source/target pairs: reading TSV, CSV and JSONL (core/data/pair_ids.py turns the text
into ids).

A data file is untrusted input like a checkpoint: every problem is a DataError whose message is
one line naming the file (and the line, when one is to blame). Reading is streamed in chunks of
pairs; TSV, the common case, is read in blocks of bytes with one decode and one split per block
(benchmarks/data_load.py measures a million pairs).

Formats, chosen by the file's suffix (anything else is read as TSV):
- .tsv/.txt: `source<TAB>target` per line, an optional header;
- .csv: columns through the csv module (quoted fields may hold commas, quotes, newlines), an
  optional header;
- .jsonl/.ndjson: one object per line: `{"source": ..., "target": ...}`, or a translation record as
  the Hub's translation sets hold them, `{"translation": {"en": ..., "fr": ...}}` (or the language
  keys at the top), its sides picked by the languages (Columns);
- .parquet: as the Hub stores translation sets: a `translation` column of language-keyed records,
  or text columns named `source`/`target` or by the languages (through pyarrow, an extra).
Blank lines are skipped; surrounding whitespace of a field is dropped (core/data/vocab.py).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from minitx.core.wording import counted

CHUNK = 50_000  # pairs handed on at a time (CSV, JSONL): bounds the Python strings alive at once
BLOCK = 4 << 20  # bytes of TSV read at a time (~100,000 short lines)
SUFFIXES = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl",
            ".parquet": "parquet"}
SIDES = ("source", "target")
# A first row that is a header, not a pair: each cell a column name (source, src, input, ...) or a
# language code as the Hub's sets name their columns (en, fr, en_XX, eng_Latn, pt-BR, zh-Hant): an
# ISO 639-1 code, or a 639-3 one of ISO_639_1 below, with an optional script or region.
COLUMN_NAMES = frozenset({"source", "target", "src", "tgt", "trg", "input", "output", "text", "translation",
                          "original", "reference", "ref", "hypothesis", "prompt", "completion", "label"})
LANGUAGE_CODE = re.compile(r"([a-z]{2,3})(?:[_-][A-Za-z]{2,4})?")
ISO_639_1_CODES = frozenset((
    "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de "
    "dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id "
    "ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu "
    "lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu "
    "rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr "
    "ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu").split())
# ISO 639-3 (as NLLB-200's codes begin: eng_Latn) -> ISO 639-1 (as the Hub's sets name their keys:
# en), for the languages that have a two-letter code; NLLB's zho_Hans/zho_Hant are both zh.
ISO_639_1 = dict(pair.split(":") for pair in (
    "afr:af amh:am arb:ar ara:ar asm:as azj:az bak:ba bel:be ben:bn bod:bo bos:bs bul:bg cat:ca ces:cs "
    "cym:cy dan:da deu:de ell:el eng:en epo:eo est:et eus:eu ewe:ee fao:fo fin:fi fra:fr gla:gd gle:ga "
    "glg:gl guj:gu hat:ht hau:ha heb:he hin:hi hrv:hr hun:hu hye:hy ibo:ig ind:id isl:is ita:it jav:jv "
    "jpn:ja kan:kn kat:ka kaz:kk khm:km kin:rw kir:ky kor:ko lao:lo lit:lt ltz:lb lug:lg lvs:lv lav:lv "
    "mal:ml mar:mr mkd:mk mlt:mt mri:mi mya:my nld:nl nno:nn nob:nb nor:no npi:ne nep:ne nya:ny oci:oc "
    "ory:or pan:pa pbt:ps pus:ps pes:fa fas:fa pol:pl por:pt ron:ro rus:ru san:sa sin:si slk:sk slv:sl "
    "smo:sm sna:sn snd:sd som:so spa:es sqi:sq als:sq srp:sr sun:su swe:sv swh:sw swa:sw tam:ta tat:tt "
    "tel:te tgk:tg tgl:tl tha:th tir:ti tsn:tn tur:tr uig:ug ukr:uk urd:ur uzn:uz uzb:uz vie:vi wol:wo "
    "xho:xh yid:yi ydd:yi yor:yo zho:zh zsm:ms msa:ms zul:zu").split())


class DataError(ValueError):
    """A data file that cannot be used; str(e) is one line naming the file (and line)."""

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()))


def file_format(path: str | os.PathLike) -> str:
    return SUFFIXES.get(Path(path).suffix.lower(), "tsv")


@dataclass(frozen=True)
class Columns:
    """Which fields of a file are the source and the target. A record's `source`/`target` keys, a
    header's `source`/`target` columns, or the first and second column; with languages given
    (`--src-lang`/`--tgt-lang`), the keys or columns named by them (`key`), as a Hub translation
    set's `{"translation": {"en": ..., "fr": ...}}` records and `en,fr` headers name them."""

    source: str | None = None  # the source's language (a code as the model or the data spells it)
    target: str | None = None

    def languages(self) -> tuple[str | None, str | None]:
        return self.source, self.target

    def key(self, side: str, keys) -> str | None:
        """The key of `keys` (a record's or a header's) holding `side`: its language exactly, else
        the language's first part (`en_XX`, `en-GB` -> `en`) or that part's two-letter code
        (NLLB's `eng_Latn` -> `en`), else the side's name; None if none."""
        keys = list(keys)
        language = self.source if side == "source" else self.target
        first = re.split(r"[_-]", language)[0] if language else ""
        candidates = [side] if language is None else [language, first, ISO_639_1.get(first.lower(), first),
                                                      side]
        lowered = {str(k).lower(): k for k in keys}
        return next((lowered[c.lower()] for c in candidates if c.lower() in lowered), None)

    def keys(self, keys, where: str) -> tuple[str, str]:
        """(source key, target key) of a record's or header's `keys`; DataError (naming `where`)
        when a side has none."""
        found = tuple(self.key(side, keys) for side in SIDES)
        for side, key, language in zip(SIDES, found, self.languages()):
            if key is None:
                shown = ", ".join(str(k) for k in keys) if keys else "none"
                if language is None:
                    raise DataError(f"{where}: no \"{side}\" field (the fields: {shown}); name the languages "
                                    "with --src-lang and --tgt-lang")
                raise DataError(f"{where}: no {language!r} field for the {side} (the fields: {shown})")
        if found[0] == found[1]:
            raise DataError(f"{where}: the source and the target are the same field ({found[0]!r})")
        return found


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


BY_NAME = Columns()  # the sides by name: `source`/`target` keys or header, else the first two columns


def _is_header(fields: list[str], columns: Columns) -> bool:
    """Whether a first row names its columns: each cell a column name or a language code (or one
    of the languages given), never a pair read as one (`en,de` heading a CSV is a header)."""
    cells = [f.strip() for f in fields]
    named = {c.lower() for c in columns.languages() if c}
    return len(cells) >= 2 and len(set(cells)) == len(cells) and all(
        c.lower() in COLUMN_NAMES or c.lower() in named or _is_language_code(c) for c in cells)


def _is_language_code(cell: str) -> bool:
    """`en`, `pt-BR`, `en_XX`, `eng_Latn`: a known code with an optional script or region (so a
    pair of short words such as `ab<TAB>cde` is never taken for a header)."""
    match = LANGUAGE_CODE.fullmatch(cell)
    return match is not None and (match.group(1) in ISO_639_1_CODES or match.group(1) in ISO_639_1)


def _header_columns(path: Path, line: int, header: list[str], columns: Columns) -> tuple[int, int]:
    """(source column, target column) a header names: by the languages given, else `source` and
    `target`, else the first two of a two-column header."""
    cells = [c.strip() for c in header]
    if columns.languages() == (None, None) and not {"source", "target"} <= {c.lower() for c in cells}:
        if len(cells) == 2:
            return 0, 1
        raise DataError(f"{path}, line {line}: the header names {len(cells)} columns ({', '.join(cells)}); "
                        "say which are the source and the target with --src-lang and --tgt-lang")
    source, target = columns.keys(cells, f"{path}, line {line} (the header)")
    return cells.index(source), cells.index(target)


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


def _tsv(path: Path, digest, columns: Columns) -> Iterator[tuple[torch.Tensor, list[str], list[str]]]:
    """Chunks of (line numbers, sources, targets). A block whose lines all hold one tab is split
    in one call (a split per line is 3-4x slower); blank lines, a header and errors are found
    from each line's tab count. A header may name the columns the other way round."""
    header_possible, swapped = True, False
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
                cells = lines[start].split("\t")
                if _is_header(cells, columns):
                    skip.add(start)
                    swapped = _header_columns(path, first + start, cells, columns) == (1, 0)
        numbers = torch.arange(first, first + len(lines), dtype=torch.int32)
        if skip:
            keep = [i for i in range(len(lines)) if i not in skip]
            numbers, text = numbers[keep], "\n".join(lines[i] for i in keep)
        if len(numbers):
            fields = text.replace("\n", "\t").split("\t")  # source, target, source, target, ...
            sources, targets = fields[0::2], fields[1::2]
            yield (numbers, targets, sources) if swapped else (numbers, sources, targets)


def _csv_pairs(path: Path, digest, columns: Columns) -> Iterator[tuple[int, str, str]]:
    numbered = _lines(path, digest)
    where = {"line": 0}

    def texts():
        for number, text in numbered:
            where["line"] = number
            yield text

    reader = csv.reader(texts())
    first, picked, width = True, (0, 1), 2
    try:
        for row in reader:
            if not row or not any(cell.strip() for cell in row):
                continue
            if first and _is_header(row, columns):
                first = False
                picked, width = _header_columns(path, where["line"], row, columns), len(row)
                continue
            first = False
            if len(row) != width:
                columns_read = counted(len(row), "column")
                wanted = "a pair has 2 (source,target)" if width == 2 else f"the header names {width}"
                raise DataError(f"{path}, line {where['line']}: {columns_read}; {wanted}")
            yield where["line"], row[picked[0]], row[picked[1]]
    except csv.Error as e:
        raise DataError(f"{path}, line {where['line']}: not valid CSV ({e})") from None


def _named(key: str, side: str) -> str:
    """A field as an error names it: `"target"`, or `"fr" (the target)`."""
    return f'"{key}"' if key == side else f'"{key}" (the {side})'


def _record_sides(record, columns: Columns, where: str) -> tuple[str, str]:
    """(source, target) of one record: `{"source", "target"}`, or a translation record
    (`{"translation": {"en": ..., "fr": ...}}`, or the language keys at the top)."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: not a JSON object with \"source\" and \"target\" (or \"translation\")")
    inner = record.get("translation")
    if isinstance(inner, dict) and not ("source" in record and "target" in record):
        record, where = inner, f"{where}, \"translation\""
    keys = columns.keys(list(record), where)
    for side, key in zip(SIDES, keys):
        if not isinstance(record[key], str):
            raise DataError(f"{where}: {_named(key, side)} is not a string")
    return record[keys[0]], record[keys[1]]


def _jsonl_pairs(path: Path, digest, columns: Columns) -> Iterator[tuple[int, str, str]]:
    for number, line in _lines(path, digest):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as e:
            reason = str(e).split(":")[0] if str(e) else type(e).__name__
            raise DataError(f"{path}, line {number}: not valid JSON ({reason})") from None
        yield (number, *_record_sides(record, columns, f"{path}, line {number}"))


def _parquet(path: Path, digest, columns: Columns) -> Iterator[tuple[torch.Tensor, list[str], list[str]]]:
    """Chunks of a parquet file, as the Hub stores translation sets: a `translation` column of
    language-keyed records, or text columns (`source`/`target`, or named by the languages). Its
    rows are numbered from 1 where a text file has lines."""
    try:
        import pyarrow.parquet as pq  # an extra: only a parquet file needs it
    except ImportError:
        raise DataError(f"{path}: reading parquet needs pyarrow: pip install 'minitx[parquet]'") from None
    with _open(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    try:
        table = pq.ParquetFile(path)
        names = table.schema_arrow.names
    except Exception as e:  # pyarrow's errors have no common base worth naming
        raise DataError(f"{path}: not a readable parquet file ({str(e).splitlines()[0][:120]})") from None
    if "translation" in names and not {"source", "target"} <= set(names):
        chosen, nested = ["translation"], True
    else:
        chosen, nested = list(columns.keys(names, f"{path} (its columns)")), False
    row = 1
    for batch in table.iter_batches(batch_size=CHUNK, columns=chosen):
        if nested:
            records = batch.column(0).to_pylist()
            pairs = [_record_sides(r, columns, f"{path}, row {row + i}, \"translation\"")
                     if isinstance(r, dict) else _record_sides(r, columns, f"{path}, row {row + i}")
                     for i, r in enumerate(records)]
            sources, targets = [p[0] for p in pairs], [p[1] for p in pairs]
        else:
            sources, targets = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            for side, key, texts in zip(SIDES, chosen, (sources, targets)):
                bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
                if bad is not None:
                    raise DataError(f"{path}, row {row + bad}: {_named(key, side)} is not a string")
        yield torch.arange(row, row + len(sources), dtype=torch.int32), sources, targets
        row += len(sources)


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


READERS = {"tsv": _tsv, "csv": lambda path, digest, columns: _chunked(_csv_pairs(path, digest, columns)),
           "jsonl": lambda path, digest, columns: _chunked(_jsonl_pairs(path, digest, columns)),
           "parquet": _parquet}


def read_chunks(path: str | os.PathLike, digest=None, columns: Columns = BY_NAME,
                ) -> Iterator[tuple[torch.Tensor, list[str], list[str]]]:
    """Chunks of (line numbers (int32), sources, targets) of every pair, each field stripped of
    surrounding whitespace, its sides picked by `columns`; DataError at the first problem."""
    path = Path(path)
    digest = digest if digest is not None else hashlib.sha256()
    for numbers, sources, targets in READERS[file_format(path)](path, digest, columns):
        sources = [t.strip() for t in sources]
        targets = [t.strip() for t in targets]
        for side, texts in (("source", sources), ("target", targets)):
            if not all(texts):
                i = texts.index("")
                raise DataError(f"{path}, line {int(numbers[i])}: the {side} is empty")
        yield numbers, sources, targets


def read_text_pairs(path: str | os.PathLike, digest=None, columns: Columns = BY_NAME,
                    ) -> Iterator[tuple[int, str, str]]:
    """(line number, source, target) of every pair: read_chunks one pair at a time."""
    for numbers, sources, targets in read_chunks(path, digest, columns):
        yield from zip(numbers.tolist(), sources, targets)
