"""What a model wrote, as a terminal shows it: a control character a tokeniser decodes (a BART
byte piece can be \\x12) written as its escape, never sent raw to the terminal, and an empty
output said in words, never a bare label."""

from __future__ import annotations

import unicodedata

NOTHING = "(nothing: its end token first)"


def printable(text: str) -> str:
    """`text` with each control character (Unicode category Cc, tab and newline included: a
    model's output is one line) as \\xNN."""
    return "".join(f"\\x{ord(c):02x}" if unicodedata.category(c) == "Cc" else c for c in text)


def output_text(text: str) -> str:
    """A model's output for a line of its own: printable, or NOTHING when it wrote nothing."""
    return printable(text) if text.strip() else NOTHING
