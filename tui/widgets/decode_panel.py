"""One model decoding one source, and every picture of it: the panel Explore shows once and
Compare twice.

The panel owns the model record, the core Stepper (which records each step, so stepping back
replays), the view state (layer, head, which picture, numbers on or off) and the widgets that
draw them: the output line, the attention grid, every head at once, the next-token bars and the
alignment table. Screens drive it (set_model, set_source, goto, select_head, set_view, then redraw)
and it never reads the app's state, so two panels can step in lockstep.

Adding a view: name it in VIEWS, draw it in `_draw_view`, and bind a key to the screen's
`view('name')` action (tui/decode_keys.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from minitx.tui.widgets.attention import AttentionGrid, HeadsOverview, ScoreTable
from minitx.tui.widgets.topk import TopKBars

if TYPE_CHECKING:
    from minitx.core.decode import Stepper
    from minitx.tui.loaded import LoadedModel

VIEWS = ("cross", "self", "heads")  # what the grid box shows; "cross" is where every other returns


class DecodePanel(Vertical):
    def __init__(self, *, label: str = "", side: bool = True, output: bool = True,
                 step_hint: str = "press → (or n) to generate a token", id: str | None = None) -> None:
        super().__init__(id=id, classes="decode-panel")
        self.label = label  # "A" / "B" in Compare: titles name the side and the model
        self.with_side, self.with_output, self.step_hint = side, output, step_hint
        self.record: LoadedModel | None = None
        self.stepper: Stepper | None = None
        self.target = 0  # the step the screen asked for; a decode that ended earlier stays at its end
        self.layer_index = self.head_index = 0
        self.view_mode = "cross"
        self.numbers = False

    def compose(self) -> ComposeResult:
        if self.with_output:
            yield Static("", classes="output", markup=False)
        with Horizontal(classes="decode-main"):
            with VerticalScroll(classes="grid-box", can_focus=False):
                yield AttentionGrid(classes="grid")
                yield HeadsOverview(classes="heads")
            if self.with_side:
                with Vertical(classes="side"):
                    with Vertical(classes="topk-box"):
                        yield TopKBars(classes="topk")
                    with Vertical(classes="scores-box"):
                        yield ScoreTable(classes="scores")

    def on_mount(self) -> None:
        self.heads.display = False
        if self.with_side:
            self.query_one(".topk-box").border_title = "next token"
            self.query_one(".scores-box").border_title = "all heads · alignment"

    # -- the widgets -----------------------------------------------------------------------------
    @property
    def grid(self) -> AttentionGrid:
        return self.query_one(".grid", AttentionGrid)

    @property
    def heads(self) -> HeadsOverview:
        return self.query_one(".heads", HeadsOverview)

    @property
    def grid_box(self) -> VerticalScroll:
        return self.query_one(".grid-box", VerticalScroll)

    @property
    def topk(self) -> TopKBars:
        return self.query_one(".topk", TopKBars)

    @property
    def output(self) -> Static:
        return self.query_one(".output", Static)

    # -- state -----------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        return self.stepper.position if self.stepper else 0

    @property
    def finished(self) -> bool:
        return self.stepper is not None and self.stepper.finished

    @property
    def longest_source(self) -> int:
        """Source tokens this model's positional table holds (plus SOS and EOS)."""
        return self.record.model.cfg.max_len - 2 if self.record else 0

    @property
    def expected(self) -> str:
        from minitx.core.tasks import Task

        return Task.format(self.record.task.expected_output(self.stepper.src_ids))

    @property
    def correct(self) -> bool:
        from minitx.core.tasks import Task

        return Task.format(self.stepper.tokens) == self.expected

    def set_model(self, record: LoadedModel) -> None:
        """A new model: start on the head that does the work, so its alignment shows at once."""
        from minitx.core.alignment import best_head

        self.record, self.stepper, self.target = record, None, 0
        self.layer_index, self.head_index = best_head(record.scores)

    def set_source(self, ids: list[int]) -> None:
        from minitx.core.decode import Stepper

        self.stepper, self.target = Stepper(self.record.model, ids, top_k=5), 0

    def goto(self, position: int) -> None:
        """Move to `position` steps (a decode that ends earlier stays at its end)."""
        s, self.target = self.stepper, position
        if position == 0:
            s.reset()
        while s.position > position:
            s.back()
        while s.position < position and s.step() is not None:
            pass

    def run_to_end(self) -> None:
        self.stepper.run()
        self.target = self.stepper.position

    def select_head(self, layer: int, head: int) -> None:
        self.layer_index, self.head_index = layer, head

    def set_view(self, view: str) -> None:
        self.view_mode = view if view in VIEWS else "cross"

    def show_status(self, text: str) -> None:
        """Say what is happening where the output goes (before a model is there)."""
        if self.with_output:
            self.output.update(text)

    # -- drawing ---------------------------------------------------------------------------------
    def redraw(self) -> None:
        if self.record is None:
            return
        if self.with_side:
            self.query_one(".scores", ScoreTable).show(
                self.record.scores, (self.layer_index, self.head_index),
                note=f"expected: {self.record.task.alignment_name}")
        if self.stepper is None:
            return
        if self.with_output:
            self._draw_output()
        if self.with_side:
            self._draw_topk()
        self._draw_view()

    def _draw_output(self) -> None:
        s, task = self.stepper, self.record.task
        shown = " ".join(["<sos>"] + [r.text for r in s.results[: s.position]])
        state = "done" if s.finished else "·"
        line = f"Output   {shown} {state}    step {s.position}/{s.cap}   expected {self.expected}"
        if s.finished:
            line += "  ✓ correct" if self.correct else "  ✗ wrong"
        if len(s.src_ids) > task.max_len:
            line += f"   (longer than the {task.max_len} it was trained on)"
        self.output.update(line)

    def _draw_topk(self) -> None:
        from minitx.core.tasks import VOCAB

        s, box = self.stepper, self.query_one(".topk-box")
        if s.current is None:
            box.border_title = "next token"
            self.topk.show([], "press → to generate the first token")
            return
        box.border_title = f"next token · step {s.position}"
        self.topk.show([(VOCAB[i], p) for i, p in s.current.top_k])

    def _title(self, picture: str) -> str:
        where = f"L{self.layer_index + 1} H{self.head_index + 1}"
        return f"{self.label} {self.record.name} · {where}" if self.label else f"{picture} · {where}"

    def _draw_view(self) -> None:
        s, grid, heads, box = self.stepper, self.grid, self.heads, self.grid_box
        grid.display, heads.display = self.view_mode != "heads", self.view_mode == "heads"
        grid.numbers = self.numbers
        rows_labels = [r.text for r in s.results[: s.position]]
        current_row = s.position - 1 if s.position and s.position == self.target else None
        hint = "" if self.target else self.step_hint
        if self.view_mode == "cross":
            box.border_title = self._title("cross-attention")
            grid.show(s.cross_attention_grid(self.layer_index, self.head_index).tolist(),
                      [str(i) for i in s.src_ids], rows_labels, current_row, hint,
                      "" if self.label else "rows: tokens generated · columns: source tokens")
        elif self.view_mode == "self":
            box.border_title = self._title("decoder self-attention")
            inputs = ["<sos>"] + rows_labels[:-1] if rows_labels else ["<sos>"]
            grid.show(s.self_attention_grid(self.layer_index, self.head_index).tolist(), inputs,
                      rows_labels, current_row, hint,
                      "rows: outputs · columns: decoder inputs (· future)", causal=True)
        else:
            box.border_title = "cross-attention · every layer and head"
            record = self.record
            grids = [[s.cross_attention_grid(layer, head).tolist() for head in range(record.heads)]
                     for layer in range(record.layers)]
            heads.show(grids, record.scores, (self.layer_index, self.head_index))
