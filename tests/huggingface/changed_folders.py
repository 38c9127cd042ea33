"""A tiny folder's copy with weights changed where a test knows (one layer scaled, one head's
queries), the model the test must find the change in blind; and a pairs file of the tiny
corpus for it to measure on."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tests.huggingface.tiny_tokenisers import corpus


def changed_copy(folder: Path, out: Path, edit: Callable[[dict[str, torch.Tensor]], None]) -> Path:
    """`folder` copied to `out`, its model.safetensors changed by edit(weights) in place."""
    shutil.copytree(folder, out)
    weights = load_file(str(out / "model.safetensors"))
    edit(weights)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def scaled(name: str, factor: float) -> Callable[[dict[str, torch.Tensor]], None]:
    """An edit multiplying the tensor `name` by `factor`."""
    def edit(weights: dict[str, torch.Tensor]) -> None:
        weights[name] = weights[name] * factor
    return edit


def write_pairs(path: Path, pairs) -> Path:
    """(source, target) pairs as a TSV file."""
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return path


def pairs_file(path: Path, count: int, seed: int) -> Path:
    """`count` source/target pairs of the tiny corpus as a TSV file."""
    return write_pairs(path, corpus(count, seed=seed))
