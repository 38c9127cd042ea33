"""Failures in key actions, redraws and workers become one line in the app, never a traceback and
never a Python exception's name: what went wrong in words, and for a measurement that needs
example pairs the model does not keep, how to give it some (the O key)."""

from __future__ import annotations

import functools
import sys

# What the app adds to "this imported model keeps no example pairs to measure on".
PAIRS_KEY_HINT = "O chooses a file of source/target pairs to measure it on"


def error_text(error: BaseException) -> str:
    """One line for a person: the message of an error minitx means people to read (a bad value,
    a file, a checkpoint), the pairs hint for a measurement without examples, and for anything
    else its message after 'unexpected error'."""
    missing = sys.modules.get("minitx.core.data.imported_task")
    if missing is not None and isinstance(error, missing.MissingPairs):
        return f"{error}; {PAIRS_KEY_HINT}"
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    text = " ".join(str(error).split())
    checkpoint = sys.modules.get("minitx.core.checkpoint")
    expected = isinstance(error, ValueError) or (
        checkpoint is not None and isinstance(error, checkpoint.CheckpointError))
    if expected and text:
        return text
    return f"unexpected error: {text}" if text else "unexpected error (it gave no message)"


def lacks_pairs(screen, what: str) -> bool:
    """Whether the model on `screen` (its session's) keeps no examples to measure `what` on; if
    so, say once how to give it some (O) instead of opening a view that cannot fill."""
    record = screen.session.record
    if record is None or record.task.has_examples:
        return False
    from minitx.core.data.imported_task import NO_PAIRS

    screen.notify(f"{what} needs examples: {NO_PAIRS}; {PAIRS_KEY_HINT}", severity="warning",
                  markup=False, timeout=8)
    return True


def one_line_errors(method):
    """Turn an unexpected exception in a key action or a redraw into a one-line notification:
    a person at a terminal never gets a traceback, and the app keeps running."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every failure becomes a message
            self.notify(error_text(e), severity="error", markup=False, timeout=10)
            return None

    return guarded
