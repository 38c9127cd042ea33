"""Checkpoint files: safetensors tensors plus JSON metadata. No pickle, ever.

Layout of a file:
  tensors   model.<parameter or buffer name>          the weights (float32/float16/bfloat16)
            train.<...>                                optional resumable training state
            history.<...>                              optional run history (core/history.py)
            lora.<module>.lora_A / .lora_B             a LoRA fine-tune's adapters (core/model/lora.py),
                                                       in place of the model's weights
            tokenizer.<file name>                      a subword vocabulary's tokeniser files, as uint8
                                                       bytes (core/data/subword.py), one per name
  metadata  format, format_version, minitx_version, model_config, task, vocab, training
            (summary), and with training state: train_config, trainer; an imported model's
            file also has src_vocab, its source vocabulary (docs/import.md), and a Hugging Face
            model's its generation settings, generation (core/data/generation.py)

A subword vocabulary's metadata names its files with their sizes and sha256; the bytes are
tensors, so a 2 MB tokenizer.json never swells the JSON header. Both sides of a model read
files of one folder, so a file both name (vocab.json, tokenizer.json) is stored once.

A file without `vocab` (written before vocabularies were stored) holds a digit task and reads
the digits vocabulary; a data task keeps its provenance and held-out pairs in `task`.

A LoRA fine-tune's file holds its adapters and, in its `lora` metadata, their settings and the
record of its base (the name it was given, its folder or model id, the sha256 of its weights):
megabytes, not the base's gigabytes. Reading it opens the base (through `open_base`, which
minitx.checkpoints gives: a folder, a model id or a file) and applies the adapters; a base that
is missing or whose weights changed is a CheckpointError saying so.

A file is untrusted input: everything is checked before a model is built from it, and every
problem becomes a CheckpointError whose message is one sentence.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import torch
from safetensors import safe_open

from minitx import __version__
from minitx.core.checkpoint_errors import CheckpointError, CheckpointWriteError  # noqa: F401 - raised here, and imported from here
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.generation import Generation
from minitx.core.data.subword import vocab_from_dict
from minitx.core.data.task import Task
from minitx.core.data.tasks import task_from_dict
from minitx.core.data.tokenisers import TokeniserFileError
from minitx.core.data.vocab import Vocab
from minitx.core.history import History, HistoryError
from minitx.core.model import lora
from minitx.core.model.transformer import Seq2Seq
from minitx.core.safetensors_file import write_tensors
from minitx.core.tensor_checks import all_finite

FORMAT = "minitx-checkpoint"
FORMAT_VERSION = 1
MAX_HEADER_BYTES = 16 * 1024 * 1024  # a real header is a few KB; refuse to parse a giant one
FLOAT_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOKENISER_PREFIX = "tokenizer."  # tensors holding a subword vocabulary's files
LORA_PREFIX = "lora."  # tensors holding a LoRA fine-tune's adapters


@dataclass
class Checkpoint:
    model: Seq2Seq
    model_config: ModelConfig
    task: Task
    summary: dict[str, Any]  # training summary: steps, loss, accuracy, seed, seconds, ...
    metadata: dict[str, str]  # everything in the file's header metadata
    path: Path | None = None
    train_state: dict[str, torch.Tensor] = field(default_factory=dict)  # "train." tensors
    dtype: str = "float32"
    history: History | None = None  # None: a file from before histories, or an export
    source_files: list[Path] = field(default_factory=list)  # a folder's weight files (path: the folder)
    lora: lora.LoraFile | None = None  # a LoRA fine-tune's adapters, their settings and its base

    @property
    def size_bytes(self) -> int:
        """The size of what was read: the file, or a folder's weight files."""
        if self.source_files:
            return sum(p.stat().st_size for p in self.source_files)
        return self.path.stat().st_size if self.path is not None else 0

    @property
    def resumable(self) -> bool:
        return bool(self.train_state) and "train_config" in self.metadata

    @property
    def train_config(self) -> TrainConfig | None:
        """How the file's model was trained, when the file says (a run's file, or an export of
        one); None when it does not. CheckpointError when it says it in a way that does not read
        as a TrainConfig (the file is untrusted)."""
        if "train_config" not in self.metadata:
            return None
        try:
            return TrainConfig.from_dict(json.loads(self.metadata["train_config"]))
        except (ValueError, TypeError, RecursionError) as e:
            raise CheckpointError(f"{self.path} has invalid training metadata: {e}") from None


# ---------------------------------------------------------------------------------------------
# Writing


