"""Where a long command's progress goes: a stream that goes quiet, instead of ending the work,
once nobody reads it any more (a closed pipe: `minitx train | head -1`; a terminal that hung up).

Everything a run writes as it goes passes through one QuietWhenClosed per stream, so a broken
pipe is handled here, once, and training and saving carry on.
"""

from __future__ import annotations

import errno
import os
import sys

GONE = (errno.EPIPE, errno.EIO, errno.ENXIO, errno.EBADF)  # the reader, or the terminal, is gone


class QuietWhenClosed:
    """A text stream that writes through to `stream` until a write fails because its reader
    is gone; from then on it swallows everything. `closed_at` says when (a short phrase)."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.closed_at: str | None = None

    @property
    def gone(self) -> bool:
        return self.closed_at is not None

    def write(self, text: str) -> int:
        if self.closed_at is None:
            try:
                self._stream.write(text)
                self._stream.flush()  # progress is worth seeing as it happens; a failure shows here
            except (BrokenPipeError, OSError, ValueError) as e:  # ValueError: the file was closed
                if isinstance(e, OSError) and not isinstance(e, BrokenPipeError) and e.errno not in GONE:
                    raise
                self.mark_gone("its reader closed it")
        return len(text)

    def mark_gone(self, why: str) -> None:
        """Stop writing; point the file descriptor at /dev/null so the interpreter's last flush at
        exit cannot fail again."""
        self.closed_at = why
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a real file (CliRunner's capture)
            pass

    def flush(self) -> None:
        if self.closed_at is None:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.mark_gone("its reader closed it")

    def isatty(self) -> bool:
        try:
            return self.closed_at is None and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str):  # encoding, fileno, ...: the stream's own
        return getattr(self._stream, name)


def quiet_stdout() -> QuietWhenClosed:
    return QuietWhenClosed(sys.stdout)


def quiet_stderr() -> QuietWhenClosed:
    return QuietWhenClosed(sys.stderr)
