"""The Task interface: what every task (the digit tasks, dates, a data file's pairs) gives the rest
of minitx. The base class carries the defaults for what some tasks lack (held-out pairs, notes,
an example batch of their own, a check of the model's positions), so nothing asks a task
whether it has an attribute.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from minitx.core.data.batch import Batch, beyond, draw_lengths
from minitx.core.data.origin import Origin
from minitx.core.data.vocab import DIGITS, Vocab
from minitx.core.families import MINITX, Family

DATA_TASK = "data"  # the task of a model trained on a file of pairs
EXPECTATIONS = ("", "diagonal", "anti-diagonal")  # what a data file's cross-attention may be told to show
DEFAULT_PROBE_DIGITS = (7, 2, 9, 0, 4, 6, 1, 8, 3, 5)  # no digit repeats a neighbour: every row distinct


def output_cap(src_len: int, positions: int) -> int:
    """Tokens to generate at most for a source whose output is about its length: the output plus
    EOS, and a little slack, within the model's positions (one of which SOS takes)."""
    return min(positions - 1, src_len + 2)


class Task:
    """Base class. Subclasses say how a source becomes its output (`transform`) and which
    source positions hold the token each output position should copy (`alignment`).

    The defaults describe an endless generated task: no fixed held-out pairs, nothing to train
    on but fresh batches, no notes about how a file was read."""

    name = ""
    description = ""
    alignment_name = ""  # what the cross-attention of a trained model looks like ("": unknown)
    vocab: Vocab = DIGITS
    exact_lengths = True  # batch() can draw sources of one given length (length buckets)
    evaluated_on = "fresh sequences"  # what its accuracy is measured on
    heldout = None  # a data file's held-out pairs (core.data.pair_task.PairSet); None: fresh sequences
    train = None  # the pairs a model learns from, when they are a fixed set
    provenance: dict = {}  # where a data file's pairs came from (read-only here)
    wraps_source = False  # sources are fed as SOS source EOS (an imported model's pipeline did so)
    origin: Origin | None = None  # where a model trained outside minitx came from (imported_task.py)
    # Examples with known answers to measure on (False: an imported model that keeps no pairs;
    # then batch() and evaluation_batches() raise MissingPairs, and input_batch() still works).
    has_examples = True

    def __init__(self, min_len: int = 4, max_len: int = 10) -> None:
        if not 1 <= min_len <= max_len:
            raise ValueError(f"lengths: need 1 <= min_len <= max_len, got {min_len}-{max_len}")
        self.min_len = min_len
        self.max_len = max_len

    @property
    def src_vocab(self) -> Vocab:
        """The vocabulary sources are read and shown in: the task's one vocabulary, unless the
        task has one of its own for sources (an imported model)."""
        return self.vocab

    def model_fields(self) -> dict[str, int]:
        """The ModelConfig fields the task's vocabularies decide (the source ones at their
        defaults when both sides share one vocabulary)."""
        fields: dict[str, int] = {**self.vocab.model_fields(), "src_vocab_size": 0, "src_pad_id": -1}
        if self.src_vocab != self.vocab:
            fields.update(src_vocab_size=self.src_vocab.size, src_pad_id=self.src_vocab.pad)
        return fields

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
        src = digits.masked_fill(beyond(lengths, hi), self.vocab.pad)
        return self.batch_from_sources(src, lengths)

    def input_batch(self, batch_size: int, generator: torch.Generator, length: int | None = None) -> Batch:
        """batch_size inputs for checks that need no known answer (does the forward pass leak
        the future, do attention rows sum to one): the task's own examples where it has them,
        of one `length` where it can draw it. A task without examples makes valid token
        sequences of its vocabularies instead."""
        return self.batch(batch_size, generator, length, length)

    def batch_from_sources(self, src: torch.Tensor, lengths: torch.Tensor) -> Batch:
        out = self.transform(src, lengths)  # (B, S)
        B, S = src.shape
        tgt = torch.full((B, S + 2), self.vocab.pad, dtype=torch.long)
        tgt[:, 0] = self.vocab.sos
        tgt[:, 1 : S + 1] = out
        tgt[torch.arange(B), lengths + 1] = self.vocab.eos
        return Batch(src=src, tgt=tgt, lengths=lengths)

    def pairs_batch(self, pairs, which: torch.Tensor) -> Batch:
        """Pairs at positions `which` of a core.data.pair_task.PairSet, as this task feeds them."""
        return pairs.batch(which, self.vocab)

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
        """Tokens to generate at most for a source of this task (output_cap, unless its outputs
        have a length of their own)."""
        return output_cap(src_len, positions)

    # -- text ------------------------------------------------------------------------------
    def parse(self, text: str, max_len: int | None = None) -> list[int]:
        """Typed text ('3 1 4 1 5' or '31415' for the digit tasks) -> ids; TaskInputError, one
        sentence, for anything the vocabulary cannot read or longer than max_len tokens."""
        return self.vocab.encode_text(text, self.max_len if max_len is None else max_len)

    def unseen_source_tokens(self, ids) -> list[int]:
        """The ids of `ids` (a parsed source) that no training source held: the vocabulary reads
        them (a target had them) but the encoder never met them. Generated tasks draw every digit."""
        return []

    def format(self, ids, strip_special: bool = True) -> str:
        """Output ids -> text ('5 1 4 1 3'; char level joined). With strip_special, stops at EOS
        and drops SOS and PAD."""
        return self.vocab.join(self.vocab.decode(ids, strip_special))

    def format_source(self, ids) -> str:
        """Source ids (as fed: wrapped in SOS ... EOS where the task wraps) -> the text a person
        would type for them."""
        return self.src_vocab.text(ids)

    def shown_source(self, ids) -> str:
        """Source ids as a header shows them: format_source's text, with a piece the model's
        tokeniser did not know shown as its <unk> rather than dropped."""
        return self.src_vocab.shown_text(ids)

    def source_length(self, ids) -> int:
        """How many of the fed source ids are the source's own tokens (not its wrapping): the
        length min_len, max_len and a batch's `lengths` count."""
        return len(ids)

    def sources_as_outputs(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) each source of `batch` as the outputs would write it (its own tokens in the
        output vocabulary, PAD after), and (B,) whether they can write it at all: what "the
        model copies its source" compares against. One vocabulary: the sources themselves."""
        return batch.src, torch.ones(batch.src.shape[0], dtype=torch.bool)

    def source_labels(self, ids) -> list[str]:
        """A label per source position as fed, the wrapping start and end tokens included."""
        return self.src_vocab.labels(ids)

    def example(self) -> str:
        """A source to show first, as text a person could have typed."""
        return " ".join("31415926"[: max(self.min_len, min(5, self.max_len))])

    def example_batch(self) -> Batch:
        """A batch of one to probe with when none is typed: six digits (or the nearest length the
        task trains on) that repeat none of their neighbours, with the task's output."""
        length = min(max(6, self.min_len), self.max_len)
        ids = [DEFAULT_PROBE_DIGITS[i % len(DEFAULT_PROBE_DIGITS)] for i in range(length)]
        return self.batch_from_sources(torch.tensor([ids]), torch.tensor([length]))

    def evaluation_count(self, n: int) -> int:
        """How many examples an evaluation of `n` measures: n fresh ones (a fixed held-out set
        has as many as it holds)."""
        return n if self.heldout is None else min(n, len(self.heldout))

    def heldout_lines(self) -> list[int] | None:
        """The data file's line of each held-out example, in evaluation order; None without a file."""
        return None

    def notes(self) -> list[str]:
        """What a person should hear once about how the task's data was read."""
        return []

    def check_positions(self, positions: int) -> None:
        """ValueError when the task's examples cannot fit a model of `positions`."""

    def sample_size(self, n: int) -> int:
        """How many examples a measurement that asks for n gets: n fresh ones here; a task of
        fixed pairs has no more than it keeps."""
        return n

    def examples_words(self, n: int) -> str:
        """What `n` examples of a measurement are, in words: '500 fresh sequences', '4 pairs of
        pairs.tsv', '3 of the 4 held-out pairs'."""
        return f"{n} {self.evaluated_on}"

    def source_limit(self, positions: int) -> int:
        """The most source tokens (as `parse` counts them) a model of `positions` takes: room
        for SOS and EOS of an output about as long as its source."""
        return positions - 2

    def family(self) -> Family:
        """The family of the task's model (core/families.py): MINITX for a model minitx trained."""
        return MINITX

    def family_name(self) -> str:
        """The family as a person calls it (NLLB-200, mBART-50, Marian, minitx)."""
        return self.family().display_name()

    def to_dict(self) -> dict:
        return {"name": self.name, "min_len": self.min_len, "max_len": self.max_len}
