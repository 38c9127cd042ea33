"""Sequence tasks: each makes vectorised batches, parses and prints sequences, and names the
source position it expects each output token to attend to (its alignment).

All tasks share one 13-token vocabulary: digits 0-9 are ids 0-9, then PAD, SOS, EOS.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PAD, SOS, EOS = 10, 11, 12
VOCAB = tuple(str(d) for d in range(10)) + ("<pad>", "<sos>", "<eos>")
VOCAB_SIZE = len(VOCAB)
MAX_INPUT_CHARS = 2000  # longer text is refused before it is split (pastes of 10k chars)


class TaskInputError(ValueError):
    """A typed source the task cannot accept; the message is one sentence for a person."""


@dataclass(frozen=True)
class Batch:
    src: torch.Tensor  # (B, S) source ids, right-padded with PAD
    tgt: torch.Tensor  # (B, S + 2) SOS, output, EOS, then PAD
    lengths: torch.Tensor  # (B,) source lengths

    @property
    def decoder_input(self) -> torch.Tensor:  # (B, S + 1): teacher forcing, shifted right
        return self.tgt[:, :-1]

    @property
    def labels(self) -> torch.Tensor:  # (B, S + 1)
        return self.tgt[:, 1:]


class Task:
    """Base class. Subclasses say how a source becomes its output (`transform`) and which
    source positions hold the token each output position should copy (`alignment`)."""

    name = ""
    description = ""
    alignment_name = ""  # what the cross-attention of a trained model looks like

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
    ) -> Batch:
        lo = self.min_len if min_len is None else min_len
        hi = self.max_len if max_len is None else max_len
        lengths = torch.randint(lo, hi + 1, (batch_size,), generator=generator)  # (B,)
        digits = torch.randint(0, 10, (batch_size, hi), generator=generator)  # (B, S)
        src = digits.masked_fill(_beyond(lengths, hi), PAD)
        return self.batch_from_sources(src, lengths)

    def batch_from_sources(self, src: torch.Tensor, lengths: torch.Tensor) -> Batch:
        out = self.transform(src, lengths)  # (B, S)
        B, S = src.shape
        tgt = torch.full((B, S + 2), PAD, dtype=torch.long)
        tgt[:, 0] = SOS
        tgt[:, 1 : S + 1] = out
        tgt[torch.arange(B), lengths + 1] = EOS
        return Batch(src=src, tgt=tgt, lengths=lengths)

    def expected_output(self, src_ids: list[int]) -> list[int]:
        src = torch.tensor([src_ids])
        return self.transform(src, torch.tensor([len(src_ids)]))[0].tolist()

    # -- text ------------------------------------------------------------------------------
    def parse(self, text: str, max_len: int | None = None) -> list[int]:
        """'3 1 4 1 5' (or '31415') -> [3, 1, 4, 1, 5]; TaskInputError for anything else."""
        if not isinstance(text, str):
            raise TaskInputError("the source must be text")
        if len(text) > MAX_INPUT_CHARS:
            raise TaskInputError(f"the source is {len(text):,} characters long; that is far too long")
        stripped = text.strip()
        if not stripped:
            raise TaskInputError("the source is empty: type digits such as 3 1 4 1 5")
        parts = stripped.split() if any(c.isspace() for c in stripped) else list(stripped)
        ids = []
        for part in parts:
            if len(part) == 1 and part in "0123456789":
                ids.append(int(part))
            elif part in VOCAB:
                raise TaskInputError(f"{part} is a special token; the source holds digits 0-9 only")
            else:
                shown = part if len(part) <= 12 else part[:12] + "…"
                raise TaskInputError(f"{shown!r} is not a token: the source holds digits 0-9 only")
        limit = self.max_len if max_len is None else max_len
        if len(ids) > limit:
            raise TaskInputError(f"the source has {len(ids)} tokens; this model takes at most {limit}")
        return ids

    @staticmethod
    def format(ids, strip_special: bool = True) -> str:
        """ids -> '5 1 4 1 3'. With strip_special, stops at EOS and drops SOS and PAD."""
        words = []
        for i in (int(x) for x in ids):
            if strip_special:
                if i == EOS:
                    break
                if i in (SOS, PAD):
                    continue
            words.append(VOCAB[i] if 0 <= i < VOCAB_SIZE else f"?{i}")
        return " ".join(words)

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
        return out.masked_fill(_beyond(lengths, S), PAD)

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
        return digits.masked_fill(_beyond(lengths, digits.shape[1]), PAD)

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
        return digits.masked_fill(_beyond(lengths, digits.shape[1]), PAD).sort(dim=1).values

    def alignment(self, src, lengths):
        # Output i may come from any source position holding the same digit (ties are equal).
        out = self.transform(src, lengths)  # (B, S)
        valid = ~_beyond(lengths, src.shape[1])
        return (out[:, :, None] == src[:, None, :]) & valid[:, :, None] & valid[:, None, :]


TASKS: dict[str, type[Task]] = {t.name: t for t in (ReverseTask, CopyTask, SortTask)}


def get_task(name: str, min_len: int = 4, max_len: int = 10) -> Task:
    if name not in TASKS:
        raise ValueError(f"task: must be one of {', '.join(TASKS)}; got {name!r}")
    return TASKS[name](min_len=min_len, max_len=max_len)


def task_from_dict(data: dict) -> Task:
    return get_task(data["name"], int(data.get("min_len", 4)), int(data.get("max_len", 10)))
