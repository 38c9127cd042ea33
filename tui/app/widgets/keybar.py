"""The footer: the app's messages, then every active key, wrapping onto more lines instead of
scrolling.

Textual's Footer scrolls sideways when the keys do not fit, which hides keys in an 80x24
terminal; this one wraps at key boundaries so every key stays visible. Textual's toasts would
cover the panels' borders and text at 80x24: on a screen with a KeyBar a message takes the
footer's first lines instead while it lasts (2 to 10 seconds), in place of keys the ? screen
still lists, so nothing else on the screen moves; only a message longer than the footer makes
it taller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

MESSAGES_SHOWN = 2  # the newest messages shown at once
SEVERITY = {"error": ("✗ ", "bold red"), "warning": ("! ", "bold yellow"), "information": ("", "bold")}
KEYBAR_SCREEN = "-keybar-messages"  # the class of a screen whose messages the footer shows


def packed_keys(entries: list[tuple[str, str]], width: int, gap: str) -> list[Text]:
    """The entries as 'KEY what it does' (the key reversed), `gap` between two entries and never
    at a line's end, in lines of at most `width` cells: the footer's and the help's layout."""
    lines: list[Text] = [Text()]
    for keys, what in entries:
        piece = Text.assemble((keys, "bold reverse"), f" {what}")
        between = gap if lines[-1].cell_len else ""
        if between and lines[-1].cell_len + len(between) + piece.cell_len > width:
            lines.append(Text())
            between = ""
        lines[-1].append(between)
        lines[-1].append_text(piece)
    return lines


@dataclass(frozen=True)
class Said:
    """A message the app showed (its notify), until when it shows."""

    text: str
    severity: str
    markup: bool
    until: float  # time.monotonic()

    @property
    def time_left(self) -> float:
        return self.until - time.monotonic()


def shown_messages(said: list[Said]) -> list[Said]:
    """The newest messages still showing, oldest first (what has expired leaves the list)."""
    said[:] = [s for s in said if s.time_left > 0]
    return said[-MESSAGES_SHOWN:]


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar { height: auto; dock: bottom; background: $panel; }
    """  # minitx.tcss hides the toasts of a screen with a KeyBar

    def __init__(self) -> None:
        super().__init__()
        self._expiry = None  # the timer that redraws when the oldest message shown has expired

    def on_mount(self) -> None:
        self.screen.add_class(KEYBAR_SCREEN)
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        messages_changed = getattr(self.app, "messages_changed", None)
        if messages_changed is not None:
            messages_changed.subscribe(self, self._messages_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def on_show(self) -> None:
        self._messages_changed(self.app)  # what was said while another screen was on top

    def _bindings_changed(self, _screen) -> None:
        self._redraw()

    def _redraw(self) -> None:
        """A layout pass of the screen only when the footer's height changes (they cost)."""
        height = len(self._lines(max(1, self.size.width)))
        self.refresh(layout=height != self.size.height)

    def _messages_changed(self, _app) -> None:
        if self._expiry is not None:
            self._expiry.stop()
        left = [n.time_left for n in self.messages()]
        if left:
            self._expiry = self.set_timer(max(0.05, min(left) + 0.05), lambda: self._messages_changed(None))
        self._redraw()

    def messages(self) -> list[Said]:
        """The newest messages of the app still showing (MinitxApp.said), oldest first."""
        return shown_messages(getattr(self.app, "said", []))

    def message_lines(self, width: int) -> list[Text]:
        lines: list[Text] = []
        for note in self.messages():
            mark, style = SEVERITY.get(note.severity, SEVERITY["information"])
            text = Text(mark) + (Text.from_markup(note.text) if note.markup else Text(note.text))
            text.stylize(style)
            lines.extend(text.wrap(self.app.console, width))
        return lines

    def items(self) -> list[tuple[str, str]]:
        """(key as shown, description) for every shown binding; keys that share a description
        share an entry ("→/n step", "[/] layer")."""
        seen: dict[str, tuple[str, str]] = {}
        for _node, binding, enabled, _tip in self.screen.active_bindings.values():
            if not binding.show or not enabled:
                continue
            key = self.app.get_key_display(binding)
            if binding.description in seen:
                shown, description = seen[binding.description]
                seen[binding.description] = (f"{shown}/{key}", description)
            else:
                seen[binding.description] = (key, binding.description)
        return list(seen.values())

    def key_lines(self, width: int) -> list[Text]:
        return packed_keys(list(self.items()), width, gap="  ")

    def keys_text(self) -> str:
        """The keys as the footer lists them, without the messages that may cover some now."""
        return "\n".join(line.plain for line in self.key_lines(max(1, self.size.width)))

    def _lines(self, width: int) -> list[Text]:
        said, keys = self.message_lines(width), self.key_lines(width)
        return said + keys[len(said):]

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self._lines(max(1, width)))

    def render(self) -> Text:
        return Text("\n").join(self._lines(max(1, self.size.width)))
