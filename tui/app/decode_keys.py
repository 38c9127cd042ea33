"""The decoding keys of a screen that shows one or more DecodePanels, stepping in lockstep.

A screen mixes in DecodeKeys, lists DECODE_BINDINGS (and SOURCE_BINDINGS) in its BINDINGS,
and says which panels it drives (`decode_panels`) and what else to draw after a move
(`draw_extras`). Explore drives one panel, Compare two: the same keys, the same code. The keys
change each panel's DecodeSession (tui/app/decode_session.py); the panels then draw it.

Adding a key: a Binding here (or in the screen's own BINDINGS when only that screen has it) and
an `action_...` method that changes the sessions, then calls `self.refresh_view()`.
"""

from __future__ import annotations

import time

from textual import work
from textual.binding import Binding
from textual.widgets import Input

from minitx.tui.app.attribution_keys import AttributionKeys
from minitx.tui.app.decode_session import KINDS, RUN_AT_ONCE, DecodeSession
from minitx.tui.app.errors import one_line_errors
from minitx.tui.app.key_reasons import ExplainedKeys
from minitx.tui.app.messages import RolesReady
from minitx.tui.app.widgets.decode_panel import DecodePanel
from minitx.tui.app.widgets.source_bar import SourceBar, SourceInput

# Seconds of decoding a frame after the first (RUN_AT_ONCE: a small model's whole decode): a big
# model's long decode grows on screen, a key between frames.
RUN_FRAME = 0.3

DECODE_BINDINGS = [
    Binding("right,n", "step", "step", tooltip="step one token"),
    Binding("left,b", "back", "back", tooltip="step back"),
    Binding("enter,r", "run", "run", tooltip="run to the end"),
    Binding("end", "run", "run", show=False, tooltip="run to the end"),
    Binding("x", "reset", "reset", tooltip="reset to step 0"),
    Binding("home", "reset", "reset", show=False, tooltip="reset to step 0"),
    Binding("left_square_bracket", "layer(-1)", "layer", tooltip="layer"),
    Binding("right_square_bracket", "layer(1)", "layer", tooltip="layer"),
    Binding("comma", "head(-1)", "head", tooltip="head"),
    Binding("full_stop", "head(1)", "head", tooltip="head"),
    # Only while a long source does not fit: the grid then says "< > scroll" itself (the
    # footer has no room at 80 columns).
    Binding("less_than_sign", "scroll_columns(-1)", "columns", key_display="<", show=False,
            tooltip="scroll a grid too wide to show"),
    Binding("greater_than_sign", "scroll_columns(1)", "columns", key_display=">", show=False,
            tooltip="scroll a grid too wide to show"),
    Binding("z", "zoom", "zoom", show=False,
            tooltip="zoom: wide cells, each source piece whole (again: all)"),
]
# Esc leaves any view for the attention grid (the footer names it while there is one to leave).
CLOSE_BINDING = Binding("escape", "close_view", "close", tooltip="back to the attention grid from any "
                        "other view: all heads, the lens, the ranking, the positions, the replay, the curves")
# Changing the model on screen: Explore acts on its panel, Compare on B (`intervened_panels`).
ABLATION_BINDINGS = [
    Binding("k", "ablate", "ablate", tooltip="knock the selected head out (again: back in)"),
    Binding("K", "clear_ablations", "restore", tooltip="restore every head"),
]
SOURCE_BINDINGS = [
    # "nums": numbers in the cells. Short, so Explore's keys (with h) fit three lines at 80 columns.
    Binding("number_sign", "numbers", "nums", key_display="#", tooltip="numbers in the cells"),
    Binding("i", "edit_source", "source", tooltip="edit the source (Enter decodes it, esc leaves)"),
    Binding("slash", "edit_source", "source", show=False,
            tooltip="edit the source (Enter decodes it, esc leaves)"),
]


