"""Explore: type a source, step greedy decoding one token at a time, look at every head.

The decode panel owns the stepper and the pictures (tui/widgets/decode_panel.py), the keys are
the shared decoding keys (tui/decode_keys.py); this screen follows the app's current model.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen

from minitx.tui.decode_keys import DECODE_BINDINGS, SOURCE_BINDINGS, DecodeKeys
from minitx.tui.errors import one_line_errors
from minitx.tui.widgets.decode_panel import DecodePanel
from minitx.tui.widgets.keybar import KeyBar
from minitx.tui.widgets.source_bar import DEFAULT_SOURCE, SourceBar
from minitx.tui.widgets.titlebar import TitleBar


class ExploreScreen(DecodeKeys, Screen):
    AUTO_FOCUS = ""  # focus nothing: start on the step keys; i or / edits the source
    BINDINGS = [
        *DECODE_BINDINGS,
        Binding("a", "view('heads')", "heads"),
        Binding("s", "view('self')", "self-attn"),
        *SOURCE_BINDINGS,
        Binding("t", "app.switch_mode('train')", "train"),
    ]

    def compose(self) -> ComposeResult:
        yield TitleBar("Explore")
        yield SourceBar()
        yield DecodePanel(id="explore-panel")
        yield KeyBar()

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
        self.app.model_changed.subscribe(self, self._model_changed)
        self._model_changed(self.app)

    @one_line_errors
    def _model_changed(self, app) -> None:
        panel, title = self.panel, self.query_one(TitleBar)
        if app.current is None:
            panel.loading = app.loading
            title.set_info(app.status)
            panel.show_status(app.status)
            return
        panel.loading = False
        title.set_info(app.current.summary)
        if panel.record is app.current:
            return
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
