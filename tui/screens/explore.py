"""Explore: type a source, step greedy decoding one token at a time, look at every head.

All numbers come from core's Stepper (which records each step, so stepping back replays);
this screen only keeps the view state (layer, head, which picture) and draws.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Label, Static

from minitx.tui.screens.shared import (
    SOURCE_BINDINGS,
    STEP_BINDINGS,
    TitleBar,
    best_head,
    one_line_errors,
)
from minitx.tui.widgets.attention import AttentionGrid, HeadsOverview, ScoreTable
from minitx.tui.widgets.keybar import KeyBar
from minitx.tui.widgets.topk import TopKBars

DEFAULT_SOURCE = "3 1 4 1 5"


class SourceInput(Input):
    BINDINGS = [Binding("escape", "screen.leave_source", "done editing")]


class ExploreScreen(Screen):
    AUTO_FOCUS = ""  # focus nothing: start on the step keys; i or / edits the source
    BINDINGS = [
        *STEP_BINDINGS,
        Binding("a", "view('heads')", "heads"),
        Binding("s", "view('self')", "self-attn"),
        *SOURCE_BINDINGS,
        Binding("t", "app.switch_mode('train')", "train"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.stepper = None  # core.decode.Stepper for the current source and model
        self.layer_index = 0
        self.head_index = 0
        self.view_mode = "cross"  # "cross" | "self" | "heads"
        self.show_numbers = False
        self.source_error = ""

    def compose(self) -> ComposeResult:
        yield TitleBar("Explore")
        with Horizontal(id="source-row"):
            yield Label("Source ▸ ", id="source-label")
            yield SourceInput(DEFAULT_SOURCE, id="source", compact=True,
                              placeholder="digits, e.g. 3 1 4 1 5 (Enter)")
            yield Label("", id="selection")
        yield Static("", id="source-error", markup=False)
        yield Static("", id="output", markup=False)
        with Horizontal(id="explore-main"):
            with VerticalScroll(id="grid-panel", can_focus=False):
                yield AttentionGrid(id="grid")
                yield HeadsOverview(id="heads")
            with Vertical(id="side"):
                with Vertical(id="topk-panel"):
                    yield TopKBars(id="topk")
                with Vertical(id="scores-panel"):
                    yield ScoreTable(id="scores")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#topk-panel").border_title = "next token"
        self.query_one("#scores-panel").border_title = "all heads · alignment"
        self.query_one("#heads").display = False
        self.app.model_changed.subscribe(self, self._model_changed)
        self._model_changed(self.app)

    # -- model and source ------------------------------------------------------------------
    @one_line_errors
    def _model_changed(self, app) -> None:
        main = self.query_one("#explore-main")
        title = self.query_one(TitleBar)
        if app.current is None:
            main.loading = app.loading
            title.set_info(app.status)
            self.query_one("#output", Static).update(app.status)
            return
        main.loading = False
        title.set_info(app.current.summary)
        # Start on the head that does the work, with the whole decode shown, so a new model's
        # alignment is visible at first sight; x resets and → steps from there.
        self.layer_index, self.head_index = best_head(app.current.scores)
        source = self.query_one("#source", Input)
        if not self.set_source(source.value):
            # Never leave the old model's decode on screen: fall back to the last good source.
            source.value = " ".join(map(str, self.stepper.src_ids)) if self.stepper else DEFAULT_SOURCE
            self.set_source(source.value)
        if self.stepper is not None and self.stepper.model is app.current.model:
            self.stepper.run()
            self.refresh_view()

    @one_line_errors
    def set_source(self, text: str) -> bool:
        """Parse and start decoding `text`; an unusable source is an inline message."""
        from minitx.core.decode import Stepper
        from minitx.core.tasks import TaskInputError

        current = self.app.current
        if current is None:
            return False
        try:
            ids = current.task.parse(text, max_len=current.model.cfg.max_len - 2)
        except TaskInputError as e:
            self.source_error = str(e)
        else:
            self.source_error = ""
            self.stepper = Stepper(current.model, ids, top_k=5)
        self.refresh_view()
        return not self.source_error

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.set_source(event.value):
            self.set_focus(None)  # back to the step keys

    def action_edit_source(self) -> None:
        self.query_one("#source", Input).focus()

    def action_leave_source(self) -> None:
        self.set_focus(None)

    # -- decoding ----------------------------------------------------------------------------
    @one_line_errors
    def action_step(self) -> None:
        if self.stepper is not None:
            self.stepper.step()
            self.refresh_view()

    @one_line_errors
    def action_back(self) -> None:
        if self.stepper is not None:
            self.stepper.back()
            self.refresh_view()

    @one_line_errors
    def action_run(self) -> None:
        if self.stepper is not None:
            self.stepper.run()
            self.refresh_view()

    @one_line_errors
    def action_reset(self) -> None:
        if self.stepper is not None:
            self.stepper.reset()
            self.refresh_view()

    # -- what to look at ---------------------------------------------------------------------
    @one_line_errors
    def action_layer(self, delta: int) -> None:
        if self.app.current is not None:
            self.layer_index = (self.layer_index + delta) % self.app.current.layers
            self.refresh_view()

    @one_line_errors
    def action_head(self, delta: int) -> None:
        if self.app.current is not None:
            self.head_index = (self.head_index + delta) % self.app.current.heads
            self.refresh_view()

    @one_line_errors
    def action_view(self, view: str) -> None:
        self.view_mode = "cross" if self.view_mode == view else view
        self.refresh_view()

    @one_line_errors
    def action_numbers(self) -> None:
        self.show_numbers = not self.show_numbers
        self.refresh_view()

    # -- drawing -----------------------------------------------------------------------------
    def refresh_view(self) -> None:
        error = self.query_one("#source-error", Static)
        error.update(f"✗ {self.source_error}" if self.source_error else "")
        error.display = bool(self.source_error)
        current = self.app.current
        if current is None:
            return
        self.query_one("#selection", Label).update(f"layer {self.layer_index + 1}/{current.layers}"
                                                   f" · head {self.head_index + 1}/{current.heads}")
        self.query_one("#scores", ScoreTable).show(
            current.scores, (self.layer_index, self.head_index),
            note=f"expected: {current.task.alignment_name}")
        if self.stepper is None:
            return
        self._draw_output(current)
        self._draw_topk()
        self._draw_grid()

    def _draw_output(self, current) -> None:
        from minitx.core.tasks import Task

        s = self.stepper
        shown = " ".join(["<sos>"] + [r.text for r in s.results[: s.position]])
        state = "done" if s.finished else "·"
        expected = Task.format(current.task.expected_output(s.src_ids))
        line = f"Output   {shown} {state}    step {s.position}/{s.cap}   expected {expected}"
        if s.finished:
            line += "  ✓ correct" if Task.format(s.tokens) == expected else "  ✗ wrong"
        if len(s.src_ids) > current.task.max_len:
            line += f"   (longer than the {current.task.max_len} it was trained on)"
        self.query_one("#output", Static).update(line)

    def _draw_topk(self) -> None:
        from minitx.core.tasks import VOCAB

        s, bars = self.stepper, self.query_one("#topk", TopKBars)
        panel = self.query_one("#topk-panel")
        if s.current is None:
            panel.border_title = "next token"
            bars.show([], "press → to generate the first token")
            return
        panel.border_title = f"next token · step {s.position}"
        bars.show([(VOCAB[i], p) for i, p in s.current.top_k])

    def _draw_grid(self) -> None:
        s = self.stepper
        grid = self.query_one("#grid", AttentionGrid)
        heads = self.query_one("#heads", HeadsOverview)
        panel = self.query_one("#grid-panel")
        grid.display, heads.display = self.view_mode != "heads", self.view_mode == "heads"
        grid.numbers = self.show_numbers
        rows_labels = [r.text for r in s.results[: s.position]]
        current_row = s.position - 1 if s.position else None
        hint = "" if s.position else "press → (or n) to generate a token"
        where = f"L{self.layer_index + 1} H{self.head_index + 1}"
        if self.view_mode == "cross":
            panel.border_title = f"cross-attention · {where}"
            grid.show(s.cross_attention_grid(self.layer_index, self.head_index).tolist(),
                      [str(i) for i in s.src_ids], rows_labels, current_row, hint,
                      "rows: tokens generated · columns: source tokens")
        elif self.view_mode == "self":
            panel.border_title = f"decoder self-attention · {where}"
            inputs = ["<sos>"] + rows_labels[:-1] if rows_labels else ["<sos>"]
            grid.show(s.self_attention_grid(self.layer_index, self.head_index).tolist(), inputs,
                      rows_labels, current_row, hint,
                      "rows: outputs · columns: decoder inputs (· future)", causal=True)
        else:
            panel.border_title = "cross-attention · every layer and head"
            current = self.app.current
            grids = [[s.cross_attention_grid(layer, head).tolist() for head in range(current.heads)]
                     for layer in range(current.layers)]
            heads.show(grids, current.scores, (self.layer_index, self.head_index))
