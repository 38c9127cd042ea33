"""The decoding keys of a screen that shows one or more DecodePanels, stepping in lockstep.

A screen mixes in DecodeKeys, lists DECODE_BINDINGS (and SOURCE_BINDINGS) in its BINDINGS,
and says which panels it drives (`decode_panels`) and what else to draw after a move
(`draw_extras`). Explore drives one panel, Compare two: the same keys, the same code.

Adding a key: a Binding here (or in the screen's own BINDINGS when only that screen has it) and
an `action_...` method that changes the panels, then calls `self.refresh_view()`.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.widgets.decode_panel import DecodePanel
from minitx.tui.app.widgets.source_bar import SourceBar, SourceInput

DECODE_BINDINGS = [
    Binding("right,n", "step", "step"),
    Binding("left,b", "back", "back"),
    Binding("enter,r", "run", "run"),
    Binding("x", "reset", "reset"),
    Binding("left_square_bracket", "layer(-1)", "layer"),
    Binding("right_square_bracket", "layer(1)", "layer"),
    Binding("comma", "head(-1)", "head"),
    Binding("full_stop", "head(1)", "head"),
    # Only while a long source does not fit: the grid then says "< > scroll" itself (the
    # footer has no room at 80 columns).
    Binding("less_than_sign", "scroll_columns(-1)", "columns", key_display="<", show=False),
    Binding("greater_than_sign", "scroll_columns(1)", "columns", key_display=">", show=False),
]
# Changing the model on screen: Explore acts on its panel, Compare on B (`intervened_panels`).
ABLATION_BINDINGS = [
    Binding("k", "ablate", "ablate"),
    Binding("K", "clear_ablations", "restore"),
]
SOURCE_BINDINGS = [
    # "nums": numbers in the cells. Short, so Explore's keys (with h) fit three lines at 80 columns.
    Binding("number_sign", "numbers", "nums", key_display="#"),
    Binding("i", "edit_source", "source"),
    Binding("slash", "edit_source", "source", show=False),
]


class DecodeKeys:
    """Mixed into a Screen. `position` is the shared step: each panel shows min(position, the
    length of its own decode)."""

    position = 0

    def decode_panels(self) -> list[DecodePanel]:
        """The panels the keys drive (all of them must have a model)."""
        raise NotImplementedError

    def draw_extras(self) -> None:
        """Anything the screen draws besides the panels (Compare: |A−B| and the summary)."""

    def intervened_panels(self) -> list[DecodePanel]:
        """The panels whose model the knock-out keys change (Explore: its one; Compare: B)."""
        return self.decode_panels()

    def interventions_changed(self) -> None:
        """Called after a knock-out key changed a panel's model (Compare re-measures B)."""

    def show_selection(self) -> str:
        panel = self.decode_panels()[0]
        layers, heads = self.shape()
        return f"layer {panel.layer_index + 1}/{layers} · head {panel.head_index + 1}/{heads}"

    # -- the source ------------------------------------------------------------------------------
    @one_line_errors
    def set_source(self, text: str) -> bool:
        """Parse `text` for every panel (each model's task reads it in its own vocabulary, and
        wraps it as its code did) and restart them on it; an unusable source is an inline
        message and leaves the decodes as they were."""
        from minitx.core.data.vocab import TaskInputError

        panels, bar = self.decode_panels(), self.query_one(SourceBar)
        if not panels:
            return False
        longest = min(p.longest_source for p in panels)
        try:
            ids = [panel.record.task.parse(text, max_len=longest) for panel in panels]
        except TaskInputError as e:
            bar.show_error(str(e))
            return False
        bar.show_error("")
        for panel, source in zip(panels, ids):
            panel.set_source(source)
        self.position = 0
        self.refresh_view()
        return True

    def shown_source(self) -> str | None:
        """The source the panels decode (None before the first)."""
        panel = next((p for p in self.decode_panels() if p.stepper), None)
        return panel.record.task.format_source(panel.stepper.src_ids) if panel else None

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter decodes the whole source at once; a source that cannot be used keeps the box
        focused with the text and the reason, to fix it or leave with esc."""
        if not isinstance(event.input, SourceInput):
            return
        event.stop()
        if self.set_source(event.value):
            self.action_run()
            self.set_focus(None)  # back to the step keys

    def on_input_blurred(self, event: Input.Blurred) -> None:
        """Leaving the box (esc, a click elsewhere) shows the source the grid shows again; the
        error line still says why the other text was not used."""
        shown = self.shown_source()
        if isinstance(event.input, SourceInput) and shown is not None:
            self.query_one(SourceBar).show_source(shown)

    def action_edit_source(self) -> None:
        self.query_one(SourceBar).input.focus()

    def action_leave_source(self) -> None:
        self.set_focus(None)

    # -- stepping --------------------------------------------------------------------------------
    def _ready(self) -> list[DecodePanel]:
        return [p for p in self.decode_panels() if p.stepper is not None]

    def _move(self) -> None:
        for panel in self._ready():
            panel.goto(self.position)
        self.refresh_view()

    @one_line_errors
    def action_step(self) -> None:
        panels = self._ready()
        if panels and not all(p.finished for p in panels):
            self.position += 1
            self._move()

    @one_line_errors
    def action_back(self) -> None:
        panels = self._ready()
        if panels:
            self.position = max(0, max(p.position for p in panels) - 1)
            self._move()

    @one_line_errors
    def action_run(self) -> None:
        panels = self._ready()
        if panels:
            for panel in panels:
                panel.run_to_end()
            self.position = max(p.position for p in panels)
            self._move()

    @one_line_errors
    def action_reset(self) -> None:
        if self._ready():
            self.position = 0
            self._move()

    # -- what to look at -------------------------------------------------------------------------
    def shape(self) -> tuple[int, int]:
        """Layers (of the attention kind shown) and heads every panel's model has (the keys only
        reach heads all of them have)."""
        panels = self.decode_panels()
        return min(p.layer_count() for p in panels), min(p.record.heads for p in panels)

    def select_head(self, layer: int, head: int) -> None:
        for panel in self.decode_panels():
            panel.select_head(layer, head)

    @one_line_errors
    def action_layer(self, delta: int) -> None:
        panels = self.decode_panels()
        if panels:
            self.select_head((panels[0].layer_index + delta) % self.shape()[0], panels[0].head_index)
            self.refresh_view()

    @one_line_errors
    def action_head(self, delta: int) -> None:
        panels = self.decode_panels()
        if panels:
            self.select_head(panels[0].layer_index, (panels[0].head_index + delta) % self.shape()[1])
            self.refresh_view()

    @one_line_errors
    def action_view(self, view: str) -> None:
        for panel in self.decode_panels():
            panel.set_view("grid" if panel.view_mode == view else view)
        self.refresh_view()

    @one_line_errors
    def action_kind(self) -> None:
        """The next attention kind: cross -> decoder self -> encoder self -> cross."""
        from minitx.tui.app.widgets.decode_panel import KINDS

        for panel in self.decode_panels():
            panel.set_kind(KINDS[(KINDS.index(panel.kind) + 1) % len(KINDS)])
            if panel.view_mode not in ("grid", "heads"):
                panel.set_view("grid")  # the kind is seen on a grid
        self.refresh_view()

    @one_line_errors
    def action_ablate(self) -> None:
        panels = [p for p in self.intervened_panels() if p.stepper is not None]
        for panel in panels:
            panel.toggle_ablation()
        if panels:
            head = panels[0].selected_head
            state = "knocked out" if head in panels[0].ablated else "restored"
            self.notify(f"{head} {state}", timeout=2)
            self._after_intervention()

    @one_line_errors
    def action_clear_ablations(self) -> None:
        panels = [p for p in self.intervened_panels() if p.stepper is not None and p.ablated]
        for panel in panels:
            panel.clear_ablations()
        if panels:
            self.notify("every head restored", timeout=2)
            self._after_intervention()

    def _after_intervention(self) -> None:
        self.position = max(p.position for p in self._ready())
        self.interventions_changed()
        self.refresh_view()

    @one_line_errors
    def action_scroll_columns(self, pages: int) -> None:
        for panel in self.decode_panels():
            panel.grid.scroll_columns(pages)

    @one_line_errors
    def action_numbers(self) -> None:
        for panel in self.decode_panels():
            panel.numbers = not panel.numbers
        self.refresh_view()

    # -- drawing ---------------------------------------------------------------------------------
    def refresh_view(self) -> None:
        panels = self.decode_panels()
        if not panels:
            return
        self.query_one(SourceBar).show_selection(self.show_selection())
        for panel in panels:
            panel.redraw()
        self.draw_extras()
