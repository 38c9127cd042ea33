"""Lines that always fit: the verdict and the numbers stay whole, token lists give way ('5 1 4 … 1 3')."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from minitx.tui.app.widgets.redraw import redraw


class Tokens(list):
    """A part of a line that may be shortened in the middle (a list of token strings), after
    an optional label that stays whole ('expected 5 1 4 1 3')."""

    def __init__(self, tokens, label: str = "", sep: str = " ") -> None:
        super().__init__(tokens)
        self.label = label
        self.sep = sep  # "" for characters, which make text ("2026-12-01"); else a space

    @property
    def text(self) -> str:
        return self.sep.join(self)


def token_line(labels: list[str], level: str, label: str = "") -> Tokens:
    """Tokens for the output line: characters run together (the text they make; a step
    marker such as <eos> or a forced '*' stays apart), words and digits with spaces."""
    if level != "char":
        return Tokens(labels, label)
    return Tokens([f" {t} " if t.startswith("<") and t.endswith(">") else t for t in labels], label, sep="")


def elide(tokens: list[str], width: int, sep: str = " ") -> str:
    """The tokens joined by `sep` in at most `width` characters: as many from both ends as fit,
    more of the end (the newest), with '…' where some are left out."""
    text = sep.join(tokens)
    if len(text) <= width:
        return text
    head: list[str] = []
    tail: list[str] = []
    left, right = 0, len(tokens) - 1
    turn = 0
    while left <= right:
        take_tail = turn % 3 != 2  # two from the end for one from the start
        candidate = tokens[right] if take_tail else tokens[left]
        if len(sep.join([*head, "…", candidate, *tail])) > width:
            break
        if take_tail:
            tail.insert(0, candidate)
            right -= 1
        else:
            head.append(candidate)
            left += 1
        turn += 1
    return sep.join([*head, "…", *tail]) if width >= 1 else ""


def fit(parts: list, width: int) -> Text:
    """parts: Text / str (kept whole) and Tokens (shortened to share what is left), two
    spaces apart."""
    fixed = sum(len(p.label) if isinstance(p, Tokens) else Text(p).cell_len if isinstance(p, str)
                else p.cell_len for p in parts)
    lists = [p for p in parts if isinstance(p, Tokens)]
    room = max(0, width - fixed - 2 * (len(parts) - 1))
    # Share the room out evenly; a list that needs less than its share gives the rest to the others.
    budget, left = {}, room
    for i, p in enumerate(sorted(lists, key=lambda p: len(p.text))):
        budget[id(p)] = min(len(p.text), max(1, left // (len(lists) - i)))
        left -= budget[id(p)]
    line = Text()
    for i, part in enumerate(parts):
        if i:
            line.append("  ")
        if isinstance(part, Tokens):
            line.append(part.label, style="dim")
            line.append(elide(part, budget[id(part)], part.sep))
        else:
            line.append_text(part if isinstance(part, Text) else Text(part))
    line.no_wrap, line.overflow = True, "crop"
    return line


class OutputLine(Widget):
    """One or more lines of parts, fitted to the widget's width whenever it is drawn."""

    DEFAULT_CSS = "OutputLine { height: auto; width: 100%; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines: list[list] = []

    def show(self, *lines: list) -> None:
        self.lines = list(lines)
        redraw(self)

    def update(self, text: str) -> None:
        """A plain message (what is loading, why nothing is shown)."""
        self.show([text])

    def render(self) -> Text:
        width = max(1, self.size.width or self.app.size.width)
        return Text("\n").join(fit(parts, width) for parts in self.lines)
