"""A fine-tune: a model that exists (a Hugging Face folder, an imported or any minitx checkpoint)
trained further on a file of pairs (`minitx train --init MODEL --data PAIRS`, docs/training.md).

What this module decides, once:
- the defaults a fine-tune starts from, per family (FINE_TUNE_DEFAULTS; the CLI's header and
  the app's form read them here): AdamW with weight decay 0.01 at lr 2e-5 (Marian, BART) or
  1e-4 (T5), or Adafactor at 1e-3 for T5 when asked;
- the pairs it learns from and is measured on, read by the model's own tokenisers (targets as
  `tokenizer(text_target=...)` gives its labels), held out as a data file's are, and cut to the
  model's positions or `max_length` (as a tokeniser's truncation cuts: the end token stays),
  counted, never silently;
- the record of its base: the name it was given, the family, and a sha256 of the base's
  weights, which a fine-tuned checkpoint keeps (`minitx inspect` shows it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from minitx.core.checkpoint import weights_sha256
from minitx.core.data import pair_ids as files
from minitx.core.data.imported_task import ImportedTask
from minitx.core.data.pair_files import DataError
from minitx.core.data.pair_ids import PairData, Side
from minitx.core.data.pair_task import HOLDOUT_SHARE, MIN_HOLDOUT, PairSet, PairsTask
from minitx.core.data.subword import SUBWORD
from minitx.core.data.task import EXPECTATIONS, Task

# family -> the TrainConfig fields a fine-tune of it starts from (the scratch recipes keep theirs).
# transformers' Trainer's AdamW (betas 0.9/0.999, eps 1e-8, gradient norm clipped at 1) with the
# Hugging Face course's weight decay and learning rates; "minitx": a model minitx trained.
COMMON_DEFAULTS = {"optimizer": "adamw", "weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                   "clip_grad_norm": 1.0, "warmup": 0, "schedule": "flat", "batch_size": 16,
                   "steps": 1000, "eval_every": 200, "eval_size": 500, "until": 0.0,
                   "bucket_lengths": False, "length_power": 0.0}
FAMILY_LR = {"marian": 2e-5, "bart": 2e-5, "t5": 1e-4, "minitx": 1e-4}
ADAFACTOR_LR = 1e-3  # T5's own (google-research/text-to-text-transfer-transformer #230)
# A LoRA fine-tune's (peft's own seq2seq LoRA example, examples/conditional_generation, trains at
# 1e-3): a few small matrices from zero move far less per step than a whole model at 2e-5
LORA_LR = 1e-3


def family_of(task: Task) -> str:
    """marian, t5 or bart for a Hugging Face model's task; "minitx" for any other."""
    family = getattr(task, "origin", {}).get("family") if hasattr(task, "origin") else None
    return family if family in FAMILY_LR else "minitx"


# What transformers keeps fixed while it trains a family: Marian's and BART's final_logits_bias
# is a buffer there (minitx's output bias), so a fine-tune leaves it as the base has it.
FROZEN = {"marian": ("output.bias",), "bart": ("output.bias",)}
# Families whose token tables have no padding_idx in transformers: T5's PAD row is a token like
# any other (the decoder starts from it), so it learns; minitx's tables keep PAD's row fixed.
PAD_ROW_TRAINED = ("t5",)


def train_as_family(model: torch.nn.Module, task: Task) -> None:
    """Make the model learn what transformers' model of the base's family learns: FROZEN
    tensors fixed, PAD's rows trained where its tables have no padding_idx."""
    family = family_of(task)
    for name, p in model.named_parameters():
        if name in FROZEN.get(family, ()):
            p.requires_grad_(False)
    if family in PAD_ROW_TRAINED:
        for table in (model.src_embed, model.tgt_embed):
            table.padding_idx = None


