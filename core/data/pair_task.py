"""The task of a data file: pairs read by core/data/pair_files.py, a vocabulary built from the training
side, a held-out set the model never trains on, and shuffled epochs over the rest.

- Held-out pairs: a `--valid` file, or a seeded share of the data file (5%, at least 100 pairs).
  Their exact match is the accuracy reported for such a model, everywhere; a checkpoint keeps
  the first 1,000 of them (as ids), so `eval`, `inspect`, `doctor` and `compare` work on the
  checkpoint alone.
- Pairs longer than the model's positions allow are skipped and counted, never a crash.
- Epochs: a permutation from the Trainer's data generator; with length buckets, each pool of
  32 batches is sorted by source length and cut into batches (little padding), and the batches
  are shuffled. The epoch's generator state and the position in it are the sampler's state, so
  a resumed run draws exactly the batches the uninterrupted one would have.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from minitx.core.data import pair_ids as files
from minitx.core.data.batch import Batch
from minitx.core.data.pair_files import BY_NAME, Columns, DataError, Provenance
from minitx.core.data.pair_ids import PairData, Side
from minitx.core.data.task import DATA_TASK, EXPECTATIONS, Task
from minitx.core.data.vocab import Vocab
from minitx.core.wording import counted

HOLDOUT_SHARE = 0.05
MIN_HOLDOUT = 100
STORED_HELDOUT = 1000  # held-out pairs a checkpoint keeps
MAX_STORED_TOKENS = 10_000  # per side of a stored pair; the model's positions are the real limit
POOL = 32  # batches sorted together by length
SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass
class PairSet:
    """Some of the pairs of a PairData (`index`, in file order)."""

    data: PairData
    index: torch.Tensor  # (m,) int64

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def whole(cls, data: PairData) -> PairSet:
        return cls(data, torch.arange(len(data)))

    def source_lengths(self) -> torch.Tensor:
        return self.data.source.lengths[self.index]

    def target_lengths(self) -> torch.Tensor:
        return self.data.target.lengths[self.index]

    def line(self, i: int) -> int:
        return int(self.data.lines[self.index[i]])

    def batch(self, which: torch.Tensor, vocab: Vocab, src_vocab: Vocab | None = None,
              wrap: bool = False) -> Batch:
        """Pairs at positions `which` (B,) of this set -> a Batch (SOS target EOS, PAD after).
        The sources are in `src_vocab` (default: `vocab`), and with `wrap` fed as SOS source EOS
        in it; `lengths` counts the source's own tokens either way."""
        pairs = self.index[which]
        src_vocab = src_vocab or vocab
        src = self.data.source.rows(pairs, src_vocab.pad)  # (B, S)
        lengths = self.data.source.lengths[pairs]  # (B,)
        body = self.data.target.rows(pairs, vocab.pad)  # (B, T)
        B, T = body.shape
        if wrap:
            wrapped = torch.full((B, src.shape[1] + 2), src_vocab.pad, dtype=torch.long)  # (B, S + 2)
            wrapped[:, 0] = src_vocab.sos
            wrapped[:, 1:-1] = src
            wrapped[torch.arange(B), lengths + 1] = src_vocab.eos
            src = wrapped
        start, end = vocab.target_ends
        tgt = torch.full((B, T + 2), vocab.pad, dtype=torch.long)
        tgt[:, 0] = start
        tgt[:, 1 : T + 1] = body
        tgt[torch.arange(B), self.data.target.lengths[pairs] + 1] = end
        texts = self.data.texts
        references = None if texts is None else tuple(texts[i] for i in pairs.tolist())
        if references is not None and None in references:
            references = None
        return Batch(src=src, tgt=tgt, lengths=lengths, references=references)

    def fitting(self, positions: int, sources: int | None = None) -> tuple[PairSet, int]:
        """The pairs whose source and target fit `positions` (plus SOS/EOS), and how many did not;
        `sources`: the longest source instead (a task's source_limit: a Hugging Face source, its
        </s> included, may fill the positions)."""
        longest = positions - 2 if sources is None else sources
        fits = (self.source_lengths() <= longest) & (self.target_lengths() <= positions - 2)
        return PairSet(self.data, self.index[fits]), int((~fits).sum())


