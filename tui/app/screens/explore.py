"""Explore: type a source, step greedy decoding one token at a time, look at every head, and
change the model to see why: knock heads out, feed it the answer, force a token.

The decode session holds the stepper and what is done to the model (tui/app/decode_session.py),
its panel draws it (tui/app/widgets/decode_panel.py), the keys are the shared decoding keys
(tui/app/decode_keys.py); this screen follows the app's current model, and m's ranking of the heads
runs in a worker (tui/app/head_ranking.py). h swaps the decode for the timeline of the model's probe
snapshots, if its file has them: the step keys (← →) then move through the snapshots, p plays
them.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.geometry import Region
from textual.screen import Screen
from textual.worker import Worker

from minitx.core.wording import counted
from minitx.tui.app.attribution_keys import ATTRIBUTION_BINDINGS
from minitx.tui.app.chart_keys import TIMELINE_ACTIONS, TIMELINE_BINDINGS, TimelineKeys
from minitx.tui.app.decode_keys import (
    ABLATION_BINDINGS,
    CLOSE_BINDING,
    DECODE_BINDINGS,
    SOURCE_BINDINGS,
    DecodeKeys,
)
from minitx.tui.app.errors import lacks_pairs, one_line_errors
from minitx.tui.app.head_ranking import HeadRanking
from minitx.tui.app.widgets.beam_note import BeamNote
from minitx.tui.app.widgets.decode_panel import DecodePanel
from minitx.tui.app.widgets.importance import RANKING_FIRST_ROW
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.app.widgets.source_bar import SourceBar
from minitx.tui.app.widgets.timeline import Timeline
from minitx.tui.app.widgets.titlebar import TitleBar

# What the step keys do while the timeline is shown: ← → a snapshot, x/Home and ⏎/End the first
# and last, [ ] , . the head shown; every other decoding key waits for the decode.
TIMELINE_STEPS = {"step": 1, "back": -1}
TIMELINE_KEYS = {*TIMELINE_STEPS, "reset", "run", "layer", "head"}
SCROLL_TIP = "move through a tall view (in the ranking: choose the head)"
# The keys that look at or change the decode (hidden while the timeline is shown): p shows the
# positions, or plays the timeline while that is shown (each is off the footer while the other
# applies, so the order of the bindings does not matter).
INTERVENTION_BINDINGS = [
    Binding("l", "view('lens')", "lens", tooltip="logit lens per decoder layer"),
    Binding("m", "importance", "rank", tooltip="rank heads, each knocked out alone"),
    Binding("p", "view('positions')", "pos", tooltip="position encoding and its similarity"),
    *ABLATION_BINDINGS,
    Binding("g", "teacher", "teacher", tooltip="teacher forcing: feed the answer"),
    Binding("f", "force", "force", tooltip="force a token here, decode on from it"),
    Binding("w", "failures", "wrong", tooltip="failures: sources it gets wrong (Enter opens one)"),
    Binding("P", "patch", "patch", tooltip="patch this source into a corrupted one"),
    # In the help; the footer is full at 80x24.
    Binding("C", "circuit", "circuit", show=False, tooltip="the circuit: what carries the answer"),
    Binding("A", "alignment", "align", show=False, tooltip="word alignment against gold"),
    Binding("B", "beam", "beam", show=False, tooltip="beam search: the search as a tree beside greedy"),
    Binding("L", "app.languages", "languages", show=False,
            tooltip="a multilingual model's source and target languages (mBART-50, NLLB-200)"),
    # A view taller than its box (the ranking of 24 heads, 48 heads at once); in the ranking ↑ ↓
    # choose the head, so k knocks out the one on the row.
    Binding("up", "scroll_view(-1)", "scroll", show=False, tooltip=SCROLL_TIP),
    Binding("down", "scroll_view(1)", "scroll", show=False, tooltip=SCROLL_TIP),
]


class ExploreScreen(HeadRanking, TimelineKeys, DecodeKeys, Screen):
    HELP_TITLE = "Explore"
    TIMELINE_HINT = "h shows them, where the file has them"
    HELP_NOTE = ("Rows: tokens generated; columns: source tokens; ◂ this step. A reverse model\n"
                 "draws an anti-diagonal. Beside it: the next token's log-probabilities.")
    AUTO_FOCUS = ""  # focus nothing: start on the step keys; i or / edits the source
    BINDINGS = [
        CLOSE_BINDING,
        *DECODE_BINDINGS,
        Binding("s", "kind", "attn", tooltip="attention: cross → decoder self → encoder self"),
        Binding("a", "view('heads')", "heads", tooltip="every head of that kind, with its score"),
        *ATTRIBUTION_BINDINGS,
        *INTERVENTION_BINDINGS,
        *TIMELINE_BINDINGS,  # after p's positions: on the replay, p plays (or says why not)
        *SOURCE_BINDINGS,
        Binding("h", "toggle_timeline", "replay", tooltip="replay the probe's attention as it trained"),
        Binding("t", "app.switch_mode('train')", "train", tooltip="Train"),
    ]

    def compose(self) -> ComposeResult:
        yield TitleBar("Explore")
        yield SourceBar()
        yield BeamNote()
        yield DecodePanel(id="explore-panel")
        yield Timeline(id="explore-timeline")
        yield KeyBar()

    def timeline_shown(self) -> bool:
        return self.timeline().display

    def why_not(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action in TIMELINE_ACTIONS:
            return self.timeline_why_not(action)
        if action == "close_view" and self.timeline_shown():
            return None  # esc leaves the replay too
        current = self.app.current
        if action == "toggle_timeline":  # a file without history has no timeline to show
            if self.timeline_shown() or (current and current.history and current.history.snapshot_steps):
                return None
            return (f"{current.name}: no training snapshots to replay ({current.no_history})" if current
                    else "no model yet: no training snapshots to replay")
        if self.timeline_shown() and action in self._decode_actions() | self._intervention_actions() \
                and action not in TIMELINE_KEYS:
            return "the replay is shown: h goes back to the decode"
        if action == "scroll_view" and not self._scrollable():
            return "everything fits: ↑ ↓ move only through a view taller than its box"
        return self.decode_why_not(action, parameters)  # DecodeKeys: < > only while cropped, # ...

    @staticmethod
    def _decode_actions() -> set[str]:
        return {b.action.split("(")[0] for b in (*DECODE_BINDINGS, *SOURCE_BINDINGS)} | {"view", "kind"}

    @staticmethod
    def _intervention_actions() -> set[str]:
        return {b.action.split("(")[0] for b in (*INTERVENTION_BINDINGS, *ATTRIBUTION_BINDINGS)} \
            | {"view", "kind", "scroll_view"}

    @one_line_errors
    def action_toggle_timeline(self) -> None:
        shown = not self.timeline_shown()
        self.timeline().display = shown
        self.panel.display = not shown
        self.query_one(SourceBar).display = not shown
        if shown:
            self._show_timeline()
        else:
            self.timeline().pause()
        self.refresh_bindings()

    def _show_timeline(self) -> None:
        current = self.app.current
        timeline = self.timeline()
        timeline.show_history(current.history if current else None, current.task if current else None)
        timeline.border_title = (f"timeline of {current.name} · probe {' '.join(timeline.source)}"
                                 if timeline.steps else "timeline")

    def action_close_view(self) -> None:
        if self.timeline_shown():
            self.action_toggle_timeline()
        else:
            super().action_close_view()

    def action_step(self) -> None:
        if self.timeline_shown():
            self.step_timeline(TIMELINE_STEPS["step"])
        else:
            super().action_step()

    def action_back(self) -> None:
        if self.timeline_shown():
            self.step_timeline(TIMELINE_STEPS["back"])
        else:
            super().action_back()

    def action_reset(self) -> None:
        if self.timeline_shown():
            self.action_snapshot(0)
        else:
            super().action_reset()

    def action_run(self) -> None:
        if self.timeline_shown():
            self.action_snapshot(-1)
        else:
            super().action_run()

    def action_layer(self, delta: int) -> None:
        if self.timeline_shown():
            self.action_timeline_head(delta, 0)
        else:
            super().action_layer(delta)

    def action_head(self, delta: int) -> None:
        if self.timeline_shown():
            self.action_timeline_head(0, delta)
        else:
            super().action_head(delta)

    # -- views taller than their box ------------------------------------------------------------
    def _scrollable(self) -> bool:
        box = self.panel.grid_box
        return self.session.view_mode == "importance" and self.session.importance is not None \
            or box.max_scroll_y > 0 or self.session.view_mode == "grid" and self.panel.grid.rows_cropped

    @one_line_errors
    def action_scroll_view(self, lines: int) -> None:
        """↑ ↓: in the ranking, the head on the row above or below (k then knocks it out); in any
        other view taller than its box, a line up or down."""
        session, box = self.session, self.panel.grid_box
        if session.view_mode == "grid" and self.panel.grid.rows_cropped:
            self.panel.grid.scroll_rows(lines)  # the column labels stay on top
            return
        if session.view_mode != "importance" or session.importance is None:
            box.scroll_relative(y=lines, animate=False)
            return
        names = [e.head for e in session.importance.heads]
        shown = str(session.selected_head)
        row = (names.index(shown) + lines) % len(names) if shown in names else 0
        from minitx.core.interp.interventions import parse_heads

        head = parse_heads(names[row], session.record.model)[0]
        session.kind = head.kind
        session.select_head(head.layer, head.head)
        self.refresh_view()
        box.scroll_to_region(Region(0, RANKING_FIRST_ROW + row, 1, 1), animate=False)

    @property
    def panel(self) -> DecodePanel:
        return self.query_one("#explore-panel", DecodePanel)

    @property
    def session(self):
        """The DecodeSession on screen: what Explore's keys change, and its panel draws."""
        return self.panel.session

    @property
    def stepper(self):
        """The core Stepper on screen (None before the first model)."""
        return self.session.stepper

    def decode_panels(self) -> list[DecodePanel]:
        return [self.panel] if self.session.record is not None else []

    def on_mount(self) -> None:
        self.timeline().display = False
        self.app.model_changed.subscribe(self, self._model_changed)
        self._model_changed(self.app)

    @one_line_errors
    def _model_changed(self, app) -> None:
        panel, session = self.panel, self.session
        if app.current is None:
            panel.main.loading = app.loading
            self.query_one(TitleBar).set_info(app.status)
            panel.show_status(app.status)
            return
        panel.main.loading = False
        self.query_one(BeamNote).follow(app.current)
        if session.record is app.current:
            self._draw_title()
            return
        if self.timeline_shown():
            self._show_timeline()
        self.refresh_bindings()
        self.workers.cancel_group(self, "importance")
        # Keep the source on screen for a model of the same tokens; never leave the old model's
        # decode: a source the new model cannot take falls back to the last good one, then to
        # the task's own example (a date for dates, a held-out pair for a data file).
        same_tokens = (session.record is not None
                       and session.record.task.src_vocab == app.current.task.src_vocab)
        shown = self.shown_source()
        session.set_model(app.current)
        self._draw_title()
        self.source_for_model(app.current.task, same_tokens, shown)
        self.action_run()  # the whole decode at first sight; x resets and → steps from there

    def draw_extras(self) -> None:
        self._draw_title()
        self.call_after_refresh(self.panel.name_scrolling)  # ↑ ↓ (scroll_view) scroll a tall view

    def export_numbers(self):
        """The numbers beside the picture when E exports this screen (tui/app/exports.py)."""
        from minitx.tui.app.exports import session_numbers, timeline_numbers

        return timeline_numbers(self.timeline(), "explore") if self.timeline_shown() \
            else session_numbers(self.session)

    def _draw_title(self) -> None:
        """The model, and what is done to it: the heads knocked out, teacher forcing."""
        session, app = self.session, self.app
        if session.record is None or app.current is None:
            return
        info, *shorter = session.record.summaries
        if session.ablated or session.teacher:  # what is done to the model matters more than its size
            from minitx.core.interp.interventions import without_heads

            name, count, fed, shorter = session.record.name, len(session.ablated), "", []
            info = without_heads(name, session.ablated, session.record.heads) if count else name
            if session.teacher:
                info, fed = info + " · teacher-forced", " · teacher-forced"
            if count:  # the grid's title and the score table say which
                shorter = [f"{name} without {counted(count, 'head')}{fed}"]
        self.query_one(TitleBar).set_info(info, *shorter)

    # -- changing the model ----------------------------------------------------------------------
    @one_line_errors
    def action_teacher(self) -> None:
        session = self.session
        if session.stepper is None:
            return
        if not session.teacher and session.answer is None:
            if not lacks_pairs(self, "teacher forcing"):
                self.notify(f"the {session.record.task.name} task cannot tell the answer for a typed "
                            "source: nothing to feed the decoder", severity="warning", timeout=4)
            return
        session.set_teacher(not session.teacher)
        self.position = session.position
        self.notify("fed the task's answer at every step (teacher forcing)" if session.teacher
                    else "greedy: fed its own tokens", timeout=3)
        self.refresh_view()

    @one_line_errors
    def action_force(self) -> None:
        session = self.session
        current = session.stepper.current if session.stepper else None
        if current is None:
            self.notify("step once (→) first: a token is forced at the current step")
            return

        def chosen(token: int | None) -> None:
            if token is not None:
                self._forced(token)

        vocab = session.record.task.vocab
        self.app.ask_token(current.index + 1, vocab, vocab.label(current.predicted), chosen)

    @one_line_errors
    def _forced(self, token: int) -> None:
        self.session.force(token)
        self.position = self.session.position
        self.refresh_view()

    @one_line_errors
    def action_failures(self) -> None:
        from minitx.core.interp.interventions import Interventions

        session = self.session
        if session.record is None or lacks_pairs(self, "finding failures"):
            return

        def chosen(failure) -> None:
            if failure is not None:
                self._open_failure(failure)

        self.app.show_failures(session.record.model, session.record.task,
                               Interventions(zero=session.ablated), chosen)

    @one_line_errors
    def action_patch(self) -> None:
        """The patching dialog: the source on screen into a typed one (needs no example pairs:
        where the task cannot tell the answers, the model's own outputs are the answers)."""
        session = self.session
        if session.stepper is not None:
            self.app.show_patching(session.record.model, session.record.task, session.stepper.src_ids)

    @one_line_errors
    def action_beam(self) -> None:
        """The beam view of the source on screen (the heads knocked out stay out). Teacher forcing
        and a forced token change what greedy decoding is fed: a search of the model's own
        choices cannot take them."""
        s = self.session
        if s.teacher or s.forced:
            what, undo = ("teacher forcing", "g turns it off") if s.teacher else \
                ("a forced token", "i, Enter decodes afresh")
            self.notify(f"the beam searches the model's own choices: {what} cannot apply to it ({undo})",
                        severity="warning", timeout=5)
        elif s.stepper is not None:
            self.app.show_beam(s.record, s.stepper.src_ids, s.ablated, (s.layer_index, s.head_index))

    @one_line_errors
    def action_alignment(self) -> None:
        """The alignment view of the pairs file the model measures on (tui/app/screens/alignment.py)."""
        from minitx.tui.app.alignment_session import AlignmentSession, pairs_path_of

        record = self.session.record
        if record is None:
            return
        path = pairs_path_of(record.task)
        if path is None:
            self.notify("the alignment view aligns a pairs file's pairs: O chooses one", severity="warning",
                        timeout=8)
            return
        self.app.show_alignment(AlignmentSession(record.model, record.task, path), record.name)

    @one_line_errors
    def action_circuit(self) -> None:
        record = self.session.record
        if record is not None and not lacks_pairs(self, "the circuit"):
            self.app.show_circuit(record)

    @one_line_errors
    def _open_failure(self, failure) -> None:
        """Decode a failure's source and stop at its first wrong step."""
        text = self.session.record.task.format_source(failure.source)
        if self.set_source(text):
            self.query_one(SourceBar).show_source(text)
            self.position = failure.first_wrong + 1
            self._move()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if self.attribution_failed(event):  # AttributionKeys: one line, and the row goes
            return
        self.ranking_failed(event)  # HeadRanking: the same for the ranking's worker
