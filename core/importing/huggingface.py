"""Opening a Hugging Face encoder-decoder folder: its model (hf_weights.py), its generation
settings (hf_generation.py) and its tokenisers (hf_tokenisers.py) -> a minitx model and its
task, exactly as transformers computes them (docs/huggingface.md). Nothing is built until every
file has been read and checked; each problem is one ImportFileError line naming the file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from minitx.core.data.generation import Generation
from minitx.core.data.hf_task import HuggingFaceTask
from minitx.core.data.origin import Origin
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.hf_generation import read_generation
from minitx.core.importing.hf_tokenisers import read_tokenisers
from minitx.core.importing.hf_weights import family_of, model_config, read_json, read_weights
from minitx.core.importing.importer import file_facts
from minitx.core.model.transformer import Seq2Seq

Progress = Callable[[str, float], None]  # (what is being done, fraction done)


@dataclass
class FolderModel:
    model: Seq2Seq  # with the folder's generation settings as model.generation
    family: str  # marian, t5 or bart
    config: dict[str, Any]  # config.json as read
    files: list[Path]  # the weight files read
    notes: list[str] = field(default_factory=list)  # what a person should hear once


def is_folder(path: Path) -> bool:
    """A folder that holds a config.json: a Hugging Face model folder (or meant to be one)."""
    return path.is_dir() and (path / "config.json").exists()


def read_model(folder: str | Path, progress: Progress | None = None) -> FolderModel:
    """The folder's network and generation settings; ImportFileError for anything wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ImportFileError(f"{folder} is not a folder")
    config = read_json(folder / "config.json", " (a Hugging Face model folder has one)")
    family = family_of(folder, config)
    cfg = model_config(folder, config, family)

    def weights_progress(done: int, total: int) -> None:
        if progress is not None:
            progress("reading the weights", done / max(1, total))

    weights = read_weights(folder, family, cfg, weights_progress)
    generation, notes = read_generation(folder, config, weights.cfg.vocab_size)
    if progress is not None:
        progress("building the model", 1.0)
    with torch.device("meta"):  # no allocation, no initialisation: the file's tensors become the weights
        model = Seq2Seq(weights.cfg)
    model.load_own_state_dict(weights.tensors, assign=True)
    model.eval()
    model.generation = generation
    _check_start(folder, generation, weights.cfg.sos_id)
    return FolderModel(model, family, config, weights.files, notes)


def _check_start(folder: Path, generation: Generation, sos: int) -> None:
    if generation.start != sos:
        raise ImportFileError(f"{folder}: generation_config.json starts the decoder at {generation.start}, "
                              f"config.json at {sos}; they must agree")


def open_folder(folder: str | Path, progress: Progress | None = None, model_id: str = "",
                hashes: bool = False) -> Opened:
    """The folder's model, its tokenisers and its task, every file read and checked; the
    origin records the folder (and the model id it was asked for), the family and each file
    read with its size, and with `hashes` its sha256 (what `minitx import` keeps: hashing a
    large file costs a good share of opening it)."""
    folder = Path(folder)
    read = read_model(folder, progress)
    cfg = read.model.cfg
    if progress is not None:
        progress("reading the tokenisers", 1.0)
    src_vocab, vocab = read_tokenisers(folder, read.config, cfg.sos_id)
    _check_vocabularies(folder, cfg, src_vocab, vocab)
    origin = {"family": read.family, "model_type": read.config.get("model_type"), "folder": str(folder),
              "model_id": model_id or None,
              "files": {p.name: _facts(p, hashes) for p in [folder / "config.json", *read.files]}}
    task = HuggingFaceTask(vocab, src_vocab, Origin(origin), max_len=cfg.max_len, min_len=1)
    summary = {"imported": {"layout": "huggingface", "family": read.family, "file": folder.name}}
    return Opened(read.model, task, summary, read.notes, read.files)


@dataclass
class Opened:
    model: Seq2Seq
    task: HuggingFaceTask
    summary: dict[str, Any]  # a checkpoint's training summary: where the model came from
    notes: list[str]
    files: list[Path]  # the weight files read

    @property
    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files)


def _facts(path: Path, hashes: bool) -> dict[str, Any]:
    """A file's size, and its sha256 when asked."""
    if not hashes:
        return {"size": path.stat().st_size}
    return {k: v for k, v in file_facts(path).items() if k != "file"}


def _check_vocabularies(folder: Path, cfg, src_vocab, vocab) -> None:
    """The tokenisers' ids against the model's: sizes within its tables, the same specials."""
    for what, v, rows in (("source", src_vocab, cfg.source_vocab_size), ("target", vocab, cfg.vocab_size)):
        if v.size != rows:
            raise ImportFileError(f"{folder}: the {what} tokeniser has {v.size:,} ids, the model's table "
                                  f"{rows:,} rows")
    for name, mine, theirs in (("pad", vocab.pad, cfg.pad_id), ("eos", vocab.eos, cfg.eos_id)):
        if mine != theirs:
            raise ImportFileError(f"{folder}: the tokeniser's {name} is id {mine}, config.json's {theirs}")