class PairsTask(Task):
    """A data file's task. `heldout` is what accuracy is measured on; `train` (absent in a task
    rebuilt from a checkpoint) what the model learns from."""

    name = DATA_TASK
    exact_lengths = False
    evaluated_on = "held-out pairs"
    _answers: dict | None = None  # held-out source -> its target, once asked (expected_output)
    # Ids some training source held (None: not known, as in a checkpoint from before they were kept).
    source_tokens: frozenset[int] | None = None

    def __init__(self, vocab: Vocab, heldout: PairSet, train: PairSet | None, provenance: dict,
                 counts: dict, expect: str = "", min_len: int = 1, max_len: int = 1,
                 max_target_len: int = 1, source_tokens: frozenset[int] | None = None) -> None:
        super().__init__(min_len, max_len)
        self.source_tokens = source_tokens
        self.vocab = vocab
        self.heldout, self.train = heldout, train
        self.provenance, self.counts = provenance, counts
        self.expect = expect
        self.alignment_name = expect
        self.max_target_len = max_target_len
        self.description = f"pairs from {provenance.get('data', {}).get('file', 'a data file')}"

    # -- what the rest of minitx asks of a task ----------------------------------------------
    def batch(self, batch_size, generator, min_len=None, max_len=None, length_power=0.0) -> Batch:
        """batch_size held-out pairs drawn from `generator` (all of them, shuffled, when fewer)."""
        order = torch.randperm(len(self.heldout), generator=generator)[:batch_size]
        return self.pairs_batch(self.heldout, order)

    def evaluation_batches(self, n, seed, batch_size=500, min_len=None, max_len=None):
        """The first n held-out pairs in file order (the seed changes nothing: they are fixed)."""
        count = min(n, len(self.heldout))
        for start in range(0, count, batch_size):
            yield self.pairs_batch(self.heldout, torch.arange(start, min(count, start + batch_size)))

    def relabel(self, batch: Batch) -> Batch:
        return batch  # a pair's target is the data's

    def sample_size(self, n: int) -> int:
        return n if self.heldout is None else min(n, len(self.heldout))

    def examples_words(self, n: int) -> str:
        total = n if self.heldout is None else len(self.heldout)
        return f"{n} {self.evaluated_on}" if n >= total else f"{n} of the {total} {self.evaluated_on}"

    def expected_output(self, src_ids):
        """A held-out pair's target when `src_ids` is the source of one (a checkpoint keeps them),
        else None: other text has no known answer. A source held out with two targets has none."""
        if self.heldout is None:
            return None
        if self._answers is None:
            answers: dict[tuple[int, ...], list[int] | None] = {}
            data = self.heldout.data
            for i in self.heldout.index.tolist():
                source, target = tuple(data.source.row(i)), data.target.row(i)
                answers[source] = target if answers.get(source, target) == target else None
            self._answers = answers
        answer = self._answers.get(tuple(src_ids))
        return None if answer is None else list(answer)

    def expected_alignment(self, batch: Batch) -> torch.Tensor | None:
        if not self.expect:
            return None
        B, S = batch.src.shape
        T = batch.labels.shape[1]
        i = torch.arange(T)[None, :, None]  # output position
        j = torch.arange(S)[None, None, :]  # source position as fed
        n = batch.lengths[:, None, None]
        out_len = (batch.labels == self.vocab.eos).int().argmax(dim=1)[:, None, None]  # before EOS
        target = i if self.expect == "diagonal" else n - 1 - i  # counted in the source's own tokens
        first = 1 if self.wraps_source else 0  # a wrapped source's own tokens start after its start token
        return (j == target + first) & (i < out_len) & (j >= first) & (j < n + first)

    def unseen_source_tokens(self, ids) -> list[int]:
        if self.source_tokens is None:
            return []
        specials = self.vocab.specials
        return [i for i in dict.fromkeys(ids) if i not in self.source_tokens and i not in specials]

    def decode_cap(self, src_len: int, positions: int) -> int:
        return min(positions - 1, self.max_target_len + 2)

    def example(self) -> str:
        """The first held-out pair's source (never one the model trained on)."""
        return self.format_source(self.example_batch().src[0])

    def example_batch(self) -> Batch:
        """The first held-out pair (never one the model trained on), as a batch of one."""
        return self.pairs_batch(self.heldout, torch.tensor([0]))

    # -- building ----------------------------------------------------------------------------
    @classmethod
    def from_files(cls, path: str, valid: str = "", level: str = "char", seed: int = 0,
                   positions: int = 64, expect: str = "", columns: Columns = BY_NAME,
                   ) -> PairsTask:
        """Read `path` (and `valid`), hold out pairs, build the vocabulary from the training
        pairs that fit `positions`. DataError (one line, file and line) for a bad file."""
        loaded = files.load(path, level, columns=columns)
        everything = PairSet.whole(loaded.data)
        n = len(everything)
        if valid:
            train_index = everything.index
        else:
            if n < 2 * MIN_HOLDOUT:
                raise DataError(f"{path} has {n} pairs; holding out {MIN_HOLDOUT} for measuring needs "
                                f"{2 * MIN_HOLDOUT}: give --valid FILE (the same file measures how well "
                                "it learned the pairs it trains on)")
            k = max(MIN_HOLDOUT, math.ceil(n * HOLDOUT_SHARE))
            perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
            train_index, heldout_index = perm[k:].sort().values, perm[:k].sort().values
        train, train_too_long = PairSet(loaded.data, train_index).fitting(positions)
        if not len(train):
            raise DataError(f"{path}: no pair fits the model's {positions} positions (sources and "
                            f"targets of at most {positions - 2} tokens); raise --positions")
        in_train = torch.zeros(n, dtype=torch.bool)
        in_train[train.index] = True
        counts = files.count_tokens(loaded.data, in_train, len(loaded.tokens))
        renumbered, vocab, left_out = files.renumber(loaded.data, loaded.tokens, counts, level)
        train = PairSet(renumbered, train.index)
        if valid:
            held = files.load(valid, level, vocab, columns=columns)
            heldout, heldout_too_long = PairSet.whole(held.data).fitting(positions)
            valid_info = held.provenance.to_dict()
        else:
            heldout, heldout_too_long = PairSet(renumbered, heldout_index).fitting(positions)
            valid_info = None
        if not len(heldout):
            raise DataError(f"{valid or path}: no held-out pair fits the model's {positions} positions")
        unknown = sum(int((side.rows(heldout.index, vocab.pad) == vocab.unk).sum())
                      for side in (heldout.data.source, heldout.data.target)) if len(heldout) else 0
        lengths = train.source_lengths()
        # (N, S) padded training sources -> the ids they hold
        seen = set(torch.unique(train.data.source.rows(train.index, vocab.pad)).tolist()) - {vocab.pad}
        return cls(
            vocab, heldout, train,
            provenance={"data": loaded.provenance.to_dict(), "valid": valid_info, "tokens": level,
                        "seed": seed},
            counts={"read": n, "train": len(train), "heldout": len(heldout),
                    "skipped_too_long": train_too_long + heldout_too_long,
                    "unknown_heldout_tokens": unknown, "tokens_left_out": left_out},
            expect=expect, min_len=int(lengths.min()), max_len=int(lengths.max()),
            max_target_len=int(train.target_lengths().max()), source_tokens=frozenset(seen),
        )

    def heldout_file(self) -> str:
        """The file the held-out pairs came from: --valid's when one was given, else --data's
        (whose pairs were held out), or a --pairs file's."""
        provenance = self.provenance or {}
        return (provenance.get("valid") or provenance.get("data") or {}).get("file", "a data file")

    def heldout_lines(self) -> list[int] | None:
        if self.heldout is None:
            return None
        return self.heldout.data.lines[self.heldout.index].tolist()

    def notes(self) -> list[str]:
        """What a person should hear once about how the file was read."""
        c, out = self.counts, []
        if c.get("skipped_too_long"):
            n = c["skipped_too_long"]
            out.append(f"skipped {counted(n, 'pair')} longer than the model's positions allow "
                       "(minitx train --positions raises the limit)")
        if c.get("unknown_heldout_tokens"):
            out.append(f"{c['unknown_heldout_tokens']:,} held-out tokens never occur in training; they "
                       "read as <unk>")
        return out

    # -- checkpoints -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        shown = self.heldout.index[:STORED_HELDOUT]
        data = self.heldout.data
        texts = [data.texts[int(i)] for i in shown] if data.texts is not None else []
        references = {"references": texts} if texts and None not in texts else {}
        return {
            "name": self.name, "min_len": self.min_len, "max_len": self.max_len,
            "max_target_len": self.max_target_len, "expect": self.expect,
            "provenance": self.provenance, "counts": self.counts,
            "heldout": {"source": [data.source.row(int(i)) for i in shown],
                        "target": [data.target.row(int(i)) for i in shown],
                        "lines": data.lines[shown].tolist(), **references},
            **({} if self.source_tokens is None else {"source_tokens": sorted(self.source_tokens)}),
        }

    @classmethod
    def from_dict(cls, data: dict, vocab: Vocab) -> PairsTask:
        """From a checkpoint: every field checked; ValueError (one line) otherwise."""
        allowed = {"name", "min_len", "max_len", "max_target_len", "expect", "provenance", "counts",
                   "heldout", "source_tokens"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"the data task has an unknown field {unknown[0][:40]!r}")
        ints = {k: data.get(k) for k in ("min_len", "max_len", "max_target_len")}
        for key, value in ints.items():
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_STORED_TOKENS:
                raise ValueError(f"the data task's {key} is not a length")
        if data.get("expect", "") not in EXPECTATIONS:
            raise ValueError("the data task's expected alignment is not diagonal or anti-diagonal")
        provenance, counts = data.get("provenance"), data.get("counts")
        # char or word; a model fine-tuned on a file (`train --init`) read it in its own vocabulary's
        check_provenance(provenance, ("char", "word", vocab.level))
        if not isinstance(counts, dict) or not all(isinstance(k, str) and len(k) < 40 and isinstance(v, int)
                                                    and v >= 0 for k, v in counts.items()):
            raise ValueError("the data task's counts are not named non-negative integers")
        heldout = stored_pairs(data.get("heldout"), vocab)
        return cls(vocab, heldout, None, provenance, counts, data.get("expect", ""), ints["min_len"],
                   ints["max_len"], ints["max_target_len"], stored_source_tokens(data, vocab))

    def check_positions(self, positions: int) -> None:
        """ValueError when the stored pairs do not fit a model of `positions`."""
        _, too_long = self.heldout.fitting(positions, self.source_limit(positions))
        if too_long or self.max_target_len > positions - 2:
            raise ValueError(f"the data task's pairs are longer than the model's {positions} positions")


