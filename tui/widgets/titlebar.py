"""The title bar every screen shows: what is loaded, and a tab for each screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

TABS = ("Explore", "Train", "Compare")  # each is also the app's mode of the same name, lower case


class TitleBar(Horizontal):
    """' minitx  reverse · post-norm · 236k params · cpu     [Explore] Train  Compare'."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $primary-background; }
    TitleBar #title-info { width: 1fr; }
    TitleBar #title-tabs { width: auto; }
    """

    def __init__(self, active: str) -> None:
        super().__init__()
        self.active = active

    def compose(self) -> ComposeResult:
        yield Label(" [b]minitx[/b]  loading…", id="title-info")
        # A click on a tab switches to it (mouse is a bonus: e, t and c do the same).
        tabs = "  ".join(
            f"[reverse b] {name} [/]" if name == self.active
            else f"[@click=app.switch_mode('{name.lower()}')]{name}[/]"
            for name in TABS)
        yield Label(tabs + " ", id="title-tabs")

    def set_info(self, text: str) -> None:
        from rich.markup import escape

        self.query_one("#title-info", Label).update(f" [b]minitx[/b]  {escape(text)}")
