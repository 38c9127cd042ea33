"""The alignment view (A in Explore): one pair of the pairs file the model measures on (O), seen
through one cross-attention head as word alignment: each target word's attention on each source
word (shaded), the head's links (as `minitx align` reads them) and, given a gold file (G), the
gold links over them, sure and possible marked apart; with gold, every layer x head's AER in a
table to pick a head from (measured in a worker, as `minitx align --heads all` measures it).
The state is tui/app/alignment_session.py's.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from minitx.tui.app.errors import error_text
from minitx.tui.app.exports import EXPORT_BINDING, Numbers, json_numbers
from minitx.tui.app.help import HELP_BINDING
from minitx.tui.app.messages import AlignmentScored
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.render.colors import text_colour_on, viridis_hex

SURE, POSSIBLE, LINK, NONE = "■", "□", "●", "·"  # gold sure, gold possible, the head's link only
LABEL = 10  # characters of a target word's label
CELL = 3  # characters a source word's column takes


def pair_text(view, method: str) -> Text:
    """The pair as a grid: a row per target word, a column per source word (numbered; the words
    listed under it), each cell shaded by the head's weight and marked with the links."""
    out = Text()
    out.append(" " * (LABEL + 1))
    for i in range(len(view.source)):
        out.append(f"{i:>{CELL}}", style="dim")
    out.append("\n")
    gold = view.gold
    for j, word in enumerate(view.target):
        out.append(f"{j:>2} {word[: LABEL - 3]:<{LABEL - 3}} ", style="bold" if j % 2 else "")
        for i, weight in enumerate(view.weights[j] if j < len(view.weights) else []):
            linked = (i, j) in view.links
            mark = NONE
            if gold is not None and (i, j) in gold.sure:
                mark = SURE
            elif gold is not None and (i, j) in gold.possible:
                mark = POSSIBLE
            elif linked:
                mark = LINK
            colour = text_colour_on(weight)
            style = f"{'bold underline ' if linked else ''}{colour} on {viridis_hex(weight)}"
            out.append(f" {mark} ", style=style)
        out.append("\n")
    words = "  ".join(f"{i} {w}" for i, w in enumerate(view.source))
    out.append(f"source: {words}\n", style="dim")
    rows = "predicts" if method == "output" else "is fed"
    marks = f"{SURE} sure gold  {POSSIBLE} possible  " if gold is not None else ""
    out.append(f"{marks}underlined ({LINK}): the head's links\n", style="dim")
    out.append(f"shade: the head's weight, on the step that {rows} each word", style="dim")
    return out


def scores_text(heads: list, scores: list, selected, method: str) -> Text:
    """Every layer x head's AER (and each layer's mean) as a table; the best starred, the one on
    screen reversed."""
    layers = sorted({h.layer for h in heads})
    per_layer = len(heads) // len(layers)
    best = min(range(len(scores)), key=lambda c: scores[c].aer)
    out = Text(f"AER on gold ({method} rows) · * best: {heads[best].name} "
               f"{scores[best].aer:.1%}\n", style="bold")
    out.append(" " * 5)
    out.append("".join(f"{('H' + str(h.head + 1)) if h.head is not None else 'mean':>6}"
                       for h in heads[:per_layer]), style="dim")
    out.append("\n")
    for layer in layers:
        out.append(f"L{layer + 1:<4}", style="dim")
        for c in range(layer * per_layer, (layer + 1) * per_layer):
            cell = f"{scores[c].aer:.0%}{'*' if c == best else ' '}"
            out.append(f"{cell:>6}", style="reverse" if heads[c] == selected else "")
        out.append("\n")
    return out