def check_provenance(provenance, tokens: tuple[str, ...] = ("char", "word")) -> None:
    """ValueError (one line) unless `provenance` describes its data files whole and was read at
    one of the levels `tokens` (a data task's: char or word; an imported model's: its vocabulary's,
    subword for a Hugging Face tokeniser)."""
    if not isinstance(provenance, dict) or not isinstance(provenance.get("data"), dict):
        raise ValueError("the data task has no provenance of its data file")
    for key in ("data", "valid"):
        info = provenance.get(key)
        if info is None and key == "valid":
            continue
        fields = {"file": str, "path": str, "size": int, "sha256": str, "format": str, "pairs": int}
        if not isinstance(info, dict) or set(info) != set(fields):
            raise ValueError(f"the data task's {key} file provenance is incomplete")
        for name, kind in fields.items():
            value = info[name]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"the data task's {key} file {name} is not a {kind.__name__}")
            if kind is str and len(value) > 4096 or kind is int and value < 0:
                raise ValueError(f"the data task's {key} file {name} is out of range")
        if not SHA256.fullmatch(info["sha256"]):
            raise ValueError(f"the data task's {key} file sha256 is not 64 hex digits")
    if provenance.get("tokens") not in tokens:
        raise ValueError(f"the data task's tokenisation is not {' or '.join(tokens)}")


