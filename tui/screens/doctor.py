"""The doctor as a dialog: SPEC §7's checks on the model being explored, rows appearing as each
check finishes (the overfit check takes seconds), and the likely causes of failures at the end.
All numbers come from core.diagnostics; this file only lays them out."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from minitx.tui.colors import STATUS_MARKUP
from minitx.tui.messages import CheckDone, DoctorFinished


class DoctorScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,d", "dismiss", "close")]

    def __init__(self, record) -> None:
        super().__init__()
        self.record = record  # tui.loaded.LoadedModel
        self.finished = False

    def compose(self) -> ComposeResult:
        with Vertical(id="doctor-box", classes="dialog"):
            yield Label(f"checking [b]{self.record.name}[/b] …", id="doctor-status")
            yield DataTable(id="doctor-table", cursor_type="none", zebra_stripes=True)
            yield Static("", id="doctor-causes")
            yield Label("[dim]esc closes · the doctor decides from measurements only[/dim]")

    def on_mount(self) -> None:
        self.query_one("#doctor-box").border_title = "doctor"
        table = self.query_one(DataTable)
        table.add_columns("check", "measured", "threshold", "result")
        self.run_checks()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def run_checks(self) -> None:
        from minitx.core.diagnostics import diagnose, run_doctor

        try:
            results = run_doctor(self.record.model, self.record.task,
                                 callback=lambda r: self.post_message(CheckDone(r)))
            self.post_message(DoctorFinished(diagnose(results)))
        except Exception as e:  # any failure is a line in the dialog, never a traceback
            self.post_message(DoctorFinished([], f"{type(e).__name__}: {e}"))

    def on_check_done(self, message: CheckDone) -> None:
        from minitx.core.diagnostics import format_number

        r = message.result
        self.query_one(DataTable).add_row(r.name, format_number(r.value), r.threshold,
                                          STATUS_MARKUP[r.status])

    def on_doctor_finished(self, message: DoctorFinished) -> None:
        self.finished = True
        status = self.query_one("#doctor-status", Label)
        causes = self.query_one("#doctor-causes", Static)
        if message.error:
            status.update(f"[red]the doctor could not finish: {message.error}[/]")
        elif message.causes:
            status.update(f"[b]{self.record.name}[/b]: some checks failed")
            causes.update("\n".join(f"• likely cause — {c}" for c in message.causes))
        else:
            status.update(f"[b]{self.record.name}[/b]: every check that applies passed")