# What # prints numbers in: one head's grid, the positions, the attribution beside a grid; why
# not in the other views.
NUMBERS_VIEWS = ("grid", "positions", "attribution")
NO_NUMBERS = {"heads": "# prints the weights in one head's grid: a goes back to it",
              "lens": "the lens shows its probabilities already: l goes back to the grid",
              "importance": "the ranking is numbers already: m goes back to the grid"}


class DecodeKeys(AttributionKeys, ExplainedKeys):
    """Mixed into a Screen. The keys change the panels' DecodeSessions, then redraw the panels.
    `position` is the shared step: each session shows min(position, the length of its decode)."""

    position = 0
    _runs = 0  # runs started (or stopped by a key): a run's later frames go on only while it is the last

    def decode_why_not(self, action: str, parameters: tuple) -> str | None:
        """Why a decoding key does nothing now, or None (tui/app/key_reasons.py)."""
        panels = self.decode_panels()
        if action == "close_view" and not self.view_open() and not self.attributing():
            return "esc leaves a view for the attention grid: the grid is shown"
        if action == "scroll_columns" and not any(p.scroll_grid.cropped for p in panels):
            return "every column fits: < > scroll only a grid too wide to show"
        if action == "zoom" and panels and all(p.session.view_mode != "grid" for p in panels):
            return "z zooms one head's grid: s or a goes back to it"
        if action == "numbers" and panels:
            views = [p.session.view_mode for p in panels]
            if not set(views) & set(NUMBERS_VIEWS):
                return NO_NUMBERS.get(views[0], "no numbers to print in this view")
        return None

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

    def sessions(self) -> list[DecodeSession]:
        return [panel.session for panel in self.decode_panels()]

    def show_selection(self) -> str:
        first = self.sessions()[0]
        layers, heads = self.shape()
        return f"layer {first.layer_index + 1}/{layers} · head {first.head_index + 1}/{heads}"

    # -- the source ------------------------------------------------------------------------------
    def source_for_model(self, task, same_tokens: bool, *kept: str) -> None:
        """The source once the model on screen changed: for a model of the same tokens the one in
        the box (then `kept`, a last good one), else, or when none is taken, the task's own example
        (a sentence for a translation model, a date for dates, a held-out pair for a data file)."""
        bar = self.query_one(SourceBar)
        example = task.example()
        bar.show_example(example)
        for text in ((bar.text, *kept, example) if same_tokens else (example,)):
            if text and self.set_source(text):
                bar.show_source(text)
                return

    @one_line_errors
    def set_source(self, text: str) -> bool:
        """Parse `text` for every session (each model's task reads it in its own vocabulary, and
        wraps it as its code did) and restart them on it; an unusable source is an inline
        message and leaves the decodes as they were."""
        from minitx.core.data.vocab import TaskInputError

        sessions, bar = self.sessions(), self.query_one(SourceBar)
        if not sessions:
            return False
        try:
            longest = min(s.longest_source for s in sessions)
            ids = [session.record.task.parse(text, max_len=longest) for session in sessions]
        except TaskInputError as e:
            bar.show_error(str(e))
            return False
        bar.show_error("")
        self.stop_running()
        for session, source in zip(sessions, ids):
            session.set_source(source)
            task = session.record.task
            unseen = [task.vocab.label(i) for i in task.unseen_source_tokens(source)]
            if unseen:  # readable, yet the encoder never met it: say so, and decode anyway
                self.notify(f"{session.record.name}: {', '.join(map(repr, unseen[:5]))} occurred in "
                            "training only in targets, never in a source", severity="warning",
                            markup=False)
        self.position = 0
        self.refresh_view()
        return True

    def shown_source(self) -> str | None:
        """The source the sessions decode (None before the first)."""
        shown = next((s for s in self.sessions() if s.stepper), None)
        return shown.record.task.format_source(shown.stepper.src_ids) if shown else None

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
        """Leaving the box (esc, a click elsewhere) shows the source the grid shows again, and
        no error about a text no longer there."""
        shown = self.shown_source()
        if isinstance(event.input, SourceInput) and shown is not None:
            bar = self.query_one(SourceBar)
            if bar.text != shown:  # the text that was refused goes, and the reason with it
                bar.show_source(shown)
                bar.show_error("")

    def action_edit_source(self) -> None:
        self.query_one(SourceBar).input.focus()

    def action_leave_source(self) -> None:
        self.set_focus(None)

    # -- stepping --------------------------------------------------------------------------------
    def _ready(self) -> list[DecodeSession]:
        return [s for s in self.sessions() if s.stepper is not None]

    def _move(self) -> None:
        for session in self._ready():
            session.goto(self.position)
        self.refresh_view()

    @one_line_errors
    def action_step(self) -> None:
        self.stop_running()
        ready = self._ready()
        if ready and all(s.finished for s in ready):
            self.notify("the decode is finished: ← steps back, x resets", timeout=3)
        elif ready:
            self.position += 1
            self._move()

    @one_line_errors
    def action_back(self) -> None:
        self.stop_running()
        ready = self._ready()
        if ready:
            self.position = max(0, max(s.position for s in ready) - 1)
            self._move()

    @one_line_errors
    def action_run(self) -> None:
        self._runs = self._runs + 1  # a run started: an earlier one's frames stop
        self._run_frame(self._runs, RUN_AT_ONCE)

    @one_line_errors
    def _run_frame(self, run: int, seconds: float) -> None:
        """Decode for `seconds`, draw, and go on in the next frame until the end, unless a key
        moved the decode meanwhile (another run, a step, back, reset, a new source) or another
        screen covers this one (the beam view's B: Enter runs on from where it stopped)."""
        ready = self._ready()
        if not ready or run != self._runs or (seconds != RUN_AT_ONCE and self.app.screen is not self):
            return
        until = time.monotonic() + seconds
        for session in ready:
            session.run_to_end(until)
        self.position = max(s.position for s in ready)
        self._move()
        if not all(s.finished for s in ready):
            if seconds == RUN_AT_ONCE:
                cap = max(s.stepper.cap for s in ready)
                self.notify(f"decoding to the end (at most {cap} steps), a frame at a time: ← → or x "
                            "stop it there", timeout=4)
            self.set_timer(0.001, lambda: self._run_frame(run, RUN_FRAME))

    def stop_running(self) -> None:
        """A key that moves the decode itself stops a run going on frame by frame."""
        self._runs = self._runs + 1

    @one_line_errors
    def action_reset(self) -> None:
        self.stop_running()
        if self._ready():
            self.position = 0
            self._move()

    # -- what to look at -------------------------------------------------------------------------
    def shape(self) -> tuple[int, int]:
        """Layers (of the attention kind shown) and heads of the largest model on screen: the keys
        reach every head of each; a panel whose model lacks the one chosen says so."""
        sessions = self.sessions()
        return max(s.layer_count() for s in sessions), max(s.record.heads for s in sessions)

    def select_head(self, layer: int, head: int) -> None:
        for session in self.sessions():
            session.select_head(layer, head)

    @one_line_errors
    def action_layer(self, delta: int) -> None:
        sessions = self.sessions()
        if sessions:
            first = sessions[0]
            self.select_head((first.layer_index + delta) % self.shape()[0], first.head_index)
            self.refresh_view()

    @one_line_errors
    def action_head(self, delta: int) -> None:
        sessions = self.sessions()
        if sessions:
            first = sessions[0]
            self.select_head(first.layer_index, (first.head_index + delta) % self.shape()[1])
            self.refresh_view()

    @one_line_errors
    def view_open(self) -> bool:
        """Whether a view other than the attention grid is shown (esc leaves it)."""
        return any(s.view_mode != "grid" for s in self.sessions())

    @one_line_errors
    def action_close_view(self) -> None:
        if self.stop_attributions():  # Esc first stops an attribution being computed (AttributionKeys)
            return
        for session in self.sessions():
            session.set_view("grid")
        self.refresh_view()

    def action_view(self, view: str) -> None:
        for session in self.sessions():
            session.set_view("grid" if session.view_mode == view else view)
            if session.view_mode == "attribution" and session.attribution_method is None:
                session.next_method(with_off=False)
            if session.view_mode == "heads" and not session.roles_asked and session.record.task.has_examples:
                session.roles_asked = True  # once per model: about 0.1-0.5 s in a worker
                self._measure_roles(session.record)
        self.refresh_view()

    @work(thread=True, group="roles", exit_on_error=False)
    def _measure_roles(self, record) -> None:
        from minitx.core.interp.roles import strongest_roles

        self.post_message(RolesReady(record, strongest_roles(record.model, record.task)))

    def on_roles_ready(self, message: RolesReady) -> None:
        for session in self.sessions():
            if session.record is message.record:
                session.roles = message.roles
        self.refresh_view()

    @one_line_errors
    def action_kind(self) -> None:
        """The next attention kind: cross -> decoder self -> encoder self -> cross."""
        sessions = self.sessions()
        if not sessions:
            return
        layer, head = sessions[0].layer_index, sessions[0].head_index
        for session in sessions:
            session.set_kind(KINDS[(KINDS.index(session.kind) + 1) % len(KINDS)])
            if session.view_mode not in ("grid", "heads"):
                session.set_view("grid")  # the kind is seen on a grid
        self.select_head(min(layer, self.shape()[0] - 1), head)  # the same layer in every panel
        self.refresh_view()

    @one_line_errors
    def action_ablate(self) -> None:
        ready = [p.session for p in self.intervened_panels() if p.session.stepper is not None]
        changed = [s for s in ready if s.has_selected_head]
        if ready and not changed:
            self.notify(f"{ready[0].record.name} has no {ready[0].selected_head}: nothing to knock out",
                        timeout=3)
        for session in changed:
            session.toggle_ablation()
        if changed:
            head = changed[0].selected_head
            state = "knocked out" if head in changed[0].ablated else "restored"
            self.notify(f"{head} {state}", timeout=2)
            self._after_intervention()

    @one_line_errors
    def action_clear_ablations(self) -> None:
        changed = [p.session for p in self.intervened_panels()
                   if p.session.stepper is not None and p.session.ablated]
        for session in changed:
            session.clear_ablations()
        if changed:
            self.notify("every head restored", timeout=2)
            self._after_intervention()

    def _after_intervention(self) -> None:
        self.position = max(s.position for s in self._ready())
        self.interventions_changed()
        self.refresh_view()

    @one_line_errors
    def action_zoom(self) -> None:
        for panel in self.decode_panels():
            panel.grid.toggle_zoom()

    def action_scroll_columns(self, pages: int) -> None:
        for panel in self.decode_panels():
            panel.scroll_grid.scroll_columns(pages)
            panel.redraw()  # a grid beside it shows the same columns

    @one_line_errors
    def action_numbers(self) -> None:
        for session in self.sessions():
            session.numbers = not session.numbers
        self.refresh_view()

    # -- drawing ---------------------------------------------------------------------------------
    def refresh_view(self) -> None:
        panels = self.decode_panels()
        if not panels:
            return
        if any(p.session.runs_on for p in panels):  # a change's decode to the end outran its budget
            for panel in panels:
                panel.session.runs_on = False
            self._runs += 1
            run = self._runs
            self.set_timer(0.001, lambda: self._run_frame(run, RUN_FRAME))
        self._start_attributions()  # before drawing: a cheap one is on this frame already
        self.query_one(SourceBar).show_selection(self.show_selection())
        for panel in panels:
            panel.redraw()
        self.draw_extras()
        self.refresh_bindings()  # what works depends on the view (# on a grid, < > on a wide one)
