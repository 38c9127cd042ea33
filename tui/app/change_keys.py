"""Compare's c: the summary box as base against fine-tuned (core/fine_tune_diff.py): both
models' loss, BLEU and chrF on A's pairs, how many outputs differ, and the layers and heads that
moved most; measured once per pair, in a worker, when first asked for. A mixin of CompareScreen,
which keeps `checkpoints` (the core Checkpoints of A and B) and `models`."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.app.errors import error_text, one_line_errors
from minitx.tui.app.messages import ChangesReady
from minitx.tui.render.fine_tune_tables import changes_summary

CHANGES_PAIRS = 100  # of A's pairs, both models decode them for the table
CHANGES_BINDING = Binding("c", "toggle_changes", "changes", show=False,
                          tooltip="the summary as base against fine-tuned: loss, BLEU, chrF, the layers and "
                          "heads that moved (again: back)")


class ChangeKeys:
    changes = None  # core.fine_tune_diff.FineTuneDiff of the pair on screen, once c asked for it
    changes_shown = False  # the summary box shows it

    def changes_why_not(self, action: str) -> str | None:
        if action == "toggle_changes" and not self.models:
            return "no models yet: 1 and 2 choose A and B"
        return None

    @one_line_errors
    def action_toggle_changes(self) -> None:
        self.changes_shown = not self.changes_shown
        if self.changes_shown and self.changes is None and len(self.checkpoints) == 2:
            self._measure_changes(self.checkpoints)
        self._draw_summary()

    def changes_reset(self) -> None:
        """A new pair on screen: measured afresh (now, if the table is shown)."""
        self.changes = None
        if self.changes_shown and len(self.checkpoints) == 2:
            self._measure_changes(self.checkpoints)

    @work(thread=True, exclusive=True, group="changes", exit_on_error=False)
    def _measure_changes(self, checkpoints: tuple) -> None:
        from minitx.core.fine_tune_diff import fine_tune_diff

        changes = fine_tune_diff(*checkpoints, n=CHANGES_PAIRS)
        if not get_current_worker().is_cancelled:
            self.post_message(ChangesReady(changes, checkpoints))

    def on_changes_ready(self, message: ChangesReady) -> None:
        if message.checkpoints is self.checkpoints:  # the pair is still the one measured
            self.changes = message.changes
            self._draw_summary()

    def changes_failed(self, event: Worker.StateChanged) -> bool:
        """The worker's error as one line, and the summary back; True when it was this worker's."""
        if event.worker.group != "changes" or event.state != WorkerState.ERROR:
            return False
        event.stop()
        self.changes_shown = False
        self._draw_summary()
        self.notify(f"cannot compare as base and fine-tune: {error_text(event.worker.error)}",
                    severity="error", markup=False)
        return True

    def draw_changes(self, box, summary) -> bool:
        """The table in the summary box when it is shown (True), else the box's own title (False)."""
        box.border_title = "base against fine-tuned (c: back)" if self.changes_shown else "summary"
        if not self.changes_shown:
            return False
        if self.changes is None:
            summary.update(Text(f"decoding up to {CHANGES_PAIRS} of A's pairs with both models, comparing "
                                "their weights…", style="italic dim"))
        else:
            summary.update(changes_summary(self.changes, (self.models["A"].name, self.models["B"].name)))
        return True
