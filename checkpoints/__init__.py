"""Bundled checkpoint files and finding checkpoints by name or path.

`resolve("reverse")` is the bundled model; anything with a path separator or a .safetensors
suffix is taken as a path; a Hugging Face model folder (one with a config.json) opens as a model
too, and a model id such as `Helsinki-NLP/opus-mt-en-de` is looked up in the local Hugging Face
cache (core/importing/hf_cache.py, no network). Everything else about the file format belongs
to core.checkpoint, and about folders to core.importing.huggingface. Finding a file imports no
torch (a command says a checkpoint is missing before torch loads); reading one imports the file
format (or, for a folder, the tokenisers' libraries) when it is first asked for.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from minitx.core.checkpoint_errors import CheckpointError
from minitx.core.importing.hf_cache import NotInCache, looks_like_model_id, resolve_model_id

BUNDLED_DIR = Path(__file__).resolve().parent
DEFAULT = "reverse"
SUFFIX = ".safetensors"


def bundled_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob(f"*{SUFFIX}"))


def resolve(name_or_path: str | Path | None = None) -> Path:
    """A bundled name (e.g. 'reverse') or a path -> an existing file path; CheckpointError if
    neither. None means the default bundled model."""
    text = str(name_or_path) if name_or_path is not None else DEFAULT
    if not text.strip():
        raise CheckpointError("no checkpoint given: name a bundled model or a .safetensors path")
    path = Path(text).expanduser()
    if path.exists():
        return path
    bundled = BUNDLED_DIR / f"{text}{SUFFIX}"
    if "/" not in text and not text.endswith(SUFFIX) and bundled.exists():
        return bundled
    if looks_like_model_id(text):
        try:
            return resolve_model_id(text)
        except NotInCache as e:
            raise CheckpointError(str(e)) from None
    if "/" in text or text.endswith(SUFFIX):
        raise CheckpointError(f"no such file: {text}")
    close = difflib.get_close_matches(text, bundled_names(), n=1, cutoff=0.75)
    if close:  # a mistyped name, as Click says of a mistyped subcommand
        raise CheckpointError(f"unknown checkpoint {text!r}: did you mean {close[0]!r}?")
    names = ", ".join(bundled_names()) or "none"
    raise CheckpointError(f"unknown checkpoint {text!r}: not a file, and not a bundled model ({names})")


def load(name_or_path: str | Path | None = None, device: str = "cpu", progress=None):
    """resolve() then core.checkpoint.load_checkpoint(), or for a Hugging Face folder (or model
    id) open_folder(); progress(what, fraction) hears how a folder's reading goes."""
    path = resolve(name_or_path)
    if path.is_dir():
        model_id = str(name_or_path) if looks_like_model_id(str(name_or_path or "")) else ""
        return open_folder_checkpoint(path, device, progress, model_id)
    from minitx.core.checkpoint import load_checkpoint  # torch: only once there is a file to read

    return load_checkpoint(path, device=device, open_base=lambda record: open_base(record, device))


def open_base(record: dict, device: str = "cpu"):
    """The base a LoRA file adapts, from its record: its folder, else its model id, else the name
    it was given (a file or a bundled name), the first that opens; CheckpointError (the last
    reason) when none does."""
    names = [record.get(key) for key in ("folder", "model_id", "init")]
    tried = [n for i, n in enumerate(names) if isinstance(n, str) and n and n not in names[:i]]
    if not tried:
        raise CheckpointError("its record names no base")
    for name in tried:
        try:
            return load(name, device)
        except CheckpointError as e:
            reason = e
    raise reason


def open_folder_checkpoint(folder: Path, device: str = "cpu", progress=None, model_id: str = ""):
    """A Hugging Face model folder as a core Checkpoint, as if `minitx import` had converted it;
    any problem a CheckpointError naming the file."""
    # torch and the tokenisers' libraries: only once there is a folder to read
    from minitx import __version__
    from minitx.core.checkpoint import FORMAT, FORMAT_VERSION, Checkpoint
    from minitx.core.importing.errors import ImportFileError
    from minitx.core.importing.huggingface import is_folder, open_folder

    if not is_folder(folder):
        raise CheckpointError(f"{folder} is a folder, but not a model's: it has no config.json (a Hugging "
                              "Face model folder has one; a minitx checkpoint is a .safetensors file)")
    try:
        opened = open_folder(folder, progress, model_id)
    except ImportFileError as e:
        raise CheckpointError(str(e)) from None
    model = opened.model.to(device)
    metadata = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "minitx_version": __version__,
                "source": "huggingface"}
    summary = {**opened.summary, **({"notes": opened.notes} if opened.notes else {})}
    return Checkpoint(model, model.cfg, opened.task, summary, metadata, folder, source_files=opened.files)


def model_folder_of(path: str | Path) -> Path | None:
    """The Hugging Face model folder that `path` is, or is a file of (its config.json, its weights,
    its tokeniser's files): what opening that path opens. None for anything else, and for a
    .safetensors file of another name kept in such a folder (a checkpoint of its own)."""
    from minitx.core.importing.hf_weights import WEIGHT_FILES
    from minitx.core.importing.huggingface import is_folder

    path = Path(path).expanduser()
    if is_folder(path):
        return path
    if not path.is_file() or not is_folder(path.parent):
        return None
    if path.suffix == SUFFIX and path.name not in WEIGHT_FILES and not path.name.startswith("model-"):
        return None  # model-00001-of-00002.safetensors: a shard of the folder's own weights
    return path.parent


def model_folders(folder: str | Path) -> list[Path]:
    """The Hugging Face model folders directly inside `folder`, sorted by name."""
    from minitx.core.importing.huggingface import is_folder

    return sorted(p for p in Path(folder).iterdir() if is_folder(p))


@dataclass(frozen=True)
class Listing:
    name: str  # bundled name, or the file's path
    path: Path
    task: str
    size_bytes: int
    accuracy: float | None
    steps: int | None
    bug: str
    error: str = ""  # set when the file could not be read; the other fields are then empty


def describe(path: Path, name: str | None = None) -> Listing:
    """Read just the metadata of one file, never failing: problems go into `error`."""
    import json

    from minitx.core.checkpoint import read_raw

    shown = name or str(path)
    try:
        _, meta = read_raw(path)
        task = json.loads(meta.get("task", "{}")).get("name", "?")
        summary = json.loads(meta.get("training", "{}"))
        return Listing(shown, path, task, path.stat().st_size, summary.get("accuracy"),
                       summary.get("steps"), summary.get("bug") or "")
    except (CheckpointError, ValueError, AttributeError, OSError, RecursionError) as e:
        return Listing(shown, path, "", 0, None, None, "", error=str(e))


def list_checkpoints(folder: str | Path | None = None) -> list[Listing]:
    """Bundled checkpoints, then *.safetensors in `folder` (if given), sorted by name."""
    found = [describe(BUNDLED_DIR / f"{n}{SUFFIX}", n) for n in bundled_names()]
    if folder is not None:
        folder = Path(folder)
        if not folder.is_dir():
            raise CheckpointError(f"{folder} is not a folder")
        found += [describe(p) for p in sorted(folder.glob(f"*{SUFFIX}"))]
    return found