def save_checkpoint(
    path: str | os.PathLike,
    model: Seq2Seq,
    task: Task,
    summary: dict[str, Any] | None = None,
    train_state: dict[str, torch.Tensor] | None = None,
    extra_metadata: dict[str, str] | None = None,
    dtype: str = "float32",
    history: History | None = None,
    lora_file: lora.LoraFile | None = None,
) -> Path:
    """Atomically write a checkpoint; returns its path. Raises CheckpointError. With `lora_file`
    (a model carrying LoRA adapters) the file holds the adapters and the record of the base."""
    if dtype not in FLOAT_DTYPES:
        raise CheckpointError(f"unknown dtype {dtype!r}; use one of {', '.join(FLOAT_DTYPES)}")
    weights = {f"{LORA_PREFIX}{name}": t for name, t in lora.adapter_tensors(model).items()} \
        if lora_file is not None else {f"model.{name}": t for name, t in model.own_state_dict().items()}
    tensors = {
        # not copied (a float32 model on the CPU): the file is written tensor by tensor from their
        # storage (core/safetensors_file.py), a training model's views of one buffer included
        name: t.detach().to("cpu", FLOAT_DTYPES[dtype])
        for name, t in weights.items()  # a tied table once
    }
    for name, t in tensors.items():  # never replace a good file with one no loader accepts
        if not all_finite(t):
            raise CheckpointError(
                f"not saving {path}: tensor {name} holds NaN or infinite values"
                + (f" in {dtype}" if dtype != "float32" else "")
            )
    for name, t in (train_state or {}).items():
        tensors[f"train.{name}"] = t.detach().cpu().contiguous()
    for name, t in (history.to_tensors() if history is not None else {}).items():
        tensors[f"history.{name}"] = t
    for name, data in _tokeniser_files(task, path).items():
        tensors[TOKENISER_PREFIX + name] = (torch.frombuffer(bytearray(data), dtype=torch.uint8) if data
                                            else torch.zeros(0, dtype=torch.uint8))
    metadata = {
        "format": FORMAT,
        "format_version": str(FORMAT_VERSION),
        "minitx_version": __version__,
        "model_config": json.dumps(model.cfg.to_dict()),
        "task": json.dumps(task.to_dict()),
        "vocab": json.dumps(task.vocab.to_dict()),
        "training": json.dumps(summary or {}),
        **(extra_metadata or {}),
    }
    if lora_file is not None:
        metadata["lora"] = json.dumps(lora_file.to_dict())
    if task.src_vocab is not task.vocab:  # a source vocabulary of its own (an imported model)
        metadata["src_vocab"] = json.dumps(task.src_vocab.to_dict())
    cfg = model.cfg
    if model.generation != Generation.minitx(cfg.sos_id, cfg.eos_id, cfg.pad_id):  # a folder's own
        metadata["generation"] = json.dumps(model.generation.to_dict())
    return write_atomic(Path(path), lambda out: write_tensors(out, tensors, metadata))


def _tokeniser_files(task: Task, path) -> dict[str, bytes]:
    """Both vocabularies' files by name, each once."""
    files: dict[str, bytes] = {}
    for vocab in (task.vocab, task.src_vocab):
        for name, data in vocab.files().items():
            if files.setdefault(name, data) != data:
                raise CheckpointError(f"not saving {path}: the two vocabularies read different files "
                                      f"named {name}")
    return files


