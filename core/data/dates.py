"""The `dates` task's data: human-written dates in many formats -> ISO 8601, from `datetime`.

"Tuesday, 1 December 2026", "1 dec 26", "12/01/2026", "December 1st, 2026", ... -> "2026-12-01".
Every example is drawn from a torch.Generator (no download, no file): a day between 1950-01-01
and 2049-12-31, a format, and a letter case. Two-digit years are unambiguous in that range
(50-99 are 19xx, 00-49 are 20xx), and so is every format: slashes are month first (US), dots
day first (European), and a four-digit year first means year-month-day.

Each example also records which source characters hold the year, the month and the day, so the
task knows the alignment a trained model should show: the output's year reads the source's
year, wherever that is, and so on; the weekday is a distraction no output needs.
"""

from __future__ import annotations

import calendar
import datetime
import re
from dataclasses import dataclass

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.task import Task
from minitx.core.data.vocab import RESERVED_TOKENS, Vocab

FIRST_DAY = datetime.date(1950, 1, 1)
DAYS = (datetime.date(2049, 12, 31) - FIRST_DAY).days + 1
TARGET_LENGTH = 10  # YYYY-MM-DD
TARGET_FIELDS = ("year",) * 4 + (None,) + ("month",) * 2 + (None,) + ("day",) * 2  # per output char

# {name} placeholders: the field each fills (None: no output needs it).
FIELDS = {"WD": None, "wd": None, "MONTH": "month", "mon": "month", "m": "month", "mm": "month",
          "d": "day", "dd": "day", "dth": "day", "yyyy": "year", "yy": "year"}
FORMATS = (
    "{WD}, {d} {MONTH} {yyyy}",  # Tuesday, 1 December 2026
    "{d} {mon} {yy}",  # 1 Dec 26
    "{mm}/{dd}/{yyyy}",  # 12/01/2026
    "{MONTH} {dth}, {yyyy}",  # December 1st, 2026
    "{d} {MONTH} {yyyy}",  # 1 December 2026
    "{mon} {d}, {yyyy}",  # Dec 1, 2026
    "{dd}.{mm}.{yyyy}",  # 01.12.2026
    "{m}/{d}/{yy}",  # 12/1/26
    "{wd} {d} {mon} {yyyy}",  # Tue 1 Dec 2026
    "the {dth} of {MONTH}, {yyyy}",  # the 1st of December, 2026
    "{yyyy}-{mm}-{dd}",  # 2026-12-01
    "{yyyy}/{mm}/{dd}",  # 2026/12/01
    "{d}-{mon}-{yyyy}",  # 1-Dec-2026
    "{mon}. {d}, {yyyy}",  # Dec. 1, 2026
    "{WD}, {MONTH} {d}, {yyyy}",  # Tuesday, December 1, 2026
    "{d}.{m}.{yy}",  # 1.12.26
    "{dth} {MONTH} {yyyy}",  # 1st December 2026
    "{yyyy}{mm}{dd}",  # 20261201
    "{mon} {dd} {yyyy}",  # Dec 01 2026
    "{d} {MONTH}, {yyyy}",  # 1 December, 2026
)
CASES = ("as written", "lower", "upper")
CASE_CUTS = (0.6, 0.85)  # P(as written) = 0.6, P(lower) = 0.25, P(upper) = 0.15
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Example:
    source: str
    target: str
    spans: dict[str, tuple[int, int]]  # field -> [start, end) in the source


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _values(date: datetime.date) -> dict[str, str]:
    return {"WD": calendar.day_name[date.weekday()], "wd": calendar.day_abbr[date.weekday()],
            "MONTH": calendar.month_name[date.month], "mon": calendar.month_abbr[date.month],
            "m": str(date.month), "mm": f"{date.month:02d}", "d": str(date.day), "dd": f"{date.day:02d}",
            "dth": _ordinal(date.day), "yyyy": f"{date.year:04d}", "yy": f"{date.year % 100:02d}"}


def render(date: datetime.date, fmt: str, case: str = "as written") -> Example:
    """One example: `date` written in `fmt` (one of FORMATS) and `case`, with its field spans."""
    values = _values(date)
    parts, spans, at = [], {}, 0
    pieces = _PLACEHOLDER.split(fmt)  # literal, name, literal, name, ...
    for i, piece in enumerate(pieces):
        text = values[piece] if i % 2 else piece
        field = FIELDS[piece] if i % 2 else None
        if field is not None:
            spans[field] = (at, at + len(text))
        parts.append(text)
        at += len(text)
    source = "".join(parts)
    if case == "lower":
        source = source.lower()
    elif case == "upper":
        source = source.upper()
    return Example(source, date.isoformat(), spans)


def sample(n: int, generator: torch.Generator) -> list[Example]:
    """n examples drawn from `generator`: day, format and case uniformly per CASE_CUTS."""
    days = torch.randint(0, DAYS, (n,), generator=generator).tolist()
    formats = torch.randint(0, len(FORMATS), (n,), generator=generator).tolist()
    draws = torch.rand(n, generator=generator).tolist()
    return [render(FIRST_DAY + datetime.timedelta(days=day), FORMATS[f],
                   CASES[sum(u >= cut for cut in CASE_CUTS)])
            for day, f, u in zip(days, formats, draws)]


