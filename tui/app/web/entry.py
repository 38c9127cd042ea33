"""`python -m minitx.tui.app.web.entry [CKPT ...]`: the app of one browser tab of `minitx serve`.

It is `minitx-tui [CKPT ...]` on tui/app/web/driver.py's driver. textual-serve names Textual's own
web driver in TEXTUAL_DRIVER; Textual reads that variable once, when it is first imported, so it
is replaced here before anything imports Textual.
"""

from __future__ import annotations

import os
import sys
import time

DRIVER = "minitx.tui.app.web.driver:BrowserDriver"
# textual-serve prints what the app wrote on stderr (where a closed tab's run was saved) once the
# app's stdout ends, and drops what its reader had not read by then (textual-serve's
# AppService.run cancels that reader): nothing else orders the two.
STDERR_GRACE = 0.3  # seconds between the end of stderr and the end of stdout


def main() -> None:
    os.environ["TEXTUAL_DRIVER"] = DRIVER
    from minitx.tui.cli.main import tui_main

    try:
        tui_main()
    finally:
        end_stderr_first()


def end_stderr_first() -> None:
    """Close stderr (its reader in the server sees it end) and wait a moment before exiting,
    which ends stdout."""
    try:
        sys.stderr.flush()
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
    except (OSError, ValueError):
        return
    time.sleep(STDERR_GRACE)


if __name__ == "__main__":
    main()
