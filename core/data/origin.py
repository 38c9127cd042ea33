"""Where a model trained outside minitx came from, as its task keeps it (`Task.origin`; None for
a task of minitx's own): what `minitx import` or opening a Hugging Face folder recorded.

The record is plain JSON, kept whole in a checkpoint (files and their sha256, special tokens as
the files spell them, the layout or the family); the few facts code acts on are typed fields,
read from it once, so no caller looks into the record for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Origin:
    record: dict[str, Any]  # everything recorded, as a checkpoint stores it
    family: str = field(init=False)  # a Hugging Face folder's family (hf_weights'), "" otherwise
    model_type: str = field(init=False)  # its config.json's model_type ("mt5" for a t5)
    folder: str = field(init=False)  # the folder it was opened from
    model_id: str = field(init=False)  # the Hub id it was asked for, "" for a folder given by path
    layout: str = field(init=False)  # `minitx import`'s built-in layout, "" otherwise

    def __post_init__(self) -> None:
        for name in ("family", "model_type", "folder", "model_id", "layout"):
            object.__setattr__(self, name, _text(self.record, name))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.record)