def fine_tune_defaults(family: str, optimizer: str = "adamw", lora: bool = False) -> dict:
    """The TrainConfig fields a fine-tune of `family` starts from (with LoRA: at LORA_LR)."""
    defaults = dict(COMMON_DEFAULTS, lr=LORA_LR if lora else FAMILY_LR.get(family, FAMILY_LR["minitx"]))
    if optimizer == "adafactor":  # Adafactor decays by its own rule; no Adam moments to tune
        defaults.update(optimizer="adafactor", lr=ADAFACTOR_LR, weight_decay=0.0)
    return defaults


def base_record(name: str, model: torch.nn.Module, task: Task) -> dict:
    """What a fine-tuned file says of its base: the name given, the family, the model id or
    folder where it was one, and the sha256 of its weights."""
    origin = getattr(task, "origin", {}) or {}
    record = {"init": name, "family": family_of(task), "sha256": weights_sha256(model)}
    for key in ("model_id", "folder"):
        if origin.get(key):
            record[key] = origin[key]
    return record


def folder_dropout(task: Task) -> float | None:
    """The dropout a Hugging Face folder's config.json trains with (T5's dropout_rate, Marian's
    and BART's dropout); None when the base is no folder that can be read now."""
    folder = (getattr(task, "origin", {}) or {}).get("folder")
    if not folder or not (Path(folder) / "config.json").is_file():
        return None
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = config.get("dropout_rate", config.get("dropout"))
    return float(value) if isinstance(value, (int, float)) and 0 <= value < 1 else None


# -- the pairs ------------------------------------------------------------------------------------
def _read(path: str, task: Task):
    separate = task.src_vocab if task.src_vocab != task.vocab else None
    return files.load(path, task.vocab.level, task.vocab, separate)


SPACE_MARKS = " \u2581\u0120"  # a space, sentencepiece's "▁", byte-level BPE's "Ġ"


def _check_targets(path: str, data: PairData, task: Task) -> None:
    """A target whose pieces are all unknown (beside specials, such as BART's leading <s>, and
    word-start marks) teaches nothing but <unk>: refused, naming its line."""
    unk = task.vocab.unk
    if unk is None:
        return
    target = data.target
    vocab = task.vocab
    # pieces that hold text: no unk, no specials, no piece that only marks a word's start ("▁")
    real = torch.tensor([i for i in vocab.real_ids() if vocab.tokens[i].strip(SPACE_MARKS)], dtype=torch.long)
    known = torch.isin(target.ids.long(), real).to(torch.int64)  # (tokens,)
    totals = torch.zeros(len(known) + 1, dtype=torch.int64)
    totals[1:] = known.cumsum(0)
    per_pair = totals[target.offsets[1:]] - totals[target.offsets[:-1]]  # (pairs,)
    bad = ((per_pair == 0) & (target.lengths > 0)).nonzero().flatten()
    if len(bad):
        raise DataError(f"{path}, line {int(data.lines[int(bad[0])])}: every piece of the target is unknown "
                        "to the model's tokeniser (<unk>); nothing in it can be learned")


def _cut(side: Side, limit: int, keep_last: bool) -> tuple[Side, torch.Tensor]:
    """Rows longer than `limit` cut to it (with keep_last, the row's last id, its end token, kept
    at the end, as a tokeniser's truncation keeps it); (the side, (pairs,) bool: which were cut)."""
    lengths = side.lengths
    cut = lengths > limit
    if not bool(cut.any()):
        return side, cut
    rows = []
    for i in range(len(lengths)):
        row = side.row(i)
        if len(row) > limit:
            row = row[: limit - 1] + row[-1:] if keep_last else row[:limit]
        rows.append(row)
    made = Side.from_lists(rows)
    return Side(made.ids.to(side.ids.dtype), made.offsets), cut