def stored_source_tokens(data: dict, vocab: Vocab) -> frozenset[int] | None:
    """The training sources' ids a checkpoint keeps (None when it predates them)."""
    if "source_tokens" not in data:
        return None
    stored, real = data["source_tokens"], set(vocab.real_ids())
    if not isinstance(stored, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                               and i in real for i in stored):
        raise ValueError("the data task's source_tokens are not ids of its vocabulary")
    return frozenset(stored)


def stored_pairs(stored, vocab: Vocab, src_vocab: Vocab | None = None,
                 tokeniser_specials: bool = False) -> PairSet:
    """Held-out pairs kept in a checkpoint (ids) -> a PairSet, after checking every id (the
    sources' against `src_vocab`, by default `vocab`; with tokeniser_specials, both sides may
    also hold the special tokens a Hugging Face tokeniser adds: SubwordVocab.added_ids)."""
    if not isinstance(stored, dict) or not {"source", "target", "lines"} <= set(stored) <= {
            "source", "target", "lines", "references"}:
        raise ValueError("the data task's held-out pairs are missing or malformed")
    sources, targets, lines = stored["source"], stored["target"], stored["lines"]
    references = stored.get("references")  # the targets as the file held them (BLEU's references)
    if references is not None and (not isinstance(references, list) or len(references) != len(targets)
                                   or not all(isinstance(t, str) and t for t in references)):
        raise ValueError("the data task's held-out references are not one text per pair")
    if not all(isinstance(x, list) for x in (sources, targets, lines)):
        raise ValueError("the data task's held-out pairs are not lists")
    if not 1 <= len(sources) <= STORED_HELDOUT or len(targets) != len(sources) or len(lines) != len(sources):
        raise ValueError(f"the data task must keep 1 to {STORED_HELDOUT} held-out pairs, each with a "
                         "source, a target and a line")
    for rows, side in ((sources, src_vocab or vocab), (targets, vocab)):
        allowed = set(side.real_ids()) | {side.unk}
        if tokeniser_specials:
            allowed |= side.added_ids()
        for row in rows:
            if not isinstance(row, list) or not 1 <= len(row) <= MAX_STORED_TOKENS:
                raise ValueError("a stored held-out pair is not a list of 1 or more token ids")
            if not all(isinstance(i, int) and not isinstance(i, bool) and i in allowed for i in row):
                raise ValueError("a stored held-out pair holds ids that are not ordinary tokens")
    if not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x < 2**31 for x in lines):
        raise ValueError("a stored held-out pair has no valid line number")
    data = PairData(Side.from_lists(sources), Side.from_lists(targets),
                    torch.tensor(lines, dtype=torch.int32), references)
    return PairSet.whole(data)