def check_writable(path: Path) -> Path:
    """The folder `path` would be written in, or a CheckpointError saying why it cannot be:
    asked before minutes of training, and again by every write."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise CheckpointError(f"cannot write {path}: it is a directory")
    if not folder.is_dir():
        raise CheckpointError(f"cannot write {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise CheckpointError(f"cannot write {path}: folder {folder} is not writable")
    return folder


def write_atomic(path: Path, data: bytes | Callable[[BinaryIO], None]) -> Path:
    """Temporary file in the same folder, fsync, rename over the target: a crash at any moment
    leaves either the old file or the new one, never a half-written one. `data`: the bytes, or
    a function that writes them to the open file (a big file written piece by piece)."""
    folder = check_writable(path)
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        # mkstemp makes the file private (0600); give it the mode a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
        _fsync_dir(folder)
    except OSError as e:
        raise CheckpointWriteError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass
    return path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Reading


def read_raw(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Read tensors and metadata of any safetensors file, with one clear error for bad files."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no such file: {path}")
    if path.is_dir():
        raise CheckpointError(f"{path} is a directory, not a checkpoint file")
    if not os.access(path, os.R_OK):
        raise CheckpointError(f"cannot read {path}: permission denied")
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise CheckpointError(f"cannot read {path}: {e.strerror or e}") from None
    if size < 8 or len(head) < 8:
        raise CheckpointError(f"{path} is not a safetensors file (it is {size} bytes long)")
    (header_len,) = struct.unpack("<Q", head)
    if header_len > MAX_HEADER_BYTES or header_len > size - 8:
        raise CheckpointError(f"{path} is not a safetensors file, or it is truncated or corrupt")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = dict(f.metadata() or {})
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except Exception as e:  # the Rust parser raises its own types; all mean "corrupt"
        reason = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        raise CheckpointError(f"{path} is not a valid safetensors file ({reason})") from None
    return tensors, metadata


def _json_field(metadata: dict[str, str], key: str, path: Path) -> Any:
    if key not in metadata:
        raise CheckpointError(f"{path} has no {key!r} metadata; it was not written by minitx")
    try:
        return json.loads(metadata[key])
    except (ValueError, TypeError, RecursionError):  # RecursionError: absurdly nested JSON
        raise CheckpointError(f"{path} has malformed {key!r} metadata (not JSON)") from None


def weights_sha256(model: torch.nn.Module) -> str:
    """sha256 of a model's weights: every tensor of its state_dict by name, as float32 bytes."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        # the tensor's own bytes where it is float32 on the CPU already: no copy of the model
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy())
    return digest.hexdigest()


# How a LoRA file's base is opened: its record (name, folder, model id) -> the base's Checkpoint,
# a CheckpointError when it cannot be (minitx.checkpoints.open_base)
OpenBase = Callable[[dict], "Checkpoint"]


def load_checkpoint(path: str | os.PathLike, device: str | torch.device = "cpu",
                    open_base: OpenBase | None = None, merge: bool = True) -> Checkpoint:
    """Rebuild the model from the file alone (a LoRA fine-tune's: from its base, opened by
    `open_base`, with the adapters merged in, or with merge=False the base as it is and the
    adapters in .lora). Raises CheckpointError for anything wrong."""
    path = Path(path)
    tensors, metadata = read_raw(path)
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{path} is a safetensors file but not a minitx checkpoint")
    version = metadata.get("format_version", "")
    if version != str(FORMAT_VERSION):
        raise CheckpointError(
            f"{path} has checkpoint format version {version!r}; this minitx reads {FORMAT_VERSION}"
        )
    try:
        cfg = ModelConfig.from_dict(_json_field(metadata, "model_config", path))
        task_info = _json_field(metadata, "task", path)
    except CheckpointError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{path} has invalid metadata: {e}") from None
    files = {k[len(TOKENISER_PREFIX):]: _bytes(t, k, path) for k, t in tensors.items()
             if k.startswith(TOKENISER_PREFIX)}
    vocab, src_vocab = _vocab(metadata, path, files=files), _vocab(metadata, path, "src_vocab", files)
    unread = sorted(set(files) - {name for v in (vocab, src_vocab) if v is not None for name in v.files()})
    if unread:
        raise CheckpointError(f"{path} holds an unexpected tensor {TOKENISER_PREFIX + unread[0]!r}")
    try:
        task = task_from_dict(task_info, vocab, src_vocab)
        task.check_positions(cfg.max_len)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{path} has invalid metadata: {e}") from None
    mine = task.model_fields()
    theirs = {k: getattr(cfg, k) for k in mine}
    if mine != theirs:
        name = next(k for k in mine if mine[k] != theirs[k])
        raise CheckpointError(f"{path}: its vocabulary gives {name} {mine[name]}, its model config "
                              f"{theirs[name]}")
    summary = _json_field(metadata, "training", path)
    if not isinstance(summary, dict):
        raise CheckpointError(f"{path} has invalid 'training' metadata (not an object)")

    weights = {_renamed(k[len("model.") :]): t for k, t in tensors.items() if k.startswith("model.")}
    train_state = {_renamed(k[len("train.") :]): t for k, t in tensors.items() if k.startswith("train.")}
    adapted = "lora" in metadata
    known = ("model." if not adapted else LORA_PREFIX, "train.", "history.", TOKENISER_PREFIX)
    unknown = sorted(k for k in tensors if not k.startswith(known))
    if unknown:
        raise CheckpointError(f"{path} holds an unexpected tensor {unknown[0]!r}")
    # the weights a config claims are checked first: a file claiming a million layers is refused
    # for the tensors it lacks before anything of that size is looked at
    dtype = None if adapted else _check_weights(weights, cfg, path)
    history = _history(tensors, cfg, summary, path)
    generation = _generation(metadata, cfg, path)
    if adapted:
        model, lora_file, dtype = _lora_model(tensors, metadata, cfg, path, open_base, merge, device)
    else:
        lora_file = None
        model = Seq2Seq(cfg)
        model.load_own_state_dict({k: t.to(torch.float32) for k, t in weights.items()})
    model.to(device).eval()
    if generation is not None:
        model.generation = generation
    return Checkpoint(model, cfg, task, summary, metadata, path, train_state, dtype, history, lora=lora_file)


