"""Activation patching in the app: the source on screen is the clean run; type a corrupted one
of the same length, and a worker copies every head, cross-attention input and residual stream
across, one at a time, then estimates them all by attribution (the same report as `minitx patch`)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from minitx.tui.app.exports import EXPORT_BINDING
from minitx.tui.app.messages import PatchProgress, PatchReady
from minitx.tui.app.widgets.topk import bar


def suggested_corruption(clean: list[int], task, max_len: int) -> str:
    """The corrupted field's first text: every token moved one on in the vocabulary (digits: 9 to
    0), the same length and for the bundled tasks an answer that differs at every step, when that
    text reads back as as many tokens; else (subword pieces re-cut differently) the clean source's
    own text, for the person to change a word of."""
    from minitx.core.data.vocab import TaskInputError

    ordinary = task.src_vocab.real_ids()
    moved = [ordinary[(ordinary.index(t) + 1) % len(ordinary)] if t in ordinary else t for t in clean]
    text = task.format_source(moved)
    try:
        if len(task.parse(text, max_len=max_len)) == len(clean):
            return text
    except TaskInputError:
        pass
    return task.format_source(clean)


class PatchScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "close"), EXPORT_BINDING]

    def __init__(self, model, task, clean: list[int]) -> None:
        super().__init__()
        self.decoded = (model, task)  # (Screen has a `task` of its own)
        self.clean = list(clean)
        self.result = None  # core.patching.PatchingResult once measured
        self.estimate = self.agreements = None  # its attribution (core/interp/attribution.py)

    def compose(self) -> ComposeResult:
        task = self.decoded[1]
        with Vertical(id="patch-box", classes="dialog"):
            yield Label(f"clean: {task.format_source(self.clean)} (the source on screen) · corrupted:")
            model = self.decoded[0]
            limit = task.source_limit(model.cfg.max_len)
            yield Input(suggested_corruption(self.clean, task, limit), id="patch-source", compact=True)
            yield Static("", id="patch-status", markup=False)
            with VerticalScroll(id="patch-result"):
                yield Static("", id="patch-report")
            yield Label("[dim]Enter patches (every head on) · ↑↓ scroll · esc closes[/dim]")

    def on_mount(self) -> None:
        self.query_one("#patch-box").border_title = "activation patching: clean into corrupted"
        self.query_one("#patch-source").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        from minitx.core.data.vocab import TaskInputError

        event.stop()
        model, task = self.decoded
        try:
            corrupted = task.parse(event.value, max_len=task.source_limit(model.cfg.max_len))
        except TaskInputError as e:
            self._status(f"✗ {e}")
            return
        self._status("copying each activation across…")
        self.sweep(corrupted)

    @work(thread=True, exclusive=True, group="patch", exit_on_error=False)
    def sweep(self, corrupted: list[int]) -> None:
        from minitx.core.interp.attribution import agreements, attribute
        from minitx.core.interp.patching import Patcher, sweep

        model, task = self.decoded
        try:
            patcher = Patcher(model, task, self.clean, corrupted)
        except ValueError as e:  # a pair that cannot be patched: say why, in the dialog
            self.post_message(PatchReady(error=str(e)))
            return
        result = sweep(patcher, progress=lambda done, total: self.post_message(PatchProgress(done, total)))
        self.estimate = attribute(patcher)
        self.agreements = agreements(result, self.estimate)
        self.post_message(PatchReady(result))

    def on_patch_progress(self, message: PatchProgress) -> None:
        self._status(f"copying each activation across… {bar(message.done / message.total, 12)} "
                     f"{message.done}/{message.total}")

    def on_patch_ready(self, message: PatchReady) -> None:
        if message.error:
            self._status(f"✗ {message.error}")
            return
        from minitx.tui.render.patch_tables import patching_report

        self.result = message.result
        self._status("")
        model, task = self.decoded
        self.query_one("#patch-report", Static).update(patching_report(message.result, model.cfg.n_heads,
                                                                       task, self.estimate,
                                                                       self.agreements))
        self.query_one("#patch-result").focus()

    def export_numbers(self):
        """The numbers beside the picture when E exports this dialog: `minitx patch --json`'s."""
        from minitx.tui.app.exports import json_numbers
        from minitx.tui.render.patch_tables import patching_data

        if self.result is None:
            return None
        return json_numbers("patching", patching_data(self.result, self.estimate, self.agreements))

    def _status(self, text: str) -> None:
        status = self.query_one("#patch-status", Static)
        status.update(text)
        status.display = bool(text)
