"""The title bar every screen shows: what is loaded, whether a run is training, and a tab for
each screen. The tabs and the run never get cut; the description gives way (… at its end), and
the 'minitx' name only shows where there is room for it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

TABS = ("Explore", "Train", "Compare")  # each is also the app's mode of the same name, lower case
BRAND = " [b]minitx[/b]  "


def tabs_markup(active: str) -> str:
    # A click on a tab switches to it (mouse is a bonus: e, t and c do the same).
    return "".join(f"[reverse b] {name} [/]" if name == active
                   else f" [@click=app.switch_mode('{name.lower()}')]{name}[/] " for name in TABS)


class TitleBar(Horizontal):
    """' minitx  reverse · post-norm · 236k params · cpu  ● run 2 · 34%  [Explore] Train Compare'."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $primary-background; }
    TitleBar #title-info { width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    TitleBar #title-run { width: auto; padding: 0 1; text-style: bold; }
    TitleBar #title-tabs { width: auto; }
    """

    def __init__(self, active: str) -> None:
        super().__init__()
        self.active = active
        self.info = "loading…"
        self.shorter: tuple[str, ...] = ()  # the same said in fewer characters, shortest last

    def compose(self) -> ComposeResult:
        yield Label(" loading…", id="title-info")
        run = Label("", id="title-run")
        run.display = False  # shown while a run trains: empty, its padding would take two cells
        yield run
        yield Label(tabs_markup(self.active), id="title-tabs")

    def on_mount(self) -> None:
        run_changed = getattr(self.app, "run_changed", None)
        if run_changed is not None and self.active != "Train":  # Train's own title names the run
            run_changed.subscribe(self, self._run_changed)
            self._run_changed(self.app)

    def _run_changed(self, app) -> None:
        label = self.query_one("#title-run", Label)
        label.update(app.run_status)
        label.display = bool(app.run_status)
        self._draw()

    def set_info(self, text: str, *shorter: str) -> None:
        """What is shown; `shorter` say the same in fewer characters (a model without three heads:
        'reverse without 3 heads'): the first that fits is shown, so the name is never pushed out."""
        self.info, self.shorter = text, shorter
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        from rich.markup import escape

        run = getattr(self.app, "run_status", "") if self.active != "Train" else ""
        taken = len(" ".join(TABS)) + 4 + (len(run) + 2 if run else 0)
        room = (self.size.width or self.app.size.width) - taken
        texts = (self.info, *self.shorter)
        info = next((t for t in texts if len(t) + 1 <= room), texts[-1])
        brand = BRAND if len("minitx  ") + len(info) + 1 <= room else " "
        self.query_one("#title-info", Label).update(brand + escape(info))