def _lora_model(tensors: dict[str, torch.Tensor], metadata: dict[str, str], cfg: ModelConfig, path: Path,
                open_base: OpenBase | None, merge: bool, device) -> tuple[Seq2Seq, lora.LoraFile, str]:
    """A LoRA file's model: its base opened and checked against the record (sha256 of its
    weights), then its adapters merged in (or, merge=False, the base as it is); (the model, the
    adapters with their settings and base record, the adapters' dtype)."""
    try:
        record = lora.LoraFile.from_dict(_json_field(metadata, "lora", path))
    except (ValueError, TypeError, KeyError) as e:
        raise CheckpointError(f"{path} has invalid LoRA settings: {e}") from None
    base_name = record.base.get("init") or record.base.get("folder") or "its base"
    if open_base is None:
        raise CheckpointError(f"{path} is a LoRA fine-tune of {base_name}: open it through minitx's "
                              "checkpoints (which open its base)")
    try:
        base = open_base(record.base)
    except CheckpointError as e:
        raise CheckpointError(f"{path} is a LoRA fine-tune of {base_name}, which cannot be opened "
                              f"({e})") from None
    if base.model_config.replace(dropout=cfg.dropout) != cfg:
        raise CheckpointError(f"{path} is a LoRA fine-tune of {base_name}, which is now another "
                              "architecture than the one it adapted")
    if weights_sha256(base.model) != record.base.get("sha256"):
        raise CheckpointError(f"{path} is a LoRA fine-tune of {base_name}, whose weights have changed "
                              "since (their sha256 is not the one recorded); the adapters fit only the "
                              "base they were trained on")
    model = base.model
    adapters = {k[len(LORA_PREFIX):]: t for k, t in tensors.items() if k.startswith(LORA_PREFIX)}
    expected = lora.expected_adapter_shapes(model, record.spec)
    for name, shape in expected.items():
        t = adapters.get(name)
        if t is None:
            raise CheckpointError(f"{path} is missing tensor {LORA_PREFIX + name!r} for its LoRA settings")
        if tuple(t.shape) != shape or t.dtype not in FLOAT_DTYPES.values():
            raise CheckpointError(f"{path}: tensor {LORA_PREFIX + name} has shape {tuple(t.shape)} and "
                                  f"dtype {t.dtype}; its LoRA settings need {shape}, a float")
        if not all_finite(t):
            raise CheckpointError(f"{path}: tensor {LORA_PREFIX + name} holds NaN or infinite values")
    extra = sorted(set(adapters) - set(expected))
    if extra:
        raise CheckpointError(f"{path} has tensor {LORA_PREFIX + extra[0]!r} that its LoRA settings "
                              "do not use")
    record = lora.LoraFile(record.spec, record.base, {k: t.to(torch.float32) for k, t in adapters.items()})
    if merge:
        lora.merge_file_adapters(model, record)
    names = {v: k for k, v in FLOAT_DTYPES.items()}
    return model, record, "+".join(sorted({names[t.dtype] for t in adapters.values()}))


def _history(tensors: dict[str, torch.Tensor], cfg: ModelConfig, summary: dict, path: Path):
    """The file's run history, validated against its model and its step count; None without."""
    found = {k[len("history."):]: t for k, t in tensors.items() if k.startswith("history.")}
    if not found:
        return None
    steps = summary.get("steps")
    last = steps if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0 else None
    try:
        return History.from_tensors(found, cfg.n_decoder_layers, cfg.n_heads, cfg.max_len,
                                    cfg.vocab_size, last)
    except HistoryError as e:
        raise CheckpointError(f"{path} has an invalid history: {e}") from None


