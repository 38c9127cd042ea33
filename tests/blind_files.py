"""Checkpoints as a user brings them to the doctor: every label minitx left of a bug removed.

A module of the tests package, shared by the core, command-line
and app tests of the doctor. A diagnosis is tested blind: the doctor must find the bug from the
weights alone, as it must for a file written by the user's own code.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file


def strip_bug_hints(source, out, history: bool = True) -> Path:
    """Copy checkpoint `source` to `out` with the bug fields dropped: model_config's "bug" set to
    "" (so the file rebuilds a correct model around weights trained under the bug: the user's
    situation), train_config's and the training summary's "bug" removed. With history=False the
    run's record goes too (history tensors, training summary, train_config, trainer state), as
    in a model from other code that has no minitx training metadata at all."""
    with safe_open(str(source), framework="pt") as f:
        metadata = dict(f.metadata())
        tensors = {key: f.get_tensor(key) for key in f.keys()
                   if history or not key.startswith(("history.", "train."))}
    model_config = json.loads(metadata["model_config"])
    model_config["bug"] = ""
    metadata["model_config"] = json.dumps(model_config)
    for key in ("train_config", "training"):
        if key in metadata:
            fields = json.loads(metadata[key])
            fields.pop("bug", None)
            metadata[key] = json.dumps(fields)
    if not history:
        metadata["training"] = json.dumps({})
        metadata.pop("train_config", None)
        metadata.pop("trainer", None)
    save_file(tensors, str(out), metadata=metadata)
    return Path(out)


def mentions(path, word: str) -> bool:
    """Whether `word` appears anywhere in the file's metadata or its name."""
    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata())
    return word in json.dumps(metadata) or word in Path(path).name


def strip_settings(source, out) -> Path:
    """Copy checkpoint `source` to `out` without the run's settings (train_config: --init, the
    learning rate and its warmup, the bug; the trainer's state): the weights, their task, the
    run's history and its summary's figures stay, as a file whose settings nobody kept."""
    with safe_open(str(source), framework="pt") as f:
        metadata = dict(f.metadata())
        tensors = {key: f.get_tensor(key) for key in f.keys() if not key.startswith("train.")}
    metadata.pop("train_config", None)
    metadata.pop("trainer", None)
    training = json.loads(metadata.get("training", "{}"))
    training.pop("bug", None)
    training.pop("base", None)  # the base's name and weights' hash: a label, not a measurement
    metadata["training"] = json.dumps(training)
    save_file(tensors, str(out), metadata=metadata)
    return Path(out)
