"""The one error of importing: a user's file (weights, mapping or vocabulary) that cannot be used."""

from __future__ import annotations


class ImportFileError(ValueError):
    """str(e) is one line for a person, naming the file and the line or key at fault. The
    message is folded onto one line because parts of it (keys, tokens, paths) come from the file."""

    def __init__(self, message: object = "") -> None:
        super().__init__(" ".join(str(message).split()))