def batch_of(examples: list[Example], vocab: Vocab):
    """Examples -> a Batch with the expected alignment of every output position."""
    B = len(examples)
    S = max(len(e.source) for e in examples)
    ids = [vocab.encode(e.source)[0] for e in examples]
    src = torch.tensor([row + [vocab.pad] * (S - len(row)) for row in ids])  # (B, S)
    tgt = torch.full((B, TARGET_LENGTH + 2), vocab.pad, dtype=torch.long)
    tgt[:, 0] = vocab.sos
    tgt[:, 1 : TARGET_LENGTH + 1] = torch.tensor([vocab.encode(e.target)[0] for e in examples])
    tgt[:, TARGET_LENGTH + 1] = vocab.eos
    # (B, 3, 2): [start, end) of year, month, day; output char i reads the span of its field.
    spans = torch.tensor([[e.spans[f] for f in ("year", "month", "day")] for e in examples])
    field_of = torch.tensor([("year", "month", "day").index(f) if f else -1 for f in TARGET_FIELDS])
    start = spans[:, field_of.clamp(min=0), 0]  # (B, 10)
    end = spans[:, field_of.clamp(min=0), 1]
    j = torch.arange(S)[None, None, :]  # (1, 1, S)
    inside = (j >= start[:, :, None]) & (j < end[:, :, None]) & (field_of >= 0)[None, :, None]
    alignment = torch.zeros(B, TARGET_LENGTH + 1, S, dtype=torch.bool)  # the EOS row stays empty
    alignment[:, :TARGET_LENGTH] = inside  # (B, 10, S)
    lengths = torch.tensor([len(e.source) for e in examples])
    return Batch(src=src, tgt=tgt, lengths=lengths, alignment=alignment)


def _alphabet_and_lengths() -> tuple[str, tuple[int, int]]:
    """Every character any example can hold, and the shortest and longest source, from the
    values each placeholder can take (every name, every number width) in every case."""
    options = {name: set() for name in FIELDS}
    for offset in range(366):  # a leap year: every month, weekday and day
        for name, value in _values(datetime.date(2024, 1, 1) + datetime.timedelta(days=offset)).items():
            options[name].add(value)
    chars = set()
    literals = {piece for fmt in FORMATS for piece in _PLACEHOLDER.split(fmt)[::2]}
    for text in {v for values in options.values() for v in values} | literals:
        chars.update(text + text.lower() + text.upper())
    shortest = {name: min(map(len, values)) for name, values in options.items()}
    longest = {name: max(map(len, values)) for name, values in options.items()}

    def length(fmt: str, per_name: dict[str, int]) -> int:
        pieces = _PLACEHOLDER.split(fmt)
        return sum(len(p) for p in pieces[::2]) + sum(per_name[p] for p in pieces[1::2])

    return ("".join(sorted(chars)),
            (min(length(f, shortest) for f in FORMATS), max(length(f, longest) for f in FORMATS)))


ALPHABET, SOURCE_LENGTHS = _alphabet_and_lengths()
VOCAB = Vocab(RESERVED_TOKENS + tuple(ALPHABET), pad=0, sos=1, eos=2, unk=3, level="char")


class DatesTask(Task):
    """Human-written dates in many formats -> ISO 8601, generated from `datetime` .
    Endless like the digit tasks; the source lengths are the formats' own."""

    name = "dates"
    description = "human-written dates -> ISO 8601 (Tuesday, 1 December 2026 -> 2026-12-01)"
    alignment_name = "fields"  # year, month and day of the output read their own parts of the input
    vocab = VOCAB
    exact_lengths = False
    evaluated_on = "fresh dates"

    def __init__(self, min_len: int = 0, max_len: int = 0) -> None:
        super().__init__(*SOURCE_LENGTHS)  # the formats decide; the arguments are ignored

    def batch(self, batch_size, generator, min_len=None, max_len=None, length_power=0.0) -> Batch:
        examples = sample(batch_size, generator)  # the formats decide the lengths
        return batch_of(examples, self.vocab)

    def relabel(self, batch: Batch) -> Batch:
        return batch  # the targets came with the sources

    def expected_output(self, src_ids):
        return None  # typed text has no known date behind it

    def expected_alignment(self, batch: Batch) -> torch.Tensor | None:
        return batch.alignment

    def decode_cap(self, src_len: int, positions: int) -> int:
        return min(positions - 1, TARGET_LENGTH + 2)

    def example(self) -> str:
        return "Tuesday, 1 December 2026"  # the source of example_batch

    def example_batch(self) -> Batch:
        """An example of its own (a fixed date), as a batch of one with its target and spans."""
        return batch_of([render(datetime.date(2026, 12, 1), FORMATS[0])], self.vocab)
