"""`python -m minitx.tui.served_app [CKPT ...]`: the app of one browser tab of `minitx serve`.

It is `minitx-tui [CKPT ...]` on tui/browser_driver.py's driver. textual-serve names Textual's own
web driver in TEXTUAL_DRIVER; Textual reads that variable once, when it is first imported, so it
is replaced here before anything imports Textual.
"""

from __future__ import annotations

import os

DRIVER = "minitx.tui.browser_driver:BrowserDriver"


def main() -> None:
    os.environ["TEXTUAL_DRIVER"] = DRIVER
    from minitx.tui.cli import tui_main

    tui_main()


if __name__ == "__main__":
    main()
