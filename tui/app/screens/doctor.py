"""The doctor as a dialog: the model checks of docs/checks.md on the model being explored (or on
both of Compare's), rows appearing as each check finishes (the overfit check takes seconds),
and the likely causes of failures at the end. All numbers come from core.diagnostics; this
file only lays them out."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from minitx.tui.app.exports import EXPORT_BINDING
from minitx.tui.app.messages import CheckDone, DoctorFinished
from minitx.tui.render.colors import STATUS_MARKUP


class DoctorScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,d", "dismiss", "close"), EXPORT_BINDING]

    def __init__(self, records: list, labels: list[str] | None = None) -> None:
        super().__init__()
        self.records = records  # tui.loaded.LoadedModel, one or two
        self.labels = labels or [""] * len(records)  # "A", "B" in Compare
        self.finished = False

    @property
    def record(self):
        return self.records[0]

    def _names(self) -> str:
        return " and ".join(f"{label} {r.name}".strip() for label, r in zip(self.labels, self.records))

    def compose(self) -> ComposeResult:
        from rich.markup import escape

        with Vertical(id="doctor-box", classes="dialog"):
            yield Static(f"checking [b]{escape(self._names())}[/b] …", id="doctor-status")
            yield DataTable(id="doctor-table", cursor_type="none", zebra_stripes=True)
            yield Static("", id="doctor-causes", markup=False)
            yield Static("[dim]esc closes · measurements decide · docs/checks.md explains the checks[/dim]")

    def on_mount(self) -> None:
        self.query_one("#doctor-box").border_title = "doctor"
        table = self.query_one(DataTable)
        if len(self.records) == 1:
            table.add_column("check", key="check")
            table.add_column("measured", key="measured-0")
            table.add_column("threshold", key="threshold")
            table.add_column("result", key="result-0")
        else:
            table.add_column("check", key="check")
            table.add_column("threshold", key="threshold")
            for i, label in enumerate(self.labels):
                table.add_column(f"{label} measured", key=f"measured-{i}")
                table.add_column(label, key=f"result-{i}")
        self.run_checks()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def run_checks(self) -> None:
        from minitx.core.doctor.diagnosis import diagnose, run_doctor

        causes = []
        try:
            for i, record in enumerate(self.records):
                results = run_doctor(record.model, record.task,
                                     callback=lambda r, i=i: self.post_message(CheckDone(r, i)))
                causes.append(diagnose(results))
            self.post_message(DoctorFinished(causes))
        except Exception as e:  # any failure is a line in the dialog, never a traceback
            self.post_message(DoctorFinished(causes, f"{type(e).__name__}: {e}"))

    def on_check_done(self, message: CheckDone) -> None:
        from minitx.core.doctor.diagnosis import format_number

        r, i, table = message.result, message.index, self.query_one(DataTable)
        if r.name not in table.rows:
            cells = {"check": r.name, "threshold": r.threshold}
            table.add_row(*(cells.get(str(c.key.value), "") for c in table.columns.values()), key=r.name)
        table.update_cell(r.name, f"measured-{i}", format_number(r.value), update_width=True)
        table.update_cell(r.name, f"result-{i}", STATUS_MARKUP[r.status], update_width=True)

    def export_numbers(self):
        """The numbers beside the picture when E exports this dialog: the table of checks."""
        from minitx.tui.app.exports import table_numbers

        return table_numbers(self.query_one(DataTable), "doctor")

    def on_doctor_finished(self, message: DoctorFinished) -> None:
        from rich.markup import escape

        self.finished = True
        status = self.query_one("#doctor-status", Static)
        causes = self.query_one("#doctor-causes", Static)
        verdicts, lines = [], []
        for label, record, found in zip(self.labels, self.records, message.causes):
            name = escape(f"{label} {record.name}".strip())
            verdicts.append(f"[b]{name}[/b]: " + ("some checks failed" if found
                                                   else "every check that applies passed"))
            lines += [f"• {f'{label}: ' if label else ''}likely cause — {c}" for c in found]
        if message.error:
            status.update(f"[red]the doctor could not finish: {escape(message.error)}[/]")
        else:
            status.update(" · ".join(verdicts))
        causes.update("\n".join(lines))
