"""Reading the weights a user brings: a state_dict, saved as safetensors or with torch.save.

What is read: a flat mapping of names (strings) to tensors, the object `model.state_dict()`
returns, from
- a safetensors file (its metadata is not used), or
- a torch file (.pt, .pth; zip or the older pickle format), read with
  torch.load(weights_only=True) only: torch's restricted unpickler builds tensors, dicts and
  numbers and refuses every other class, so no code in a file ever runs.
Which of the two a file is, its first bytes say, not its name. Tensors are loaded onto the CPU
(a file saved from a GPU reads on a machine without one), into memory of their own: dropping
one frees it (core/safetensors_file.py).

What is refused, each with one line naming the file (and the key) and how to save the weights
instead:
- a pickled model (torch.save(model)), a TorchScript archive (torch.jit.save), or anything else
  that is not a mapping: torch.save(model.state_dict(), "model.pt") saves what is read here;
- a training checkpoint that holds a state_dict among other things ({"model": ..., "optimizer":
  ..., "epoch": 3}). Refused rather than guessed: which entry holds the model to import (the
  model, an EMA copy, a discriminator) is the user's call. The message names the entry that
  looks like weights and the line that saves it alone;
- a key that is not a string, a value that is not a (dense) tensor, no tensors at all;
- a missing file, a folder, an unreadable, truncated or corrupt file.
"""

from __future__ import annotations

import os
import pickle
import re
import struct
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path

import torch

from minitx.core.importing.errors import ImportFileError
from minitx.core.safetensors_file import read_tensors

SAFETENSORS, TORCH = "safetensors", "torch"
SAVE_HINT = 'save the weights alone with torch.save(model.state_dict(), "model.pt")'


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The file's tensors by name (a torch file's in its order, a safetensors file's sorted by
    name, as safetensors lists them). Raises ImportFileError."""
    path = Path(path)
    kind = file_kind(path)
    state = _read_safetensors(path) if kind == SAFETENSORS else _read_torch(path)
    return _checked(state, path)


def file_kind(path: Path) -> str:
    """SAFETENSORS or TORCH, from the file's first bytes; ImportFileError for anything else."""
    if not path.exists():
        raise ImportFileError(f"no such file: {path}")
    if path.is_dir():
        raise ImportFileError(f"{path} is a folder, not a weights file")
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError as e:
        raise ImportFileError(f"cannot read {path}: {e.strerror or e}") from None
    if len(head) == 9 and head[8:9] == b"{":  # safetensors: a u64 header length, a JSON header
        (header_len,) = struct.unpack("<Q", head[:8])
        if header_len <= size - 8:
            return SAFETENSORS
        raise ImportFileError(f"{path} is a truncated safetensors file (its header claims {header_len} "
                              f"bytes of {size})")
    if head.startswith(b"PK\x03\x04") or head.startswith(b"\x80"):  # zip (torch >= 1.6), pickle
        return TORCH
    raise ImportFileError(f"{path} is neither a safetensors file nor a torch .pt/.pth file "
                          f"({size} bytes, starting {head[:4]!r})")


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:  # into memory of its own, not a mapping of the file (core/safetensors_file.py)
        return read_tensors(path)[0]
    except Exception as e:  # the Rust parser raises its own types; every one means "corrupt"
        raise ImportFileError(f"{path} is not a valid safetensors file ({_first_line(e)})") from None


def _read_torch(path: Path) -> object:
    if _is_torchscript(path):
        raise ImportFileError(f"{path} is a TorchScript archive (torch.jit.save), not a state_dict; "
                              f"{SAVE_HINT}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's advice to trust the file: never taken here
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # torch >= 2.4 says "Unsupported global: GLOBAL a.B", earlier ones "Unsupported class a.B"
        found = re.search(r"(?:GLOBAL|Unsupported class) ([\w.]+)", str(e))
        if found:  # a class the restricted unpickler would have had to import and run
            raise ImportFileError(
                f"{path} holds a pickled Python object ({found.group(1)}), not just tensors: it looks "
                f"like torch.save(model), which minitx never unpickles; {SAVE_HINT}") from None
        raise ImportFileError(f"{path} is not a valid torch file ({_first_line(e)})") from None
    except Exception as e:  # truncated zips, EOF inside a pickle, ...
        raise ImportFileError(f"{path} is not a valid torch file, or it is truncated "
                              f"({_first_line(e) or type(e).__name__})") from None


def _is_torchscript(path: Path) -> bool:
    """A TorchScript archive is a zip with constants.pkl beside the data (what torch checks)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("/constants.pkl") or name == "constants.pkl"
                       for name in archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def _checked(state: object, path: Path) -> dict[str, torch.Tensor]:
    """A flat mapping of names to dense tensors, or the one-line reason it is not one."""
    if isinstance(state, torch.Tensor):
        raise ImportFileError(f"{path} holds a single tensor, not a state_dict of named tensors; "
                              f"{SAVE_HINT}")
    if not isinstance(state, Mapping):
        raise ImportFileError(f"{path} holds a {type(state).__name__}, not a state_dict; {SAVE_HINT}")
    if not state:
        raise ImportFileError(f"{path} holds no tensors")
    nested = [key for key, value in state.items() if isinstance(value, Mapping)]
    if nested:
        weights = next((key for key in nested if _looks_like_weights(state[key])), None)
        if weights is not None:
            raise ImportFileError(
                f"{path} is a checkpoint of {len(state)} entries with the weights under {weights!r}, not a "
                f"state_dict itself; save that entry alone: torch.save(checkpoint[{weights!r}], "
                f'"model.pt")')
        raise ImportFileError(f"{path}: key {nested[0]!r} holds a nested dict, not a tensor; {SAVE_HINT}")
    for key, value in state.items():
        if not isinstance(key, str):
            raise ImportFileError(f"{path}: key {key!r} is not a name (a state_dict's keys are strings)")
        if not isinstance(value, torch.Tensor):
            raise ImportFileError(f"{path}: key {key!r} holds a value of type {type(value).__name__}, not "
                                  f"a tensor; {SAVE_HINT}")
        if value.layout != torch.strided:
            raise ImportFileError(f"{path}: key {key!r} holds a {value.layout} tensor; minitx reads dense "
                                  f"tensors only")
    return dict(state)


def _looks_like_weights(value: Mapping) -> bool:
    return bool(value) and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:160] if text else type(e).__name__
