"""Unexpected failures in key actions and redraws become one line in the app, never a traceback."""

from __future__ import annotations

import functools


def one_line_errors(method):
    """Turn an unexpected exception in a key action or a redraw into a one-line notification:
    a person at a terminal never gets a traceback, and the app keeps running."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every failure becomes a message
            self.notify(f"{type(e).__name__}: {e}", severity="error", markup=False, timeout=10)
            return None

    return guarded

