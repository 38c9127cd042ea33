"""The ? screen, made from the bindings: every key that works on the screen it was opened from,
with the binding's own tooltip, so the help and the footer come from one source and can never
disagree. A screen adds a short HELP_NOTE of what its pictures mean.

Everything must fit 80x24 without scrolling: the keys are packed into lines of at most 76
characters, the screen's note follows, then how to reach the other screens.
"""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static

from minitx.tui.app.widgets.keybar import packed_keys

WIDTH = 76  # characters a help line may take inside the 80-column dialog
ANYWHERE_GAP = "  "  # between the app's own keys, as the footer separates keys
DOCS = "More in docs/: model, training, curves, components, interventions, checks"
# The app's ? key; a dialog lists it too (a modal screen hides the app's own bindings), as it lists E.
HELP_BINDING = Binding("question_mark", "app.help", "help", key_display="?", tooltip="this help")
# Textual's own (ctrl+q, the command palette): not ours to list
TEXTUAL_OWN = {b.key for b in App.BINDINGS} | {App.COMMAND_PALETTE_BINDING}


def _working(screen: Screen, of_app: bool):
    app = screen.app
    for active in screen.active_bindings.values():
        binding = active.binding
        if (active.node is app) != of_app or not active.enabled or binding.key in TEXTUAL_OWN:
            continue
        yield app.get_key_display(binding), binding


def key_entries(screen: Screen) -> list[tuple[str, str]]:
    """(keys as shown, what they do) for every binding of `screen` that works there now, from
    its tooltip; keys with the same tooltip share an entry ('→/n step one token')."""
    entries: dict[str, str] = {}  # tooltip -> keys
    for key, binding in _working(screen, of_app=False):
        if binding.tooltip:
            shown = entries.get(binding.tooltip)
            joint = " or " if "/" in key or (shown and "/" in shown) else "/"  # 'i or /', not 'i//'
            entries[binding.tooltip] = key if shown is None else f"{shown}{joint}{key}"
    return [(keys, tooltip) for tooltip, keys in entries.items()]


def anywhere(screen: Screen) -> Text | None:
    """The app's own keys, which work on every screen, in one line spaced as the footer spaces
    them: 'o open  d doctor  ...'; with those kept off the footer that have a tooltip (E export).
    None on a dialog, which hides them (it lists E and ? itself)."""
    shown = dict.fromkeys(f"{key} {binding.description}" for key, binding in _working(screen, of_app=True)
                          if binding.show or binding.tooltip)
    return Text("Anywhere: " + ANYWHERE_GAP.join(shown), style="dim") if shown else None


def packed(entries: list[tuple[str, str]], width: int = WIDTH) -> list[Text]:
    """The entries as 'KEY what it does', separated by three spaces, in lines of at most `width`."""
    return packed_keys(entries, width, gap="   ")


def help_text(screen: Screen) -> Text:
    """What the ? screen shows for `screen`."""
    title = getattr(screen, "HELP_TITLE", type(screen).__name__.removesuffix("Screen"))
    lines = [Text.from_markup(f"[b]{escape(title)}[/b]: the keys that work here now")]
    lines += packed(key_entries(screen))
    keys = anywhere(screen)
    if keys is not None:
        lines.append(keys)
    note = getattr(screen, "HELP_NOTE", "")
    if note:
        lines += [Text(line, style="dim") for line in note.splitlines()]
    lines.append(Text(DOCS, style="dim"))
    return Text("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close")]

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self.text = help_text(screen)  # read now: once this screen is on top, that one's keys are not

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="dialog"):
            yield Static(self.text, id="help-text")
            yield Label("[dim]esc, ? or q closes this help[/dim]")

    def on_mount(self) -> None:
        self.query_one("#help-box").border_title = "help"
