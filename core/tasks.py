"""Sequence tasks: each makes vectorised batches, parses and prints sequences through its
vocabulary (core/vocab.py), and names the source positions it expects each output token to
attend to (its alignment).

The digit tasks (reverse, copy, sort) share the 13-token digits vocabulary: digits 0-9 are ids
0-9, then PAD, SOS, EOS. `dates` reads characters (core/dates.py); a data file of pairs is the
task "data" (core/pairs.py), with a vocabulary built from the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from minitx.core import dates
from minitx.core.vocab import DIGITS, TaskInputError, Vocab

__all__ = ["Batch", "Task", "TaskInputError", "TASKS", "DATA_TASK", "get_task", "task_from_dict"]

DATA_TASK = "data"  # the task of a model trained on a file of pairs


@dataclass(frozen=True)
class Batch:
    src: torch.Tensor  # (B, S) source ids, right-padded with PAD
    tgt: torch.Tensor  # (B, T + 2) SOS, output, EOS, then PAD (digit tasks: T = S)
    lengths: torch.Tensor  # (B,) source lengths
    alignment: torch.Tensor | None = None  # (B, T + 1, S) bool, when the data knows it (dates)

    @property
    def decoder_input(self) -> torch.Tensor:  # (B, S + 1): teacher forcing, shifted right
        return self.tgt[:, :-1]

    @property
    def labels(self) -> torch.Tensor:  # (B, T + 1)
        return self.tgt[:, 1:]

    def __len__(self) -> int:
        return self.src.shape[0]


def draw_lengths(count: int, lo: int, hi: int, generator: torch.Generator,
                 power: float = 0.0) -> torch.Tensor:
    """(count,) source lengths in lo..hi: each equally likely (power 0: torch.randint, the stream
    every earlier run drew), or length L with probability proportional to L ** power."""
    if not power:
        return torch.randint(lo, hi + 1, (count,), generator=generator)
    weights = torch.arange(lo, hi + 1, dtype=torch.float64) ** power  # (hi - lo + 1,)
    return lo + torch.multinomial(weights, count, replacement=True, generator=generator)


class Task:
    """Base class. Subclasses say how a source becomes its output (`transform`) and which
    source positions hold the token each output position should copy (`alignment`)."""

    name = ""
    description = ""
    alignment_name = ""  # what the cross-attention of a trained model looks like ("": unknown)
    vocab: Vocab = DIGITS
    exact_lengths = True  # batch() can draw sources of one given length (length buckets)
    evaluated_on = "fresh sequences"  # what its accuracy is measured on

    def __init__(self, min_len: int = 4, max_len: int = 10) -> None:
        if not 1 <= min_len <= max_len:
            raise ValueError(f"lengths: need 1 <= min_len <= max_len, got {min_len}-{max_len}")
        self.min_len = min_len
        self.max_len = max_len

    # -- the task itself -------------------------------------------------------------------
    def transform(self, digits: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, S) digits with PAD beyond each length -> (B, S) output digits, PAD beyond."""
        raise NotImplementedError

    def alignment(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, S) source -> (B, S, S) bool: [b, i, j] is True when output position i should
        attend to source position j. Rows past the length (and EOS) are all False."""
        raise NotImplementedError

    # -- data ------------------------------------------------------------------------------
    def batch(
        self,
        batch_size: int,
        generator: torch.Generator,
        min_len: int | None = None,
        max_len: int | None = None,
        length_power: float = 0.0,
    ) -> Batch:
        """batch_size fresh examples, lengths drawn by draw_lengths()."""
        lo = self.min_len if min_len is None else min_len
        hi = self.max_len if max_len is None else max_len
        lengths = draw_lengths(batch_size, lo, hi, generator, length_power)  # (B,)
        digits = torch.randint(0, 10, (batch_size, hi), generator=generator)  # (B, S)
        src = digits.masked_fill(_beyond(lengths, hi), self.vocab.pad)
        return self.batch_from_sources(src, lengths)

    def batch_from_sources(self, src: torch.Tensor, lengths: torch.Tensor) -> Batch:
        out = self.transform(src, lengths)  # (B, S)
        B, S = src.shape
        tgt = torch.full((B, S + 2), self.vocab.pad, dtype=torch.long)
        tgt[:, 0] = self.vocab.sos
        tgt[:, 1 : S + 1] = out
        tgt[torch.arange(B), lengths + 1] = self.vocab.eos
        return Batch(src=src, tgt=tgt, lengths=lengths)

    def relabel(self, batch: Batch) -> Batch:
        """`batch`'s sources with this task's targets (to score a model of this task on
        sources another model's task drew)."""
        return self.batch_from_sources(batch.src, batch.lengths)

    def expected_output(self, src_ids: list[int]) -> list[int] | None:
        """The correct output ids for a source, or None when the task cannot tell."""
        src = torch.tensor([src_ids])
        return self.transform(src, torch.tensor([len(src_ids)]))[0].tolist()

    def expected_alignment(self, batch: Batch) -> torch.Tensor | None:
        """(B, T_out, S) bool: where each output should attend, or None when nothing is known
        (then only a head's sharpness can be shown, not a score)."""
        return self.alignment(batch.src, batch.lengths)

    def evaluation_batches(self, n: int, seed: int, batch_size: int = 500, min_len: int | None = None,
                           max_len: int | None = None) -> Iterator[Batch]:
        """The n examples accuracy is measured on, in batches: fresh ones drawn from `seed`."""
        generator = torch.Generator().manual_seed(seed)
        remaining = n
        while remaining > 0:
            size = min(batch_size, remaining)
            yield self.batch(size, generator, min_len, max_len)
            remaining -= size

    def decode_cap(self, src_len: int, positions: int) -> int:
        """Tokens to generate at most for a source: the output plus EOS, and a little slack,
        within the model's positions."""
        return min(positions - 1, src_len + 2)

    # -- text ------------------------------------------------------------------------------
    def parse(self, text: str, max_len: int | None = None) -> list[int]:
        """Typed text ('3 1 4 1 5' or '31415' for the digit tasks) -> ids; TaskInputError, one
        sentence, for anything the vocabulary cannot read or longer than max_len tokens."""
        return self.vocab.encode_text(text, self.max_len if max_len is None else max_len)

    def format(self, ids, strip_special: bool = True) -> str:
        """ids -> text ('5 1 4 1 3'; char level joined). With strip_special, stops at EOS and
        drops SOS and PAD."""
        return self.vocab.join(self.vocab.decode(ids, strip_special))

    def example(self) -> str:
        """A source to show first, as text a person could have typed."""
        return " ".join("31415926"[: max(self.min_len, min(5, self.max_len))])

    def to_dict(self) -> dict:
        return {"name": self.name, "min_len": self.min_len, "max_len": self.max_len}


def _beyond(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B,) lengths -> (B, width) bool, True at positions >= length."""
    return torch.arange(width, device=lengths.device)[None, :] >= lengths[:, None]


class ReverseTask(Task):
    name = "reverse"
    description = "output the source backwards"
    alignment_name = "anti-diagonal"

    def transform(self, digits, lengths):
        B, S = digits.shape
        pos = torch.arange(S)[None, :]  # (1, S)
        source_index = (lengths[:, None] - 1 - pos).clamp(min=0)  # (B, S): n-1-i
        out = digits.gather(1, source_index)
        return out.masked_fill(_beyond(lengths, S), self.vocab.pad)

    def alignment(self, src, lengths):
        B, S = src.shape
        i = torch.arange(S)[None, :, None]  # output position
        j = torch.arange(S)[None, None, :]  # source position
        valid = ~_beyond(lengths, S)[:, :, None]  # (B, S, 1)
        return (j == lengths[:, None, None] - 1 - i) & valid


class CopyTask(Task):
    name = "copy"
    description = "output the source unchanged"
    alignment_name = "diagonal"

    def transform(self, digits, lengths):
        return digits.masked_fill(_beyond(lengths, digits.shape[1]), self.vocab.pad)

    def alignment(self, src, lengths):
        B, S = src.shape
        eye = torch.eye(S, dtype=torch.bool)[None].expand(B, S, S)
        return eye & ~_beyond(lengths, S)[:, :, None]


class SortTask(Task):
    name = "sort"
    description = "output the source digits in ascending order"
    alignment_name = "permutation"

    def transform(self, digits, lengths):
        # PAD (10) is larger than every digit, so an ascending sort leaves it at the end.
        return digits.masked_fill(_beyond(lengths, digits.shape[1]), self.vocab.pad).sort(dim=1).values

    def alignment(self, src, lengths):
        # Output i may come from any source position holding the same digit (ties are equal).
        out = self.transform(src, lengths)  # (B, S)
        valid = ~_beyond(lengths, src.shape[1])
        return (out[:, :, None] == src[:, None, :]) & valid[:, :, None] & valid[:, None, :]


class DatesTask(Task):
    """Human-written dates in many formats -> ISO 8601, generated from `datetime` (core/dates.py).
    Endless like the digit tasks; the source lengths are the formats' own."""

    name = "dates"
    description = "human-written dates -> ISO 8601 (Tuesday, 1 December 2026 -> 2026-12-01)"
    alignment_name = "fields"  # year, month and day of the output read their own parts of the input
    vocab = dates.VOCAB
    exact_lengths = False
    evaluated_on = "fresh dates"

    def __init__(self, min_len: int = 0, max_len: int = 0) -> None:
        super().__init__(*dates.SOURCE_LENGTHS)  # the formats decide; the arguments are ignored

    def batch(self, batch_size, generator, min_len=None, max_len=None, length_power=0.0) -> Batch:
        examples = dates.sample(batch_size, generator)  # the formats decide the lengths
        return dates.batch_of(examples, self.vocab)

    def relabel(self, batch: Batch) -> Batch:
        return batch  # the targets came with the sources

    def expected_output(self, src_ids):
        return None  # typed text has no known date behind it

    def expected_alignment(self, batch: Batch) -> torch.Tensor | None:
        return batch.alignment

    def decode_cap(self, src_len: int, positions: int) -> int:
        return min(positions - 1, dates.TARGET_LENGTH + 2)

    def example(self) -> str:
        return "Tuesday, 1 December 2026"  # the source of example_batch

    def example_batch(self) -> Batch:
        """An example of its own (a fixed date), as a batch of one with its target and spans."""
        import datetime

        return dates.batch_of([dates.render(datetime.date(2026, 12, 1), dates.FORMATS[0])], self.vocab)


TASKS: dict[str, type[Task]] = {t.name: t for t in (ReverseTask, CopyTask, SortTask, DatesTask)}


def get_task(name: str, min_len: int = 4, max_len: int = 10) -> Task:
    if name not in TASKS:
        raise ValueError(f"task: must be one of {', '.join(TASKS)}; got {name!r}")
    return TASKS[name](min_len=min_len, max_len=max_len)


def task_from_dict(data: dict, vocab: Vocab | None = None) -> Task:
    """A task from a checkpoint's metadata, with the file's vocabulary (None: a file written
    before vocabularies were stored, which holds a digit task). ValueError if they disagree."""
    if not isinstance(data, dict):
        raise ValueError("the task is not an object")
    if data.get("name") == DATA_TASK:
        from minitx.core.pairs import PairsTask

        if vocab is None:
            raise ValueError("a data task needs its vocabulary, and the file has none")
        return PairsTask.from_dict(data, vocab)
    task = get_task(data["name"], int(data.get("min_len", 4)), int(data.get("max_len", 10)))
    if vocab is not None and vocab != task.vocab:
        raise ValueError(f"the {task.name} task reads its own {task.vocab.level} vocabulary, not "
                         f"the file's {vocab.level} vocabulary of {vocab.size} tokens")
    return task


def task_for_config(train_cfg, positions: int) -> Task:
    """The task a TrainConfig trains on: a built-in one, or the pairs of its data file read for
    a model of `positions` (DataError, one line, for a bad file)."""
    if train_cfg.task == DATA_TASK:
        from minitx.core.pairs import PairsTask

        return PairsTask.from_files(train_cfg.data, train_cfg.valid, train_cfg.tokens, train_cfg.seed,
                                    positions, train_cfg.expect)
    task = get_task(train_cfg.task, train_cfg.min_len, train_cfg.max_len)
    if task.max_len + 2 > positions:
        raise ValueError(f"max_len: the model's {positions} positions cannot hold {task.name} sources of "
                         f"{task.max_len} tokens plus SOS/EOS")
    return task
