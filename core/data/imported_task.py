"""The task of an imported model (`minitx import`, docs/import.md): a model trained by other code,
with the two vocabularies it was trained with and the way its code fed sources.

- `vocab` is the target's vocabulary (the decoder's input, the output layer), `src_vocab` the
  source's: each with its own ids and its own spellings of the specials.
- `wraps_source`: the code's data pipeline fed every source as start, tokens, end
  (`<bos> 3 1 4 <eos>`; both known layouts do), so `parse` wraps typed text the same way and
  every source of a batch is fed wrapped. Lengths (`min_len`, `max_len`, a batch's `lengths`)
  count the source's own tokens, as for every task; `source_length` says how many of the ids
  fed they are.
- Example pairs: minitx cannot generate a user's task. Pairs given at import (`--pairs FILE`)
  are kept in the checkpoint, up to 1,000 of them like a data file's held-out pairs, and every
  command that needs examples (eval, heads, doctor, compare, mean ablation) uses them. Without
  them a measurement raises MissingPairs (one line; each command adds how to give a pairs file
  there, core/data/given_pairs.py reads one), checks that need only inputs run on made-up
  sequences of the vocabularies (input_batch), and typed sources work everywhere.
- Decoding budget: the nn.Transformer tutorial's `translate`, at most the wrapped source's
  length plus 4 new tokens (or the longest kept target plus end, if longer).
- `origin` (core/data/origin.py): where the model came from (layout, files and their sha256,
  the special tokens as the files spell them), for `inspect` and the app's header.
"""

from __future__ import annotations

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.origin import Origin
from minitx.core.data.pair_ids import PairData, Side
from minitx.core.data.pair_task import (
    MAX_STORED_TOKENS,
    PairSet,
    PairsTask,
    check_provenance,
    stored_pairs,
)
from minitx.core.data.subword import SubwordVocab
from minitx.core.data.task import Task
from minitx.core.data.vocab import Vocab
from minitx.core.families import Family, family

IMPORTED_TASK = "imported"
EXTRA_NEW_TOKENS = 4  # the tutorial's translate(): max_len = wrapped length + 5, BOS included
NO_PAIRS = "this model keeps no example pairs to measure on"
MAX_ORIGIN_TEXT = 4096
INPUT_LENGTHS = (3, 8)  # made-up sources for the checks that need no answers: lengths in this range


class MissingPairs(Exception):
    """A measurement needs examples with known answers and the task has none (NO_PAIRS). Its
    message is what is missing; how to give pairs is the caller's to add (a command's --pairs
    FILE, the app's pairs key). Not a ValueError: the places that turn a bad value into "this
    option is wrong" must let it through to the one that knows how pairs are given."""

    def __init__(self, message: str = NO_PAIRS) -> None:
        super().__init__(message)


