"""The source row of a decoding screen: 'Source ▸ 3 1 4 1 5   layer 2/2 · head 2/4', and the
line under it that says why a typed source cannot be used."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Static

DEFAULT_SOURCE = "3 1 4 1 5"


class SourceInput(Input):
    BINDINGS = [Binding("escape", "screen.leave_source", "done editing")]


class SourceBar(Vertical):
    """Owns no decoding: the screen parses what is typed (Input.Submitted bubbles up to it) and
    tells the bar what to show."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="source-row"):
            yield Label("Source ▸ ", id="source-label")
            yield SourceInput(DEFAULT_SOURCE, id="source", compact=True,
                              placeholder="a source for this model, e.g. 3 1 4 1 5 (Enter)")
            yield Label("", id="selection")
        yield Static("", id="source-error", markup=False)

    def on_mount(self) -> None:
        self.query_one("#source-error").display = False

    @property
    def input(self) -> SourceInput:
        return self.query_one("#source", SourceInput)

    @property
    def text(self) -> str:
        return self.input.value

    def show_source(self, text: str) -> None:
        self.input.value = text

    def show_example(self, text: str) -> None:
        """What the empty box suggests: a source of the model on screen (a name, a date, digits)."""
        self.input.placeholder = f"a source for this model, e.g. {text} (Enter)"

    def show_selection(self, text: str) -> None:
        self.query_one("#selection", Label).update(text)

    def show_error(self, message: str) -> None:
        error = self.query_one("#source-error", Static)
        error.update(f"✗ {message}" if message else "")
        error.display = bool(message)