class GoldFileScreen(ModalScreen[str | None]):
    """Type the path of a gold alignment file (talp: `i-j` sure, `ipj` possible; a line per pair
    of the pairs file). Dismisses with the path; the alignment view reads it."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, pairs_name: str) -> None:
        super().__init__()
        self.pairs_name = pairs_name

    def compose(self) -> ComposeResult:
        with Vertical(id="gold-box", classes="dialog"):
            yield Label(f"gold links of {self.pairs_name}: talp, a line per pair (i-j sure, ipj "
                        "possible)", markup=False)
            yield Input(placeholder="path/to/gold.talp", id="gold-path", compact=True)
            yield Static("", id="gold-error", markup=False)
            yield Label("[dim]Enter reads it · esc cancels[/dim]")

    def on_mount(self) -> None:
        self.query_one("#gold-box").border_title = "gold alignments"
        self.query_one("#gold-path", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        path = Path(text).expanduser()
        if not text or not path.is_file():
            self.query_one("#gold-error", Static).update(
                f"✗ no such file: {text}" if text else "✗ type a path first")
        else:
            self.dismiss(str(path))


class AlignmentScreen(ModalScreen[None]):
    HELP_TITLE = "Alignment"
    HELP_NOTE = ("Rows: target words; columns: source words. Shade: the head's weight; "
                 "● its links;\n■ □ gold sure and possible (G reads a gold file).")
    BINDINGS = [
        Binding("escape,q", "dismiss(None)", "close", tooltip="back to Explore"),
        Binding("right,n", "pair(1)", "pair", key_display="→", tooltip="the next pair"),
        Binding("left,b", "pair(-1)", "pair", show=False, tooltip="the pair before"),
        Binding("right_square_bracket", "layer(1)", "layer", key_display="]", tooltip="the next layer"),
        Binding("left_square_bracket", "layer(-1)", "layer", show=False, tooltip="the layer before"),
        Binding("full_stop", "head(1)", "head", key_display=".", tooltip="the next head (then the mean)"),
        Binding("comma", "head(-1)", "head", show=False, tooltip="the head before"),
        Binding("m", "method", "method", tooltip="rows: the step that predicts the word, or is fed it"),
        Binding("G", "gold", "gold", tooltip="read a gold file: its links, and every head's AER"),
        HELP_BINDING,
        EXPORT_BINDING,
    ]
    DEFAULT_CSS = """
    AlignmentScreen { align: center top; }
    #align-box { width: 100%; height: 100%; }
    #align-status { height: auto; }
    #align-pair, #align-scores { height: auto; text-wrap: nowrap; text-overflow: clip; }
    """

    def __init__(self, session, model_name: str) -> None:
        super().__init__()
        self.session, self.model_name = session, model_name

    def compose(self) -> ComposeResult:
        with Vertical(id="align-box", classes="dialog"):
            yield Static("", id="align-status", markup=False)
            with VerticalScroll(id="align-scroll", can_focus=False):
                yield Static("", id="align-pair")
                yield Static("", id="align-scores")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#align-box").border_title = f"word alignment · {self.model_name}"
        self.redraw()

    # -- keys -------------------------------------------------------------------------------------
    def action_pair(self, by: int) -> None:
        self.session.move_pair(by)
        self.redraw()

    def action_layer(self, by: int) -> None:
        self.session.move_layer(by)
        self.redraw()

    def action_head(self, by: int) -> None:
        self.session.move_head(by)
        self.redraw()

    def action_method(self) -> None:
        self.session.toggle_method()
        if self.session.gold is not None:
            self.session.scores = None
            self.measure()
        self.redraw()

    def action_gold(self) -> None:
        def chosen(path: str | None) -> None:
            if not path:
                return
            try:
                self.session.read_gold(path)
            except ValueError as e:  # DataError: the file and line
                self.notify(f"cannot use that gold file: {e}", severity="error", markup=False, timeout=10)
                return
            self.measure()
            self.redraw()

        if not isinstance(self.app.screen, GoldFileScreen):
            self.app.push_screen(GoldFileScreen(Path(self.session.path).name), chosen)

    @work(thread=True, exclusive=True, group="align-scores", exit_on_error=False)
    def measure(self) -> None:
        """Every head's AER on the gold, in a worker: a big model reads hundreds of pairs."""
        try:
            scores, method = self.session.measure()
        except Exception as e:  # a model that cannot be measured: a line, never a traceback
            self.post_message(AlignmentScored(error=error_text(e)))
            return
        self.post_message(AlignmentScored(scores, method))

    def on_alignment_scored(self, message: AlignmentScored) -> None:
        if message.error:
            self.notify(f"cannot score the heads: {message.error}", severity="error", markup=False)
        elif message.method == self.session.method:  # not a measurement the m key outdated
            self.session.scores, self.session.scores_method = message.scores, message.method
            self.redraw()

    # -- drawing ----------------------------------------------------------------------------------
    def redraw(self) -> None:
        s = self.session
        view = s.view()
        head = s.selected
        gold = f"gold {Path(s.gold_path).name}" if s.gold_path else "no gold: G reads a file"
        self.query_one("#align-status", Static).update(
            f"pair {s.at + 1}/{len(s.items)} (line {view.line}) · {head.name} · {s.method} rows · {gold}")
        self.query_one("#align-pair", Static).update(pair_text(view, s.method))
        scores = self.query_one("#align-scores", Static)
        if s.scores is not None:
            scores.update(scores_text(s.head_list(), s.scores, head, s.scores_method))
        elif s.gold is not None:
            scores.update(Text("measuring every head's AER on the gold…", style="dim"))
        else:
            scores.update("")

    def export_numbers(self) -> Numbers:
        head = self.session.selected
        name = f"alignment-L{head.layer + 1}-{'mean' if head.head is None else f'H{head.head + 1}'}"
        return json_numbers(name, self.session.export_numbers())


class AlignmentViews:
    """The app's way into the alignment view: a screen opens another through the app."""

    def show_alignment(self, session, name: str) -> None:
        """The alignment view of an AlignmentSession (tui/app/alignment_session.py)."""
        if not isinstance(self.screen, AlignmentScreen):
            self.push_screen(AlignmentScreen(session, name))
