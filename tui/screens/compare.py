"""Compare: two checkpoints on one source, stepping in lockstep, their grids side by side.

A third grid shows |A−B| for each cell of the chosen layer and head, and marks the rows where
the two models produced different tokens. The summary below comes from checkpoints.compare
(computed in a thread worker: it decodes a few hundred fresh sequences with both models).
Numbers come from core and checkpoints; this screen only keeps view state and draws.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Label, Static
from textual.worker import get_current_worker

from minitx.tui.screens.dialogs import OpenCheckpointScreen
from minitx.tui.screens.explore import DEFAULT_SOURCE, SourceInput
from minitx.tui.screens.shared import (
    SOURCE_BINDINGS,
    STEP_BINDINGS,
    TitleBar,
    best_head,
    describe_model,
    one_line_errors,
)
from minitx.tui.widgets.attention import AttentionGrid
from minitx.tui.widgets.keybar import KeyBar

SUMMARY_SEQUENCES = 200  # fresh sequences both models decode for the summary (a few seconds)


def _short(token: str) -> str:
    return (token.strip("<>") if len(token) > 3 else token)[:3]  # <eos> -> eos


def _diff_colour(value: float) -> str:
    """0 -> near black (same), 1 -> bright red (as different as attention can be)."""
    v = 0.0 if value != value else min(1.0, max(0.0, value))
    dark, hot = (28, 28, 36), (255, 70, 50)
    r, g, b = (round(d + (h - d) * v) for d, h in zip(dark, hot))
    return f"#{r:02x}{g:02x}{b:02x}"


def difference(rows_a: list[list[float]], rows_b: list[list[float]]) -> list[list[float] | None]:
    """|a−b| per cell of two already-computed grids (rows only one side has: None)."""
    out: list[list[float] | None] = []
    for i in range(max(len(rows_a), len(rows_b))):
        if i < len(rows_a) and i < len(rows_b):
            out.append([abs(x - y) for x, y in zip(rows_a[i], rows_b[i])])
        else:
            out.append(None)
    return out


class DiffGrid(Widget):
    """|A−B| per cell; each row labelled 'tokenA=tokenB' or 'tokenA≠tokenB' (≠ in red)."""

    DEFAULT_CSS = "DiffGrid { height: auto; width: 100%; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[list[float] | None] = []
        self.tokens: list[tuple[str, str]] = []
        self.columns: list[str] = []
        self.cell = 2  # characters per cell; 3 prints the numbers

    def show(self, rows, tokens, columns, cell=2) -> None:
        self.rows, self.tokens, self.columns, self.cell = rows, tokens, columns, cell
        self.refresh(layout=True)

    def render(self):
        from rich.style import Style
        from rich.text import Text

        cell = self.cell
        header = Text(" " * 7)
        for column in self.columns:
            header.append(_short(column)[:cell].center(cell), style="bold")
        lines = [header]
        for row, (a, b) in zip(self.rows, self.tokens):
            same = a == b
            line = Text(f"{_short(a):>3}")
            line.append("=" if same else "≠", style="dim" if same else "bold red")
            line.append(f"{_short(b):<3}")
            for value in row or [None] * len(self.columns):
                if value is None:
                    line.append("·".center(cell), style="dim")
                    continue
                label = (f"{value:.2f}"[1:] if value < 0.995 else "1.0") if cell == 3 else ""
                line.append(label.center(cell), Style(bgcolor=_diff_colour(value), color="#ffffff"))
            lines.append(line)
        if not self.rows:
            lines.append(Text("step (→) to compare", style="italic dim"))
        lines.append(Text())
        key = Text("0 ", style="dim")
        for i in range(4):
            key.append("  ", Style(bgcolor=_diff_colour(i / 3)))
        key.append(" 1", style="dim")
        lines.append(key)
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        return text


class CompareTitle(TitleBar):
    """The title bar with a Compare tab after Explore and Train."""

    def compose(self) -> ComposeResult:
        yield Label(" [b]minitx[/b]  loading…", id="title-info")
        tabs = "[@click=app.switch_mode('explore')]Explore[/]  " \
               "[@click=app.switch_mode('train')]Train[/]  [reverse b] Compare [/]"
        yield Label(tabs + " ", id="title-tabs")


class PickCheckpointScreen(OpenCheckpointScreen):
    """The open dialog, titled with the side it fills."""

    def __init__(self, side: str) -> None:
        super().__init__()
        self.side = side

    def on_mount(self) -> None:
        self.call_after_refresh(self._retitle)

    def _retitle(self) -> None:
        self.query_one("#open-box").border_title = f"compare: choose model {self.side}"


class CompareScreen(Screen):
    AUTO_FOCUS = ""  # start on the step keys; i or / edits the source
    DEFAULT_CSS = """
    CompareScreen #cmp-source-row { height: 1; }
    CompareScreen #cmp-source-label { width: auto; text-style: bold; }
    CompareScreen #cmp-source { width: 1fr; }
    CompareScreen #cmp-selection { width: auto; padding: 0 1; color: $accent; }
    CompareScreen #cmp-source-error { color: $error; height: 1; padding: 0 1; }
    CompareScreen #cmp-output { height: 2; padding: 0 1; }
    CompareScreen #cmp-grids { height: 1fr; }
    CompareScreen .cmp-panel { width: 1fr; border: round $primary; padding: 0 0 0 1;
                               scrollbar-size-vertical: 1; }
    CompareScreen #cmp-panel-diff { width: 16; max-width: 40%; }
    CompareScreen #cmp-summary-panel { height: 7; border: round $primary; padding: 0 1; }
    CompareScreen #cmp-summary { width: 100%; text-wrap: nowrap; text-overflow: clip; }
    """
    BINDINGS = [
        *STEP_BINDINGS,
        *SOURCE_BINDINGS,
        Binding("1", "pick('A')", "open A/B"),
        Binding("2", "pick('B')", "open A/B"),
        Binding("e", "app.switch_mode('explore')", "explore"),
        Binding("t", "app.switch_mode('train')", "train"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.models: dict[str, object] = {}  # "A"/"B" -> LoadedModel
        self.names = ("", "")  # what is loaded (or loading) as A and B
        self.steppers: dict[str, object] = {}  # "A"/"B" -> core.decode.Stepper
        self.position = 0  # the shared step: each stepper shows min(position, its length)
        self.layer_index = self.head_index = 0
        self.show_numbers = False
        self.source_error = ""
        self.comparison = None  # checkpoints.compare.Comparison once the worker is done
        self.summary_loading = False

    def compose(self) -> ComposeResult:
        yield CompareTitle("Compare")
        with Horizontal(id="cmp-source-row"):
            yield Label("Source ▸ ", id="cmp-source-label")
            yield SourceInput(DEFAULT_SOURCE, id="cmp-source", compact=True,
                              placeholder="digits, e.g. 3 1 4 1 5 (Enter)")
            yield Label("", id="cmp-selection")
        yield Static("", id="cmp-source-error", markup=False)
        yield Static("", id="cmp-output", markup=False)
        with Horizontal(id="cmp-grids"):
            for side in ("a", "b"):
                with VerticalScroll(id=f"cmp-panel-{side}", classes="cmp-panel", can_focus=False):
                    yield AttentionGrid(id=f"grid-{side}")
            with VerticalScroll(id="cmp-panel-diff", classes="cmp-panel", can_focus=False):
                yield DiffGrid(id="diff")
        with Vertical(id="cmp-summary-panel"):
            yield Static("", id="cmp-summary")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#cmp-panel-diff").border_title = "|A−B|"
        self.query_one("#cmp-summary-panel").border_title = "summary"
        self.query_one("#cmp-source-error").display = False
        app = self.app
        if app.compare_with:
            # After the first frame: importing torch holds the GIL for a while.
            self.call_after_refresh(self.load_pair, app.initial, app.compare_with)
        else:  # reached with c: compare the model being explored with one the user picks
            current = app.current if app.current is not None and app.current.path else None
            self.names = (current.path if current else app.initial, "")
            self._set_status(f"A is {current.name if current else app.initial}: "
                             "press 2 to choose model B")
            self.action_pick("B")

    # -- loading ---------------------------------------------------------------------------
    def load_pair(self, a: str, b: str) -> None:
        self.names = (a, b)
        self.query_one("#cmp-grids").loading = True
        self.summary_loading = True
        self.query_one("#cmp-summary-panel").loading = True
        self._set_status(f"loading {a} and {b}…")
        self._load(a, b)

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def _load(self, a: str, b: str) -> None:
        from minitx import checkpoints
        from minitx.core.checkpoint import CheckpointError
        from minitx.core.compare import compare_loaded

        worker = get_current_worker()
        loaded = {}
        for side, name in (("A", a), ("B", b)):
            try:
                path = checkpoints.resolve(name)
                ckpt = checkpoints.load(path)
            except CheckpointError as e:
                self.app.call_from_thread(self._load_failed, name, str(e))
                return
            shown = path.stem if str(path).startswith(str(checkpoints.BUNDLED_DIR)) else path.name
            loaded[side] = (ckpt, describe_model(ckpt.model, ckpt.task, shown, str(path)))
        if worker.is_cancelled:
            return
        self.app.call_from_thread(self._models_ready, loaded["A"][1], loaded["B"][1])
        names = (loaded["A"][1].name, loaded["B"][1].name)
        result = compare_loaded(loaded["A"][0], loaded["B"][0], n=SUMMARY_SEQUENCES, names=names)
        if not worker.is_cancelled:
            self.app.call_from_thread(self._summary_ready, result)

    def on_worker_state_changed(self, event) -> None:
        from textual.worker import WorkerState

        if event.worker.group == "compare" and event.state == WorkerState.ERROR:
            error = event.worker.error
            self._load_failed(" and ".join(n for n in self.names if n),
                              f"{type(error).__name__}: {error}")

    def _load_failed(self, name: str, error: str) -> None:
        self.query_one("#cmp-grids").loading = False
        self.query_one("#cmp-summary-panel").loading = False
        self.summary_loading = False
        if self.models:  # nothing lost: the pair on screen stays
            self.names = (self.models["A"].path, self.models["B"].path)
            kept = f"; still comparing {self.models['A'].name} and {self.models['B'].name}"
            self._set_status(self._pair_title())
            self._draw_summary()
        else:
            kept = ""
            self._set_status(f"cannot open {name}: {error} — press 1 or 2 to choose A or B")
        self.notify(f"cannot open {name}: {error}{kept}", severity="error", markup=False, timeout=10)

    def _models_ready(self, a, b) -> None:
        self.models = {"A": a, "B": b}
        self.comparison = None
        self.query_one("#cmp-grids").loading = False
        self._set_status(self._pair_title())
        layer, head = best_head(a.scores)  # A's working head, within what both models have
        layers, heads = self._shape()
        self.layer_index, self.head_index = min(layer, layers - 1), min(head, heads - 1)
        source = self.query_one("#cmp-source", Input)
        if not self.set_source(source.value):
            source.value = DEFAULT_SOURCE
            self.set_source(DEFAULT_SOURCE)
        self.action_run()  # the whole decode of both at first sight

    def _summary_ready(self, comparison) -> None:
        self.comparison, self.summary_loading = comparison, False
        self.query_one("#cmp-summary-panel").loading = False
        self._draw_summary()

    def _pair_title(self) -> str:
        a, b = self.models["A"], self.models["B"]
        return f"A {a.name} · B {b.name}"

    def _set_status(self, text: str) -> None:
        self.query_one(CompareTitle).set_info(text)
        if not self.models:  # nothing to draw yet: say what is happening where the output goes
            self.query_one("#cmp-output", Static).update(text)

    @one_line_errors
    def action_pick(self, side: str) -> None:
        if isinstance(self.app.screen, OpenCheckpointScreen):
            return

        def chosen(name: str | None) -> None:
            if not name:
                return
            a, b = self.names
            a, b = (name, b) if side == "A" else (a, name)
            if a and b:
                self.load_pair(a, b)
            else:
                self.names = (a, b)
                self._set_status("press 2 to choose model B" if a else "press 1 to choose model A")

        self.app.push_screen(PickCheckpointScreen(side), chosen)

    # -- source and stepping -----------------------------------------------------------------
    @one_line_errors
    def set_source(self, text: str) -> bool:
        """Parse `text` once for both models; an unusable source is an inline message."""
        from minitx.core.decode import Stepper
        from minitx.core.tasks import TaskInputError

        if not self.models:
            return False
        a, b = self.models["A"], self.models["B"]
        longest = min(a.model.cfg.max_len, b.model.cfg.max_len) - 2
        try:
            ids = a.task.parse(text, max_len=longest)
        except TaskInputError as e:
            self.source_error = str(e)
        else:
            self.source_error = ""
            self.steppers = {side: Stepper(m.model, ids, top_k=5) for side, m in self.models.items()}
            self.position = 0
        self.refresh_view()
        return not self.source_error

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.set_source(event.value):
            self.set_focus(None)

    def action_edit_source(self) -> None:
        self.query_one("#cmp-source", Input).focus()

    def action_leave_source(self) -> None:
        self.set_focus(None)

    def _sync(self) -> None:
        """Move both steppers to the shared position (a finished one stays at its end)."""
        for s in self.steppers.values():
            while s.position > self.position:
                s.back()
            while s.position < self.position and s.step() is not None:
                pass
        self.refresh_view()

    @one_line_errors
    def action_step(self) -> None:
        if self.steppers and not all(s.finished for s in self.steppers.values()):
            self.position += 1
            self._sync()

    @one_line_errors
    def action_back(self) -> None:
        if self.steppers:
            self.position = max(0, max(s.position for s in self.steppers.values()) - 1)
            self._sync()

    @one_line_errors
    def action_run(self) -> None:
        if self.steppers:
            for s in self.steppers.values():
                s.run()
            self.position = max(s.position for s in self.steppers.values())
            self._sync()

    @one_line_errors
    def action_reset(self) -> None:
        if self.steppers:
            self.position = 0
            self._sync()

    @one_line_errors
    def action_layer(self, delta: int) -> None:
        if self.models:
            self.layer_index = (self.layer_index + delta) % self._shape()[0]
            self.refresh_view()

    @one_line_errors
    def action_head(self, delta: int) -> None:
        if self.models:
            self.head_index = (self.head_index + delta) % self._shape()[1]
            self.refresh_view()

    @one_line_errors
    def action_numbers(self) -> None:
        self.show_numbers = not self.show_numbers
        self.refresh_view()

    def _shape(self) -> tuple[int, int]:
        """Layers and heads both models have (the keys only reach heads that exist in both)."""
        a, b = self.models["A"], self.models["B"]
        return min(a.layers, b.layers), min(a.heads, b.heads)

    # -- drawing -----------------------------------------------------------------------------
    def refresh_view(self) -> None:
        error = self.query_one("#cmp-source-error", Static)
        error.update(f"✗ {self.source_error}" if self.source_error else "")
        error.display = bool(self.source_error)
        if not self.models:
            return
        layers, heads = self._shape()
        self.query_one("#cmp-selection", Label).update(
            f"step {self.position} · layer {self.layer_index + 1}/{layers}"
            f" · head {self.head_index + 1}/{heads}")
        self._draw_summary()
        if not self.steppers:
            return
        self._draw_output()
        self._draw_grids()

    def _draw_output(self) -> None:
        from minitx.core.tasks import Task

        width = max(len(m.name) for m in self.models.values())
        lines = []
        for side, m in self.models.items():
            s = self.steppers[side]
            shown = " ".join(r.text for r in s.results[: s.position]) or "·"
            line = f"{side} {m.name:<{width}}  {shown}"
            if s.finished:
                expected = Task.format(m.task.expected_output(s.src_ids))
                right = Task.format(s.tokens) == expected
                line += "  ✓" if right else f"  ✗ expected {expected}"
            lines.append(line)
        self.query_one("#cmp-output", Static).update("\n".join(lines))

    def _draw_grids(self) -> None:
        columns = [str(i) for i in next(iter(self.steppers.values())).src_ids]
        where = f"L{self.layer_index + 1} H{self.head_index + 1}"
        rows, tokens = {}, {}
        for side, m in self.models.items():
            s = self.steppers[side]
            rows[side] = s.cross_attention_grid(self.layer_index, self.head_index).tolist()
            tokens[side] = [r.text for r in s.results[: s.position]]
            grid = self.query_one(f"#grid-{side.lower()}", AttentionGrid)
            grid.numbers = self.show_numbers
            current = s.position - 1 if s.position and s.position == self.position else None
            hint = "" if self.position else "press → (or n) to step both"
            grid.show(rows[side], columns, tokens[side], current, hint)
            self.query_one(f"#cmp-panel-{side.lower()}").border_title = f"{side} {m.name} · {where}"
        n = max(len(tokens["A"]), len(tokens["B"]))
        pairs = [(tokens["A"][i] if i < len(tokens["A"]) else "",
                  tokens["B"][i] if i < len(tokens["B"]) else "") for i in range(n)]
        cell = self._diff_cell(len(columns))
        panel = self.query_one("#cmp-panel-diff")
        panel.display = cell > 0
        if cell:
            panel.styles.width = max(16, 11 + cell * len(columns))  # label 7, edges, scrollbar
            self.query_one("#diff", DiffGrid).show(difference(rows["A"], rows["B"]), pairs,
                                                   columns, cell)

    def _diff_cell(self, columns: int) -> int:
        """Characters per |A−B| cell: A's and B's grids get room first (label, three characters
        a cell, border); the difference shrinks to one character a cell, or hides."""
        spare = self.size.width - 2 * (10 + 3 * columns)
        for cell in (3 if self.show_numbers else 2, 1):
            if 11 + cell * columns <= spare:
                return cell
        return 0

    def on_resize(self) -> None:
        if self.steppers:
            self.call_after_refresh(self.refresh_view)

    def _draw_summary(self) -> None:
        from rich.text import Text

        summary = self.query_one("#cmp-summary", Static)
        c = self.comparison
        if c is None:
            note = f"decoding {SUMMARY_SEQUENCES} fresh sequences with both models…" \
                if self.summary_loading else "no summary"
            summary.update(Text(note, style="italic dim"))
            return
        layer, head = self.layer_index, self.head_index
        where = f"L{layer + 1} H{head + 1}"
        lines = [Text.assemble((f"{'':<18}", ""), (f"A {c.a.name}"[:24].ljust(26), "bold"),
                               (f"B {c.b.name}"[:24], "bold"))]

        def pct(v: float) -> tuple[str, str]:
            return (f"{v:.1%}".ljust(26), "green" if v >= 0.9 else "red" if v < 0.5 else "yellow")

        lines.append(Text.assemble(f"{'exact match':<18}", pct(c.a.accuracy), pct(c.b.accuracy)))

        def align(r) -> str:
            score = r.alignment[layer][head] if layer < len(r.alignment) else float("nan")
            bl, bh, bs = r.best_head
            return f"{score:.2f} (best L{bl + 1} H{bh + 1} {bs:.2f})"

        lines.append(Text.assemble(f"{'alignment ' + where:<18}", align(c.a).ljust(26), align(c.b)))
        differs = [(f.split(".")[-1], x, y) for f, x, y in c.config_diff
                   if f not in ("training.loss", "training.accuracy")][:3]  # those are above

        def values(i: int) -> str:
            return " · ".join("–" if d[i] in ("", None) else str(d[i]) for d in differs)[:25]

        if differs:
            lines.append(Text.assemble(" · ".join(d[0] for d in differs)[:17].ljust(18),
                                       (values(1).ljust(26), "bold"), (values(2), "bold")))
        else:
            lines.append(Text("same model config, task and training summary", style="dim"))
        lines.append(Text(f"same output on {c.agreement:.1%} of {c.n} fresh sequences · "
                          (f"weights ‖A−B‖/‖A‖ {c.weight_distance:.3f}" if c.weight_distance is not None
                           else f"weights: shapes differ ({c.weights_compared} match)"), style="dim"))
        text = Text("\n").join(lines)
        text.no_wrap, text.overflow = True, "crop"
        summary.update(text)
