"""Bundled checkpoint files and finding checkpoints by name or path.

`resolve("reverse")` is the bundled model; anything with a path separator or a .safetensors
suffix is taken as a path. Everything else about the file format belongs to core.checkpoint.
Finding a file imports no torch (a command says a checkpoint is missing before torch loads);
reading one imports the file format when it is first asked for.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from minitx.core.checkpoint_errors import CheckpointError

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
    if "/" in text or text.endswith(SUFFIX):
        raise CheckpointError(f"no such file: {text}")
    close = difflib.get_close_matches(text, bundled_names(), n=1, cutoff=0.75)
    if close:  # a mistyped name, as Click says of a mistyped subcommand
        raise CheckpointError(f"unknown checkpoint {text!r}: did you mean {close[0]!r}?")
    names = ", ".join(bundled_names()) or "none"
    raise CheckpointError(f"unknown checkpoint {text!r}: not a file, and not a bundled model ({names})")


def load(name_or_path: str | Path | None = None, device: str = "cpu"):
    """resolve() then core.checkpoint.load_checkpoint()."""
    path = resolve(name_or_path)
    from minitx.core.checkpoint import load_checkpoint  # torch: only once there is a file to read

    return load_checkpoint(path, device=device)


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