def cut_to(data: PairData, task: Task, positions: int, max_length: int) -> tuple[PairData, int]:
    """Every pair within the model's positions and `max_length` (0: none): a source at most that
    many ids (a subword model's own end token kept last; a wrapped source's start and end count),
    a target's labels (the end token included) too. (The data, how many pairs were cut.)"""
    limit = min(positions, max_length) if max_length else positions
    own_specials = task.vocab.level == SUBWORD
    source_limit = limit - (2 if task.wraps_source or not own_specials else 0)
    target_limit = limit - 1 if own_specials else limit - 2  # a Batch adds the end (and the start)
    if source_limit < 1 or target_limit < 1:
        raise DataError(f"max_length {max_length} leaves no room for a token")
    source, source_cut = _cut(data.source, source_limit, keep_last=own_specials)
    target, target_cut = _cut(data.target, target_limit, keep_last=False)
    return PairData(source, target, data.lines), int((source_cut | target_cut).sum())


def fine_tune_task(base: Task, data: str, valid: str, seed: int, positions: int, max_length: int) -> Task:
    """The base model's task with `data`'s pairs to train on and held-out pairs to measure on
    (`valid`, or a seeded share of `data` as a data file's task holds out), read by the base's
    own vocabularies. DataError (one line naming the file and line) for a bad file."""
    loaded = _read(data, base)
    _check_targets(data, loaded.data, base)
    whole, cut = cut_to(loaded.data, base, positions, max_length)
    n = len(whole)
    if valid:
        held = _read(valid, base)
        _check_targets(valid, held.data, base)
        held_data, held_cut = cut_to(held.data, base, positions, max_length)
        train, heldout = PairSet.whole(whole), PairSet.whole(held_data)
        valid_info = held.provenance.to_dict()
    else:
        if n < 2:
            raise DataError(f"{data} has {n} pair; give --valid FILE, or more pairs to hold some out")
        # a data file's share (5%, at least 100 pairs); a small file's 5%, at least one pair
        k = max(MIN_HOLDOUT if n >= 2 * MIN_HOLDOUT else 1, math.ceil(n * HOLDOUT_SHARE))
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        train = PairSet(whole, perm[k:].sort().values)
        heldout = PairSet(whole, perm[:k].sort().values)
        held_cut, valid_info = 0, None
    provenance = {"data": loaded.provenance.to_dict(), "valid": valid_info, "tokens": base.vocab.level,
                  "seed": seed}
    unknown = 0
    if base.vocab.unk is not None:
        unknown = sum(int((side.rows(heldout.index, base.vocab.pad) == base.vocab.unk).sum())
                      for side in (heldout.data.source, heldout.data.target))
    counts = {"read": n + (len(heldout) if valid else 0), "train": len(train), "heldout": len(heldout),
              "cut_too_long": cut + held_cut, "unknown_heldout_tokens": unknown}
    lengths = heldout.source_lengths()
    shape = (int(lengths.min()), int(lengths.max()), int(heldout.target_lengths().max()))
    if isinstance(base, ImportedTask):  # a Hugging Face or imported model's task stays one
        task = base.with_pairs(heldout, provenance, counts, *shape)
        task.name = base.name
    else:  # a model minitx trained: its vocabulary, the file's pairs
        task = PairsTask(base.vocab, heldout, None, provenance, counts, base.alignment_name
                         if base.alignment_name in EXPECTATIONS else "", *shape)
    task.train = train
    return task


def general_pairs(path: str, task: Task, positions: int, max_length: int, limit: int) -> PairSet:
    """The first `limit` pairs of `path` (a fine-tune's --general: pairs the model should still
    handle), read and cut as its training pairs are; DataError naming the file for one the
    model's tokenisers cannot read."""
    loaded = _read(path, task)
    _check_targets(path, loaded.data, task)
    whole, _ = cut_to(loaded.data, task, positions, max_length)
    return PairSet(whole, torch.arange(min(limit, len(whole))))


def is_recorded_base(saved, model: torch.nn.Module) -> bool:
    """Whether `model` is the base a fine-tuned file (a core Checkpoint) records: its weights'
    sha256 is the file's (what a resumed run goes on watching against, core/training/watching.py)."""
    try:
        recorded = json.loads(saved.metadata.get("trainer", "{}")).get("base", {}).get("sha256")
    except (ValueError, AttributeError):
        return False
    return recorded is not None and weights_sha256(model) == recorded
