"""What a checkpoint file that cannot be used raises, with no torch: finding a file by name or path
(minitx.checkpoints.resolve) says a file is missing before a command has loaded torch.
core/checkpoint.py, the file format, raises them too."""

from __future__ import annotations


class CheckpointError(Exception):
    """A checkpoint that cannot be read or written; str(e) is one sentence for a person.

    The message is folded onto one line: parts of it (metadata keys, paths) come from the file."""

    def __init__(self, message: object = "") -> None:
        super().__init__(" ".join(str(message).split()))


class CheckpointWriteError(CheckpointError):
    """Writing failed part way (a full disk, a lost mount), not because of the path asked for."""