def _generation(metadata: dict[str, str], cfg: ModelConfig, path: Path) -> Generation | None:
    """The file's generation settings (a Hugging Face model's), checked; None: minitx's rule."""
    if "generation" not in metadata:
        return None
    try:
        return Generation.from_dict(_json_field(metadata, "generation", path), cfg.vocab_size)
    except ValueError as e:
        raise CheckpointError(f"{path} has invalid generation settings: {e}") from None


def _vocab(metadata: dict[str, str], path: Path, key: str = "vocab",
           files: dict[str, bytes] | None = None) -> Vocab | None:
    """The file's vocabulary (or its source vocabulary: key "src_vocab"), checked, a subword one
    with its tokeniser's `files`; None when the file has none (a file from before vocabularies
    were stored; any file but an import's for src_vocab)."""
    if key not in metadata:
        return None
    what = "source vocabulary" if key == "src_vocab" else "vocabulary"
    try:
        return vocab_from_dict(_json_field(metadata, key, path), files)
    except TokeniserFileError as e:
        tensor = TOKENISER_PREFIX + e.file
        raise CheckpointError(f"{path}: tensor {tensor!r} {e.reason}") from None
    except ValueError as e:
        raise CheckpointError(f"{path} has an invalid {what}: {e}") from None


def _bytes(t: torch.Tensor, key: str, path: Path) -> bytes:
    if t.dtype != torch.uint8 or t.dim() != 1:
        raise CheckpointError(f"{path}: tensor {key!r} is not a file's bytes (uint8, one dimension)")
    return t.numpy().tobytes()


# Parameter names that minitx 0.1 wrote and a later name replaced (the output layer was called
# "generator", a word every torch.Generator also claims).
RENAMED = {"generator.": "output.", "optim.generator.": "optim.output."}


def _renamed(name: str) -> str:
    for old, new in RENAMED.items():
        if name.startswith(old):
            return new + name[len(old):]
    return name


def _check_weights(weights: dict[str, torch.Tensor], cfg: ModelConfig, path: Path) -> str:
    """Names, shapes, dtypes and finiteness against the config, before allocating a model.

    The expected shapes come from a one-layer model on the meta device, which costs no memory
    even if the config claims an enormous width; its layer names are repeated per layer and the
    walk stops at the first missing tensor, so a config claiming a million layers costs no time."""
    expected: dict[str, tuple[int, ...]] = {}
    for name, shape in _expected_shapes(cfg):
        if name not in weights:
            raise CheckpointError(f"{path} is missing tensor {'model.' + name!r} for its config")
        expected[name] = shape
    extra = sorted(set(weights) - set(expected))
    if extra:
        raise CheckpointError(f"{path} has tensor {'model.' + extra[0]!r} that its config does not use")
    dtypes = set()
    for name, shape in expected.items():
        t = weights[name]
        if tuple(t.shape) != shape:
            raise CheckpointError(
                f"{path}: tensor model.{name} has shape {tuple(t.shape)}, its config needs {shape}"
            )
        if t.dtype not in FLOAT_DTYPES.values():
            raise CheckpointError(f"{path}: tensor model.{name} has dtype {t.dtype}, not a float")
        if not all_finite(t):
            raise CheckpointError(f"{path}: tensor model.{name} holds NaN or infinite values")
        dtypes.add(t.dtype)
    names = {v: k for k, v in FLOAT_DTYPES.items()}
    return "+".join(sorted(names[d] for d in dtypes))


def _expected_shapes(cfg: ModelConfig):
    """Yield (state_dict name, shape) for cfg, lazily, layer by layer."""
    with torch.device("meta"):
        one = Seq2Seq(cfg.replace(n_encoder_layers=1, n_decoder_layers=1)).own_state_dict()
    layers = {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers}
    for stack, count in layers.items():
        per_layer = [(k[len(stack) + 3 :], tuple(t.shape)) for k, t in one.items()
                     if k.startswith(f"{stack}.0.")]
        for i in range(count):
            for rest, shape in per_layer:
                yield f"{stack}.{i}.{rest}", shape
    for k, t in one.items():
        if not k.startswith(("encoder.0.", "decoder.0.")):
            yield k, tuple(t.shape)


def describe_size(size: int) -> str:
    """A byte count as a person reads it: 812 B, 70.2 KB, 298.5 MB."""
    if size < 1024:
        return f"{size} B"
    units = ["KB", "MB", "GB"]
    exponent = min(len(units), int(math.log(size, 1024)))
    return f"{size / 1024**exponent:.1f} {units[exponent - 1]}"