class ImportedTask(PairsTask):
    """An imported model's task; `heldout` (the pairs given at import) may be None."""

    name = IMPORTED_TASK
    exact_lengths = False
    evaluated_on = "held-out pairs"
    kind = "imported model"  # what a person calls it: "this imported model keeps no example pairs"

    origin: Origin

    def __init__(self, vocab: Vocab, src_vocab: Vocab, wraps_source: bool, origin: Origin,
                 heldout: PairSet | None = None, provenance: dict | None = None,
                 counts: dict | None = None, min_len: int = 1, max_len: int = 1,
                 max_target_len: int = 1) -> None:
        Task.__init__(self, min_len, max_len)
        self.vocab, self._src_vocab = vocab, src_vocab
        self.wraps_source = wraps_source
        self.origin = origin
        self.heldout, self.train = heldout, None
        self.provenance, self.counts = provenance or {}, counts or {}
        self.expect = self.alignment_name = ""
        self.max_target_len = max_target_len
        layout = origin.layout or "a mapping"
        weights = (origin.record.get("weights") or {}).get("file", "a file")
        self.description = f"a model imported from {weights} ({layout})"

    @property
    def src_vocab(self) -> Vocab:
        return self._src_vocab

    def family(self) -> Family:
        """A Hugging Face folder's family, kept by the origin through import and fine-tuning;
        MINITX for a model `minitx import` read with a mapping."""
        return family(self.origin.family)

    def family_name(self) -> str:
        """The family's name, its tokeniser telling mBART-50 from mBART, NLLB-200 from M2M100."""
        vocab = self.vocab
        pipeline = vocab.tokeniser.settings.get("pipeline") if isinstance(vocab, SubwordVocab) else None
        return self.family().display_name(pipeline)

    @property
    def has_examples(self) -> bool:  # type: ignore[override]
        return self.heldout is not None

    # -- data ------------------------------------------------------------------------------
    def pairs_batch(self, pairs: PairSet, which: torch.Tensor) -> Batch:
        return pairs.batch(which, self.vocab, self.src_vocab, self.wraps_source)

    def _pairs(self) -> PairSet:
        if self.heldout is None:
            raise MissingPairs(NO_PAIRS.replace("this model", f"this {self.kind}"))
        return self.heldout

    def input_batch(self, batch_size: int, generator: torch.Generator, length: int | None = None) -> Batch:
        """The kept pairs where there are some; else sources and targets of random ordinary
        tokens of the two vocabularies (lengths in INPUT_LENGTHS, or `length` cut to them),
        fed as the model's code fed them: inputs, no answers. They fit the model: `max_len`
        counts a source's own tokens, so a source fed wrapped holds two more, within the
        positions; an unwrapped one may fill them, and then its target's decoder input (start
        token first) must hold one token fewer."""
        if self.heldout is not None:
            return super().input_batch(batch_size, generator, length)
        top = max(1, min(INPUT_LENGTHS[1], self.max_len - (0 if self.wraps_source else 1)))
        lo, hi = (min(length, top),) * 2 if length is not None else (min(INPUT_LENGTHS[0], top), top)
        lengths = torch.randint(lo, hi + 1, (batch_size,), generator=generator)  # (B,)
        rows = [self._random_ids(self.src_vocab, int(n), generator) for n in lengths]
        targets = [self._random_ids(self.vocab, int(n), generator) for n in lengths]
        return PairSet.whole(_made_up(rows, targets)).batch(torch.arange(batch_size), self.vocab,
                                                            self.src_vocab, self.wraps_source)

    @staticmethod
    def _random_ids(vocab: Vocab, n: int, generator: torch.Generator) -> list[int]:
        real = torch.tensor(vocab.real_ids())
        return real[torch.randint(0, len(real), (n,), generator=generator)].tolist()

    def batch(self, batch_size, generator, min_len=None, max_len=None, length_power=0.0) -> Batch:
        self._pairs()
        return super().batch(batch_size, generator)

    def evaluation_batches(self, n, seed, batch_size=500, min_len=None, max_len=None):
        self._pairs()
        return super().evaluation_batches(n, seed, batch_size)

    def example_batch(self) -> Batch:
        self._pairs()
        return super().example_batch()

    def example(self) -> str:
        """The first kept pair's source; without pairs, the source vocabulary's first few tokens."""
        if self.heldout is not None:
            return super().example()
        vocab = self.src_vocab
        return vocab.join([vocab.tokens[i] for i in vocab.real_ids()[:5]])

    def expected_output(self, src_ids):
        """A kept pair's target for its source (fed wrapped or not, as the model's code fed it)."""
        return super().expected_output(src_ids[1:-1] if self.wraps_source else src_ids)

    def decode_cap(self, src_len: int, positions: int) -> int:
        fed = src_len if self.wraps_source else src_len + 2
        longest = self.max_target_len + 2 if self.heldout is not None else 0
        return min(positions - 1, max(fed + EXTRA_NEW_TOKENS, longest))

    def with_pairs(self, heldout: PairSet, provenance: dict, counts: dict, min_len: int, max_len: int,
                   max_target_len: int) -> ImportedTask:
        """This task with `heldout` as its example pairs (read from a file given at import)."""
        return ImportedTask(self.vocab, self.src_vocab, self.wraps_source, self.origin, heldout, provenance,
                            counts, min_len, max_len, max_target_len)

    # -- text ------------------------------------------------------------------------------
    def parse(self, text: str, max_len: int | None = None) -> list[int]:
        """Typed text in the source vocabulary (at most `max_len` tokens of it), wrapped in its
        start and end tokens when the model's code fed sources so."""
        ids = self.src_vocab.encode_text(text, self.max_len if max_len is None else max_len)
        return [self.src_vocab.sos, *ids, self.src_vocab.eos] if self.wraps_source else ids

    def sources_as_outputs(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Two vocabularies: each source token by its text in the target vocabulary (the start
        and end tokens of a wrapped source left out); a source holding a token the targets do
        not have cannot be written."""
        first = 1 if self.wraps_source else 0
        S = int(batch.lengths.max())
        own = batch.src[:, first : first + S]  # (B, S) the source's own tokens, PAD after
        by_text = {self.vocab.tokens[i]: i for i in self.vocab.real_ids()}
        table = torch.tensor([by_text.get(token, -1) for token in self.src_vocab.tokens])  # (V_src,)
        real = torch.arange(S)[None, :] < batch.lengths[:, None]  # (B, S)
        written = table[own].masked_fill(~real, self.vocab.pad)  # (B, S)
        return written, ~((written == -1) & real).any(dim=1)

    def source_limit(self, positions: int) -> int:
        """The source as fed fills at most the model's positions: its own tokens, plus the two
        that wrap it where the model's code wrapped sources (a tokeniser's own specials, as
        Marian's </s>, are among the tokens `parse` counts)."""
        return positions - 2 if self.wraps_source else positions

    def source_length(self, ids) -> int:
        return len(ids) - 2 if self.wraps_source else len(ids)

    def wrapping(self) -> str:
        """How a source is fed, in words: '<s> … </s>' or 'as typed'."""
        if not self.wraps_source:
            return "as typed (not wrapped)"
        vocab = self.src_vocab
        return f"{vocab.tokens[vocab.sos]} … {vocab.tokens[vocab.eos]}"

    def notes(self) -> list[str]:
        return [f"sources are fed {'wrapped as ' if self.wraps_source else ''}{self.wrapping()}, as "
                "the model's own code fed them"]

    def check_positions(self, positions: int) -> None:
        if self.heldout is not None:
            super().check_positions(positions)

    # -- checkpoints -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        data = {"name": self.name, "min_len": self.min_len, "max_len": self.max_len,
                "max_target_len": self.max_target_len, "wraps_source": self.wraps_source,
                "origin": self.origin.to_dict()}
        if self.heldout is not None:
            stored = super().to_dict()
            data.update(provenance=self.provenance, counts=self.counts, heldout=stored["heldout"])
        return data

    @classmethod
    def from_dict(cls, data: dict, vocab: Vocab, src_vocab: Vocab,
                  tokeniser_specials: bool = False) -> ImportedTask:
        """From a checkpoint: every field checked; ValueError (one line) otherwise. A Hugging
        Face model's kept pairs hold the special tokens its tokeniser adds (tokeniser_specials)."""
        allowed = {"name", "min_len", "max_len", "max_target_len", "wraps_source", "origin",
                   "provenance", "counts", "heldout"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"the imported task has an unknown field {unknown[0][:40]!r}")
        ints = {k: data.get(k) for k in ("min_len", "max_len", "max_target_len")}
        for key, value in ints.items():
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_STORED_TOKENS:
                raise ValueError(f"the imported task's {key} is not a length")
        if ints["min_len"] > ints["max_len"]:
            raise ValueError("the imported task's min_len is above its max_len")
        if not isinstance(data.get("wraps_source"), bool):
            raise ValueError("the imported task does not say whether sources are wrapped")
        origin = data.get("origin")
        if not isinstance(origin, dict) or not _plain(origin):
            raise ValueError("the imported task's origin is not an object of names and values")
        heldout = provenance = counts = None
        if "heldout" in data:
            provenance, counts = data.get("provenance"), data.get("counts")
            check_provenance(provenance, (vocab.level,))  # the pairs were read by its tokeniser
            if not isinstance(counts, dict) or not all(
                    isinstance(k, str) and len(k) < 40 and isinstance(v, int) and v >= 0
                    for k, v in counts.items()):
                raise ValueError("the imported task's counts are not named non-negative integers")
            heldout = stored_pairs(data["heldout"], vocab, src_vocab, tokeniser_specials)
        elif "provenance" in data or "counts" in data:
            raise ValueError("the imported task describes pairs it does not keep")
        return cls(vocab, src_vocab, data["wraps_source"], Origin(origin), heldout, provenance, counts,
                   ints["min_len"], ints["max_len"], ints["max_target_len"])


def _made_up(sources: list[list[int]], targets: list[list[int]]):
    """Id rows -> the PairData a PairSet batches (line numbers 1, 2, ...)."""
    return PairData(Side.from_lists(sources), Side.from_lists(targets),
                    torch.arange(1, len(sources) + 1, dtype=torch.int32))


def _plain(value, depth: int = 0) -> bool:
    """JSON of names, short texts, numbers and booleans, nested at most three deep."""
    if isinstance(value, dict):
        return depth < 3 and all(isinstance(k, str) and len(k) <= 64 and _plain(v, depth + 1)
                                 for k, v in value.items())
    if isinstance(value, str):
        return len(value) <= MAX_ORIGIN_TEXT
    return value is None or isinstance(value, (bool, int, float))