@dataclass
class FilePairs:
    """A file's pairs read with a model's vocabulary, for `minitx eval --data`."""

    pairs: PairSet
    provenance: Provenance
    skipped: int  # pairs too long for the model's positions
    unknown: int  # tokens read as UNK

    def batches(self, task: Task, batch_size: int = 500):
        """The pairs in batches, as `task` feeds them to its model."""
        for start in range(0, len(self.pairs), batch_size):
            yield task.pairs_batch(self.pairs, torch.arange(start, min(len(self.pairs), start + batch_size)))

    def lines(self) -> list[int]:
        return self.pairs.data.lines[self.pairs.index].tolist()


def read_for_model(path: str, task: Task, positions: int, columns: Columns = BY_NAME) -> FilePairs:
    """Every pair of `path` (its sides picked by `columns`) in the vocabularies of the model's task
    (unknown tokens as UNK), without those longer than its positions. DataError when none is left."""
    separate = task.src_vocab if task.src_vocab != task.vocab else None
    loaded = files.load(path, task.vocab.level, task.vocab, separate, columns, keep_texts=True)
    pairs, skipped = PairSet.whole(loaded.data).fitting(positions, task.source_limit(positions))
    if not len(pairs):
        raise DataError(f"{path}: no pair fits the model's {positions} positions")
    return FilePairs(pairs, loaded.provenance, skipped, loaded.unknown)


