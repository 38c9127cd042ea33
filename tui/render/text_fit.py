"""Text cut to fit a width: the one rule every label, line and message that may be too long
follows (its end gives way to …), so a cut reads the same everywhere."""

from __future__ import annotations


def end_cut(text: str, width: int) -> str:
    """`text` whole if it fits `width` (>= 1) cells, else its first width - 1 characters and …."""
    return text if len(text) <= width else text[: width - 1] + "…"
