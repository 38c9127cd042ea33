"""A form field that picks one of a few values with ← and →: '◂ reverse ▸'.

It never opens a list over the rest of the form (a dropdown covers the labels below it at
80x24), and every value is one key away.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from minitx.tui.app.messages import ChoiceChanged
from minitx.tui.render.text_fit import end_cut


class ChoiceField(Widget, can_focus=True):
    DEFAULT_CSS = "ChoiceField { height: 1; width: 1fr; }"
    BINDINGS = [
        Binding("left", "move(-1)", "previous", show=False),
        Binding("right", "move(1)", "next", show=False),
        Binding("escape", "screen.leave_form", "leave form", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.choices: list[tuple[str, str]] = []  # (value, label)
        self.index = 0

    @property
    def value(self) -> str | None:
        return self.choices[self.index][0] if self.choices else None

    @value.setter
    def value(self, value: str) -> None:
        values = [v for v, _ in self.choices]
        if value in values:
            self.index = values.index(value)
            self.refresh()

    def set_choices(self, choices: list[tuple[str, str]] | list[str], value: str | None = None) -> None:
        """Values with their labels (or values that are their own labels); keeps the value
        shown if it is still offered."""
        keep = self.value if value is None else value
        self.choices = [c if isinstance(c, tuple) else (c, c) for c in choices]
        self.index = 0
        self.value = keep
        self.refresh()

    def action_move(self, delta: int) -> None:
        if self.choices:
            self.index = (self.index + delta) % len(self.choices)
            self.refresh()
            self.post_message(ChoiceChanged(self))

    def on_click(self) -> None:
        self.action_move(1)

    def render(self) -> Text:
        label = self.choices[self.index][1] if self.choices else ""
        room = max(1, self.size.width - 2)
        label = end_cut(label, room)
        many = len(self.choices) > 1
        return Text.assemble(("◂" if many else " ", "dim"), label, ("▸" if many else "", "dim"))
