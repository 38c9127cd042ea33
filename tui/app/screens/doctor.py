"""The doctor as a dialog: the checks of docs/checks.md on the model being explored (or on both of
Compare's), code checks and weight checks under their own headings, rows appearing as each check
finishes (the overfit check takes seconds), then each model's verdict and its likely causes with
the evidence behind them. Everything scrolls inside the dialog, so the footer with the keys stays
on screen at 80x24. All numbers and judgements come from core/doctor; this file lays them out."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from minitx.tui.app.errors import error_text
from minitx.tui.app.exports import EXPORT_BINDING
from minitx.tui.app.messages import CheckDone, DoctorFinished
from minitx.tui.render.colors import STATUS_MARKUP

FOOTER = "[dim]↑↓ PgUp PgDn scroll · esc closes · docs/checks.md explains the checks[/dim]"
KIND_TITLES = {
    "code": "code checks: does minitx's forward pass with this config have a bug?",
    "weights": "weight checks: were these weights trained under a bug?",
}
# The threshold column: 11 cells at 80 columns ("< 1e-05, and > 1e-03 with positions" wraps onto
# four lines), wider as the terminal is, up to 24 (two lines).
THRESHOLD_WIDTH, THRESHOLD_WIDEST = 11, 24
# Narrower than this, one model's notes leave their column (a word a line at 60) for a line of
# their own under each check.
NOTES_BESIDE = 80


class DoctorScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,d", "dismiss", "close"), EXPORT_BINDING]

    def __init__(self, records: list, labels: list[str] | None = None) -> None:
        super().__init__()
        self.records = records  # tui.loaded.LoadedModel, one or two
        self.labels = labels or [""] * len(records)  # "A", "B" in Compare
        self.results: list[dict] = [{} for _ in records]  # per model: check name -> CheckResult
        self.order: list[str] = []  # check names in the order they first arrived
        self.diagnoses: list = []
        self.error = ""
        self.finished = False

    @property
    def record(self):
        return self.records[0]

    def _title_of(self, i: int) -> str:
        return f"{self.labels[i]} {self.records[i].name}".strip()

    def compose(self) -> ComposeResult:
        from rich.markup import escape

        names = " and ".join(self._title_of(i) for i in range(len(self.records)))
        with Vertical(id="doctor-box", classes="dialog"):
            yield Static(f"checking [b]{escape(names)}[/b] …", id="doctor-status")
            with VerticalScroll(id="doctor-body"):
                yield Static("", id="doctor-report")
            yield Static(FOOTER, id="doctor-footer")

    def on_mount(self) -> None:
        self.query_one("#doctor-box").border_title = "doctor"
        self.query_one("#doctor-body").focus()  # the arrow and page keys scroll the report
        self.run_checks()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def run_checks(self) -> None:
        from minitx.core.doctor.diagnosis import diagnose_model, run_doctor
        from minitx.core.doctor.history_checks import RunRecord

        diagnoses = []
        try:
            for i, r in enumerate(self.records):
                run = RunRecord.of(r.history, r.run_summary)
                results = run_doctor(r.model, r.task, record=run,
                                     callback=lambda result, i=i: self.post_message(CheckDone(result, i)))
                diagnoses.append(diagnose_model(results, r.model, r.task, run))
            self.post_message(DoctorFinished(diagnoses))
        except Exception as e:  # any failure is a line in the dialog, never a traceback
            self.post_message(DoctorFinished(diagnoses, error_text(e)))

    def on_check_done(self, message: CheckDone) -> None:
        r = message.result
        self.results[message.index][r.name] = r
        if r.name not in self.order:
            self.order.append(r.name)
        self._refresh_report()

    def export_numbers(self):
        """The numbers beside the picture when E exports this dialog: each check done so far."""
        from minitx.tui.app.exports import doctor_numbers

        return doctor_numbers([self._title_of(i) for i in range(len(self.records))], self.results, self.order)

    def on_doctor_finished(self, message: DoctorFinished) -> None:
        from rich.markup import escape

        self.finished = True
        self.diagnoses, self.error = message.diagnoses, message.error
        if message.error:  # the whole reason goes in the report, which scrolls
            status = "[red]the doctor could not finish: why is under the checks[/]"
        else:
            status = " · ".join(f"[b]{escape(self._title_of(i))}[/b]: {self._short(d)}"
                                for i, d in enumerate(self.diagnoses))
        self.query_one("#doctor-status", Static).update(status)
        self._refresh_report()

    @staticmethod
    def _short(diagnosis) -> str:
        """The verdict in a few words, for the one status line (the full one is in the report)."""
        from minitx.core.doctor.diagnosis import NO_PROBLEMS

        if diagnosis.verdict == NO_PROBLEMS:
            return "[green]no problems found[/]"
        head = "fails its task" if diagnosis.fails_task else "some checks failed"
        found = len(diagnosis.causes)
        tail = f"{found} cause{'s' * (found != 1)} found" if found else "no single cause: see below"
        return f"[red]{head}[/] · {tail}"

    # -- the report -------------------------------------------------------------------------
    def _refresh_report(self) -> None:
        from rich.console import Group
        from rich.text import Text

        parts = [self._table(kind) for kind in KIND_TITLES if self._rows(kind)]
        if self.finished and self.error:
            parts += [Text(""), Text(f"✗ {self.error}", style="red")]
        elif self.finished:
            parts += self._verdicts()
        self.query_one("#doctor-report", Static).update(Group(*parts))

    def _rows(self, kind: str) -> list[str]:
        return [name for name in self.order
                if any(name in done and done[name].kind == kind for done in self.results)]

    def _table(self, kind: str):
        from rich.markup import escape
        from rich.table import Table

        from minitx.core.doctor.diagnosis import format_number

        two = len(self.records) > 1
        threshold = min(THRESHOLD_WIDEST, max(THRESHOLD_WIDTH, self.app.size.width - 76))
        if not two and self.app.size.width < NOTES_BESIDE:
            return self._notes_below(kind, threshold)
        table = Table(title=f"[b]{KIND_TITLES[kind]}[/b]", title_justify="left", box=None,
                      padding=(0, 1, 0, 0), expand=True, show_edge=False)
        if not two:
            table.add_column("", no_wrap=True, width=4)
        table.add_column("check", no_wrap=True)
        if two:
            table.add_column("threshold", max_width=threshold)
        for label in self.labels:
            table.add_column(f"{label} measured".strip(), justify="right", no_wrap=True)
            if two:
                table.add_column(label, no_wrap=True, width=4)
        if not two:
            table.add_column("threshold", max_width=threshold)
            table.add_column("note", ratio=1, style="dim")
        for name in self._rows(kind):
            done = [results.get(name) for results in self.results]
            any_one = next(r for r in done if r is not None)
            if two:
                cells = [name, escape(any_one.threshold)]
                for r in done:
                    cells += ["…", ""] if r is None else [format_number(r.value), STATUS_MARKUP[r.status]]
            else:
                r = any_one
                cells = [STATUS_MARKUP[r.status], name, format_number(r.value), escape(r.threshold),
                         escape(r.detail)]
            table.add_row(*cells)
        return table

    def _notes_below(self, kind: str, threshold: int):
        """One model's checks at a narrow width: each row, and its note on the lines under it
        (the columns keep one width from row to row, so the rows line up)."""
        from rich.console import Group
        from rich.markup import escape
        from rich.padding import Padding
        from rich.table import Table
        from rich.text import Text

        from minitx.core.doctor.diagnosis import format_number

        results = [self.results[0][name] for name in self._rows(kind)]
        values = [format_number(r.value) for r in results]
        name_width = max(len("check"), *(len(r.name) for r in results))
        value_width = max(len("measured"), *(len(v) for v in values))

        def row(*cells) -> Table:
            table = Table(box=None, padding=(0, 1, 0, 0), show_header=False, show_edge=False)
            table.add_column(no_wrap=True, width=4)
            table.add_column(no_wrap=True, width=name_width)
            table.add_column(justify="right", no_wrap=True, width=value_width)
            table.add_column(width=threshold)
            table.add_row(*cells)
            return table

        parts = [Text.from_markup(f"[b]{KIND_TITLES[kind]}[/b]"), row("", "[b]check[/b]", "[b]measured[/b]",
                                                                      "[b]threshold[/b]")]
        for r, value in zip(results, values):
            parts.append(row(STATUS_MARKUP[r.status], r.name, value, escape(r.threshold)))
            if r.detail:
                parts.append(Padding(Text(r.detail, style="dim"), (0, 0, 0, 5)))
        return Group(*parts)

    def _verdicts(self) -> list:
        from rich.markup import escape
        from rich.padding import Padding
        from rich.table import Table
        from rich.text import Text

        from minitx.core.data.imported_task import NO_PAIRS
        from minitx.tui.app.errors import PAIRS_KEY_HINT

        lines = []
        without = [self._title_of(i) for i, r in enumerate(self.records) if not r.task.has_examples]
        if without:  # once: how to run the checks that need examples
            lines += [Text(""), Text(f"{' and '.join(without)}: the checks of its weights need examples: "
                                     f"{NO_PAIRS}; {PAIRS_KEY_HINT}", style="yellow")]
        for i, d in enumerate(self.diagnoses):
            lines.append(Text(""))
            lines.append(Text.from_markup(f"[b]{escape(self._title_of(i))}[/b]: {escape(d.verdict)}"))
            if d.causes:
                lines.append(Text.from_markup("[b]likely cause[/b], most specific first:"))
            elif d.suspects:
                lines.append(Text.from_markup("[b]likely causes, in order[/b]:"))
            for n, text in enumerate(d.likely, 1):
                item = Table.grid(padding=(0, 1, 0, 0))  # a hanging indent: "1." beside its text
                item.add_column(no_wrap=True)
                item.add_column(ratio=1)
                item.add_row(f"{n}.", Text(text))
                for e in d.causes[n - 1].evidence if d.causes else ():
                    item.add_row("", Text(f"{e.kind}: {e.check}: {e.figure}", style="dim"))
                lines.append(Padding(item, (0, 0, 0, 1)))
        return lines