class PairSampler:
    """Shuffled epochs over a PairSet from `generator`, optionally one length bucket per batch."""

    def __init__(self, pairs: PairSet, batch_size: int, generator: torch.Generator, buckets: bool,
                 vocab: Vocab, make_batch=None, min_rows: int = 1) -> None:
        """`make_batch(pairs, which)`: how the task feeds its pairs (default: one vocabulary);
        an epoch's last batch is left out when it has fewer than `min_rows` pairs (a step split
        among processes and micro-batches needs a pair for each)."""
        self.min_rows = min_rows
        self.pairs, self.batch_size, self.generator = pairs, batch_size, generator
        self.buckets, self.vocab = buckets, vocab
        self.make_batch = make_batch or (lambda pairs, which: pairs.batch(which, vocab))
        self.epoch = 0
        self._start_epoch(generator)

    def _start_epoch(self, generator: torch.Generator) -> None:
        self.epoch_rng = generator.get_state()
        self.plan = self._plan(generator)
        self.cursor = 0

    def _plan(self, generator: torch.Generator) -> list[torch.Tensor]:
        """One epoch's batches: positions into the pair set."""
        order = torch.randperm(len(self.pairs), generator=generator)
        if not self.buckets:
            return [b for b in order.split(self.batch_size) if len(b) >= self.min_rows]
        lengths = self.pairs.source_lengths()
        batches = []
        for pool in order.split(self.batch_size * POOL):
            by_length = pool[torch.sort(lengths[pool], stable=True).indices]
            batches.extend(by_length.split(self.batch_size))
        shuffle = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[i] for i in shuffle if len(batches[i]) >= self.min_rows]

    def next_batch(self) -> Batch:
        if self.cursor == len(self.plan):
            self.epoch += 1
            self._start_epoch(self.generator)
        which = self.plan[self.cursor]
        self.cursor += 1
        return self.make_batch(self.pairs, which)

    def state(self) -> tuple[dict, torch.Tensor]:
        return {"epoch": self.epoch, "cursor": self.cursor}, self.epoch_rng

    def restore(self, info: dict, epoch_rng: torch.Tensor) -> None:
        """Back to a saved position: the epoch's plan is drawn again from its generator state
        (on a generator of its own: the Trainer restores the shared one separately)."""
        epoch, cursor = info.get("epoch"), info.get("cursor")
        replay = torch.Generator()
        replay.set_state(epoch_rng)
        plan = self._plan(replay)
        valid = isinstance(epoch, int) and isinstance(cursor, int) and epoch >= 0
        if not (valid and 0 <= cursor <= len(plan)):
            raise ValueError(f"data position epoch {epoch!r}, batch {cursor!r} is not in the data")
        self.epoch, self.cursor, self.plan, self.epoch_rng = epoch, cursor, plan, epoch_rng
