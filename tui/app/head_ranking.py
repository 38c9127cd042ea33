"""Explore's m: rank the heads, each knocked out alone (core/interp/importance.py), measured in a
worker that reports its progress and can be cancelled; the ranking fills the decode panel's
importance view once it is there, and a failure is one line that leaves the grid.

A screen mixes in HeadRanking beside DecodeKeys (whose session, action_view and refresh_view it
uses) and calls ranking_failed from its on_worker_state_changed.
"""

from __future__ import annotations

from textual import work
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.app.errors import error_text, lacks_pairs, one_line_errors
from minitx.tui.app.messages import ImportanceProgress, ImportanceReady

IMPORTANCE_SEQUENCES = 200  # fresh sequences per ablated head: 24 heads in well under a minute


class HeadRanking:
    @one_line_errors
    def action_importance(self) -> None:
        session = self.session
        if session.record is None or lacks_pairs(self, "ranking the heads"):
            return
        self.action_view("importance")
        if session.view_mode == "importance" and session.importance is None and not self._measuring():
            session.importance_progress = (0, 0)
            self._measure_importance(session.record)

    def _measuring(self) -> bool:
        return any(w.group == "importance" and w.is_running for w in self.workers)

    @work(thread=True, exclusive=True, group="importance", exit_on_error=False)
    def _measure_importance(self, record) -> None:
        from minitx.core.interp.importance import head_importance

        worker = get_current_worker()

        def progress(done: int, total: int) -> bool:
            self.post_message(ImportanceProgress(record, done, total))
            return worker.is_cancelled

        result = head_importance(record.model, record.task, n=IMPORTANCE_SEQUENCES, progress=progress)
        if not worker.is_cancelled:
            self.post_message(ImportanceReady(record, result))

    def ranking_failed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "importance" and event.state == WorkerState.ERROR:
            event.stop()  # not a failed load: say what failed, and leave the view that cannot fill
            error = event.worker.error
            self.session.importance_progress = (0, 0)
            if self.session.view_mode == "importance":
                self.action_view("importance")  # the same key again: back to the grid
            self.notify(f"cannot measure head importance: {error_text(error)}",
                        severity="error", markup=False, timeout=10)

    def on_importance_progress(self, message: ImportanceProgress) -> None:
        if message.record is self.session.record:
            self.session.importance_progress = (message.done, message.total)
            if self.session.view_mode == "importance":
                self.panel.redraw()

    def on_importance_ready(self, message: ImportanceReady) -> None:
        if message.record is self.session.record:
            self.session.importance = message.result
            self.refresh_view()
