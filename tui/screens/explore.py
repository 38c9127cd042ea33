"""Explore: type a source, step greedy decoding one token at a time, look at every head.

The decode panel owns the stepper and the pictures (tui/widgets/decode_panel.py), the keys are
the shared decoding keys (tui/decode_keys.py); this screen follows the app's current model.
h swaps the decode for the timeline of the model's probe snapshots, if its file has them: the
step keys (← →) then move through the snapshots, p plays them.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen

from minitx.tui.chart_keys import TIMELINE_BINDINGS, TimelineKeys
from minitx.tui.decode_keys import DECODE_BINDINGS, SOURCE_BINDINGS, DecodeKeys
from minitx.tui.errors import one_line_errors
from minitx.tui.widgets.decode_panel import DecodePanel
from minitx.tui.widgets.keybar import KeyBar
from minitx.tui.widgets.source_bar import DEFAULT_SOURCE, SourceBar
from minitx.tui.widgets.timeline import Timeline
from minitx.tui.widgets.titlebar import TitleBar

# What the step keys do while the timeline is shown; every other decoding key waits for the decode.
TIMELINE_STEPS = {"step": 1, "back": -1}


class ExploreScreen(TimelineKeys, DecodeKeys, Screen):
    AUTO_FOCUS = ""  # focus nothing: start on the step keys; i or / edits the source
    BINDINGS = [
        *DECODE_BINDINGS,
        Binding("a", "view('heads')", "heads"),
        Binding("s", "view('self')", "self-attn"),
        *SOURCE_BINDINGS,
        Binding("h", "toggle_timeline", "timeline"),
        *TIMELINE_BINDINGS,
        Binding("t", "app.switch_mode('train')", "train"),
    ]

    def compose(self) -> ComposeResult:
        yield TitleBar("Explore")
        yield SourceBar()
        yield DecodePanel(id="explore-panel")
        yield Timeline(id="explore-timeline")
        yield KeyBar()

    def timeline_shown(self) -> bool:
        return self.timeline().display

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        applies = self.check_timeline_action(action)
        if applies is not None:
            return applies
        if action == "toggle_timeline":  # a file without history has no timeline to show
            current = self.app.current
            return self.timeline_shown() or bool(current and current.history
                                                  and current.history.snapshot_steps)
        if self.timeline_shown() and action not in (*TIMELINE_STEPS, "toggle_timeline") \
                and action in self._decode_actions():
            return None
        return super().check_action(action, parameters)  # DecodeKeys: < > only while cropped

    @staticmethod
    def _decode_actions() -> set[str]:
        return {b.action.split("(")[0] for b in (*DECODE_BINDINGS, *SOURCE_BINDINGS)} | {"view"}

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

    def action_step(self) -> None:
        if self.timeline_shown():
            self.timeline().step_by(TIMELINE_STEPS["step"])
        else:
            super().action_step()

    def action_back(self) -> None:
        if self.timeline_shown():
            self.timeline().step_by(TIMELINE_STEPS["back"])
        else:
            super().action_back()

    @property
    def panel(self) -> DecodePanel:
        return self.query_one("#explore-panel", DecodePanel)

    @property
    def stepper(self):
        """The core Stepper on screen (None before the first model)."""
        return self.panel.stepper

    def decode_panels(self) -> list[DecodePanel]:
        return [self.panel] if self.panel.record is not None else []

    def on_mount(self) -> None:
        self.timeline().display = False
        self.app.model_changed.subscribe(self, self._model_changed)
        self._model_changed(self.app)

    @one_line_errors
    def _model_changed(self, app) -> None:
        panel, title = self.panel, self.query_one(TitleBar)
        if app.current is None:
            panel.main.loading = app.loading
            title.set_info(app.status)
            panel.show_status(app.status)
            return
        panel.main.loading = False
        title.set_info(app.current.summary)
        if panel.record is app.current:
            return
        if self.timeline_shown():
            self._show_timeline()
        self.refresh_bindings()
        # Keep the source on screen; never leave the old model's decode: a source the new model
        # cannot take falls back to the last good one, then to the default.
        shown = self.shown_source()
        panel.set_model(app.current)
        bar = self.query_one(SourceBar)
        for text in (bar.text, shown, DEFAULT_SOURCE):
            if text and self.set_source(text):
                bar.show_source(text)
                break
        self.action_run()  # the whole decode at first sight; x resets and → steps from there
