"""Compare: two checkpoints on one source, stepping in lockstep, their grids side by side.

Two decode panels (tui/app/widgets/decode_panel.py) driven by the shared decoding keys; a third
grid shows |A−B| for each cell of the chosen layer and head and marks the rows where the two
models produced different tokens. The summary below comes from core.compare (computed in a
thread worker: it decodes a few hundred fresh sequences with both models). v swaps the grids
for A's and B's training curves overlaid (A always in the first run colour, B in the second).
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.app.attribution_keys import ATTRIBUTION_BINDINGS
from minitx.tui.app.change_keys import CHANGES_BINDING, ChangeKeys
from minitx.tui.app.chart_keys import CHART_ACTIONS, CHART_BINDINGS, ChartKeys
from minitx.tui.app.decode_keys import (
    CLOSE_BINDING,
    DECODE_BINDINGS,
    SOURCE_BINDINGS,
    DecodeKeys,
)
from minitx.tui.app.errors import error_text, one_line_errors
from minitx.tui.app.loaded import no_history_of, open_error
from minitx.tui.app.messages import PairFailed, PairLoaded, SummaryReady
from minitx.tui.app.widgets.compare_summary import CompareSummary
from minitx.tui.app.widgets.curve_chart import CurveChart
from minitx.tui.app.widgets.decode_panel import DecodePanel
from minitx.tui.app.widgets.diffgrid import DiffGrid, show_difference
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.app.widgets.output_line import OutputLine, token_line
from minitx.tui.app.widgets.source_bar import SourceBar
from minitx.tui.app.widgets.titlebar import TitleBar

SUMMARY_SEQUENCES = 200  # fresh sequences both models decode for the summary (a few seconds)
SIDES = ("A", "B")
SUMMARY_NAME = 32  # characters of B's name in the summary's header (80 columns)
VIEW_BINDINGS = [  # Explore's, on both panels; in the help (the footer keeps to two lines at 80x24)
    Binding("s", "kind", "attn", show=False, tooltip="attention: cross → decoder self → encoder self"),
    Binding("a", "view('heads')", "heads", show=False, tooltip="every head of that kind, in both models"),
    *(Binding(b.key, b.action, b.description, show=False, tooltip=tip) for b, tip in zip(
        ATTRIBUTION_BINDINGS, ("attribution rows, both models (again: method)",
                               "every step's, beside the head"))),
]


class CompareScreen(ChangeKeys, ChartKeys, DecodeKeys, Screen):
    HELP_TITLE = "Compare"
    HELP_NOTE = ("Two models on one source, in step: Explore's keys drive both; k K change B,\n"
                 "so with B = A's model it reads \"A without those heads\". Third grid: |A−B|.")
    AUTO_FOCUS = ""  # start on the step keys; i or / edits the source
    BINDINGS = [
        CLOSE_BINDING,
        *DECODE_BINDINGS,
        *VIEW_BINDINGS,
        *SOURCE_BINDINGS,
        # DecodeKeys' knock-out keys, on B (off while the curves show: k is then the chart's)
        Binding("k", "ablate", "ablate", tooltip="knock B's selected head out (again: back in)"),
        Binding("K", "clear_ablations", "restore", tooltip="restore every head of B"),
        Binding("d", "doctor", "doctor", tooltip="the doctor on both models"),
        Binding("v", "toggle_curves", "curves", tooltip="their training curves overlaid"),
        CHANGES_BINDING,
        *CHART_BINDINGS,
        Binding("1", "pick('A')", "open A/B", tooltip="open model A / B"),
        Binding("2", "pick('B')", "open A/B", tooltip="open model A / B"),
        Binding("e", "app.switch_mode('explore')", "explore", tooltip="Explore"),
        # In the help: the footer keeps to two lines at 80x24 (the title's tabs switch too).
        Binding("t", "app.switch_mode('train')", "train", show=False, tooltip="Train"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.names = ("", "")  # what is loaded (or loading) as A and B: names, paths or LoadedModels
        self.comparison = None  # core.compare.Comparison once the worker is done
        self.summary_loading = False
        self.from_command_line = False  # the pair `minitx-tui A B` named: it must open
        self.checkpoints: tuple = ()  # the core Checkpoints of A and B, to measure them again
        self._panels: dict[str, DecodePanel] = {}  # found once: every key's check asks for them

    def compose(self) -> ComposeResult:
        yield TitleBar("Compare")
        yield SourceBar()
        yield OutputLine(id="pair-output")
        with Horizontal(id="pair-grids"):
            for side in SIDES:
                yield DecodePanel(id=f"panel-{side.lower()}", label=side, side=False, output=False,
                                  step_hint="press → (or n) to step both")
            with VerticalScroll(id="diff-box", can_focus=False):
                yield DiffGrid(id="diff")
        with Vertical(id="pair-curves"):
            yield CurveChart(id="compare-curves")
        with Vertical(id="summary-box"):
            yield CompareSummary(id="summary")
        yield KeyBar()

    @property
    def panels(self) -> dict[str, DecodePanel]:
        if not self._panels:  # a query of the DOM each time made the footer's checks slow
            self._panels = {side: self.query_one(f"#panel-{side.lower()}", DecodePanel) for side in SIDES}
        return self._panels

    @property
    def models(self) -> dict:
        """'A'/'B' -> the LoadedModel on that side (empty until both are loaded, or once the
        screen's widgets are gone: the footer asks as the app closes)."""
        if not self._panels and not self.query(DecodePanel):
            return {}
        panels = self.panels
        if any(not p.is_attached or p.session.record is None for p in panels.values()):
            return {}
        return {side: p.session.record for side, p in panels.items()}

    @property
    def steppers(self) -> dict:
        panels = self.panels
        return {side: p.session.stepper for side, p in panels.items() if p.session.stepper is not None}

    def decode_panels(self) -> list[DecodePanel]:
        return list(self.panels.values()) if self.models else []

    def charts_shown(self) -> bool:
        return self.query_one("#pair-curves").display

    def why_not(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action in CHART_ACTIONS:
            return self.chart_why_not(parameters)
        if action == "close_view" and self.charts_shown():
            return None  # esc leaves the curves too
        if (why := self.changes_why_not(action)) is not None:
            return why
        if action == "toggle_curves":  # neither file recorded curves: nothing to overlay
            if self.charts_shown() or any(m.history is not None for m in self.models.values()):
                return None
            return (f"neither A nor B recorded training curves ({no_history_of(self.models)})"
                    if self.models else "no models yet: 1 and 2 choose A and B")
        decoding = {b.action.split("(")[0] for b in (*DECODE_BINDINGS, *SOURCE_BINDINGS, *VIEW_BINDINGS)}
        if self.charts_shown() and action in decoding | {"ablate", "clear_ablations"}:
            return "the curves are shown: v goes back to the grids"
        return self.decode_why_not(action, parameters)  # DecodeKeys: < > only while cropped, # ...

    def action_close_view(self) -> None:
        if self.charts_shown():
            self.action_toggle_curves()
        else:
            super().action_close_view()

    @one_line_errors
    def action_toggle_curves(self) -> None:
        shown = not self.charts_shown()
        self.query_one("#pair-curves").display = shown
        self.query_one("#pair-grids").display = not shown
        self.refresh_bindings()

    def export_numbers(self):
        """The numbers beside the picture when E exports this screen (tui/app/exports.py): A's
        and B's curves, or their grids, |A−B| and the summary."""
        from minitx.tui.app.exports import curves_numbers, pair_numbers

        if self.charts_shown():
            return curves_numbers(self.curve_chart(), "compare")
        if not self.models:
            return None
        return pair_numbers({side: p.session for side, p in self.panels.items()}, self.comparison,
                            self.position)

    def _show_curves(self, a, b) -> None:
        """A's and B's histories, overlaid: A in the first colour, B in the second, always."""
        note = f"neither A nor B recorded curves ({no_history_of({'A': a, 'B': b})})"
        self.curve_chart().show_runs([(f"A {a.name}", a.history), (f"B {b.name}", b.history)], note=note)
        self.describe_chart()

    def on_mount(self) -> None:
        self.query_one("#pair-curves").display = False
        self.describe_chart()
        self.query_one("#diff-box").border_title = "|A−B|"
        self.query_one("#summary-box").border_title = "summary"
        app = self.app
        if app.compare_with:
            self.from_command_line = True
            # After the first frame: importing torch holds the GIL for a while.
            self.call_after_refresh(self.load_pair, app.initial, app.compare_with)
        else:
            self.on_screen_resume()

    def on_screen_resume(self) -> None:
        """Reached with c: A is the model being explored (a run never saved too); B stays if
        chosen, else the user picks it."""
        a, self.app.compare_a = self.app.compare_a, None
        if a is None or (self.models and self.models["A"] is a):
            return
        if self.names[1]:
            self.load_pair(a, self.names[1])
            return
        self.names = (a, "")
        self._set_status(f"A is {a.name}: press 2 to choose model B")
        self.action_pick("B")

    # -- loading ---------------------------------------------------------------------------------
    def load_pair(self, a, b) -> None:
        """a, b: names or paths to load, or models already on screen (LoadedModel)."""
        self.names = (a, b)
        self.query_one("#pair-grids").loading = True
        self.summary_loading = True
        self.query_one("#summary-box").loading = True
        self._set_status(f"loading {_named(a)} and {_named(b)}…")
        self._load(a, b)

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def _load(self, a, b) -> None:
        from minitx.core.checkpoint import CheckpointError
        from minitx.core.compare import check_comparable, compare_loaded, sharing_pairs
        from minitx.tui.app.loaded import load_either

        worker = get_current_worker()
        loaded = {}
        for side, name in zip(SIDES, (a, b)):
            try:
                loaded[side] = load_either(name)
            except CheckpointError as e:
                self.post_message(PairFailed(_named(name), str(e)))
                return
        if worker.is_cancelled:
            return
        (ckpt_a, record_a), (ckpt_b, record_b) = loaded["A"], loaded["B"]
        ckpt_a, ckpt_b = sharing_pairs(ckpt_a, ckpt_b)  # a base folder measured on its fine-tune's pairs
        try:  # the same ids must mean the same tokens to both, or one source means two things
            check_comparable(ckpt_a, ckpt_b)
        except ValueError as e:
            self.post_message(PairFailed(f"{_named(a)} and {_named(b)}", str(e)))
            return
        self.post_message(PairLoaded(record_a, record_b, (ckpt_a, ckpt_b)))
        result = compare_loaded(ckpt_a, ckpt_b, n=SUMMARY_SEQUENCES, names=(record_a.name, record_b.name))
        if not worker.is_cancelled:
            self.post_message(SummaryReady(result))

    @work(thread=True, exclusive=True, group="measure", exit_on_error=False)
    def _measure(self, checkpoints: tuple, ablated_b: frozenset, names: tuple[str, str]) -> None:
        """The summary again, with B's heads knocked out (in this thread only)."""
        from minitx.core.compare import compare_loaded
        from minitx.core.interp.interventions import Interventions

        ckpt_a, ckpt_b = checkpoints
        with Interventions(zero=ablated_b).applied(ckpt_b.model):
            result = compare_loaded(ckpt_a, ckpt_b, n=SUMMARY_SEQUENCES, names=names)
        if not get_current_worker().is_cancelled:
            self.post_message(SummaryReady(result))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if self.attribution_failed(event):  # AttributionKeys: one line, and the row goes
            return
        if event.worker.group == "measure" and event.state == WorkerState.ERROR:
            event.stop()
            self.summary_loading = False
            self.query_one("#summary-box").loading = False
            self.notify(f"cannot measure B: {error_text(event.worker.error)}", severity="error", markup=False)
        if self.changes_failed(event):
            return
        if event.worker.group == "compare" and event.state == WorkerState.ERROR:
            error = event.worker.error
            self.on_pair_failed(PairFailed(" and ".join(_named(n) for n in self.names if n),
                                           error_text(error)))

    def on_pair_failed(self, message: PairFailed) -> None:
        if self.from_command_line and self.app.exit_on_start_error:
            self.app.exit_unopened(message.name, message.error)
            return
        self.query_one("#pair-grids").loading = False
        self.query_one("#summary-box").loading = False
        self.summary_loading = False
        models = self.models
        if models:  # nothing lost: the pair on screen stays
            self.names = (models["A"], models["B"])
            kept = f"; still comparing {models['A'].name} and {models['B'].name}"
            self._set_status(self._pair_title())
            self.draw_extras()
        else:
            kept = ""
            self._set_status(f"{open_error(message.name, message.error)} — press 1 or 2 to choose A or B")
        self.notify(open_error(message.name, message.error) + kept, severity="error",
                    markup=False, timeout=10)

    @one_line_errors
    def on_pair_loaded(self, message: PairLoaded) -> None:
        self.from_command_line = False
        panels = self.panels
        previous = panels["A"].session.record  # the model A was, if any: its source may stay
        panels["A"].session.set_model(message.a)
        panels["B"].session.set_model(message.b)
        self._show_curves(message.a, message.b)
        self.refresh_bindings()
        self.comparison, self.checkpoints = None, message.checkpoints
        self.changes_reset()
        self.query_one("#pair-grids").loading = False
        self._set_status(self._pair_title())
        layers, heads = self.shape()  # A's working head, within what both models have
        first = panels["A"].session
        self.select_head(min(first.layer_index, layers - 1), min(first.head_index, heads - 1))
        same_tokens = previous is not None and previous.task.src_vocab == message.a.task.src_vocab
        self.source_for_model(message.a.task, same_tokens)
        self.action_run()  # the whole decode of both at first sight

    def on_summary_ready(self, message: SummaryReady) -> None:
        self.comparison, self.summary_loading = message.comparison, False
        self.query_one("#summary-box").loading = False
        self._draw_summary()

    def _pair_title(self) -> tuple[str, ...]:
        """'A reverse · B reverse without cross:L2.H1', and shorter: B's heads counted."""
        b = self.panels["B"].session
        count = len(b.ablated)
        full = f"A {self.models['A'].name} · B {self._name_b()}"
        return (full, f"A {self.models['A'].name} · B {b.record.name} without {count} heads") if count > 1 \
            else (full,)

    def _name_b(self, room: int = 0) -> str:
        """B's name, and the heads knocked out of it (counted where the list passes `room`)."""
        from minitx.core.interp.interventions import without_heads

        session = self.panels["B"].session
        name, count = session.record.name, len(session.ablated)
        said = (without_heads(name, session.ablated, session.record.heads), f"{name} without {count} heads",
                f"{name} · {count} off")
        return next((s for s in said if len(s) <= room), said[-1]) if room else said[0]

    # -- B as A with heads knocked out -----------------------------------------------------------
    def intervened_panels(self) -> list[DecodePanel]:
        return [self.panels["B"]] if self.models else []

    def interventions_changed(self) -> None:
        """B's model changed: its title, and the summary measured again."""
        self._set_status(self._pair_title())
        if len(self.checkpoints) == 2:
            self.comparison, self.summary_loading = None, True
            self._measure(self.checkpoints, self.panels["B"].session.ablated,
                          (self.models["A"].name, self._name_b(room=SUMMARY_NAME)))

    def _set_status(self, text: str | tuple[str, ...]) -> None:
        texts = (text,) if isinstance(text, str) else text
        self.query_one(TitleBar).set_info(*texts)
        text = texts[0]
        if not self.models:  # nothing to draw yet: say what is happening where the output goes
            self.query_one("#pair-output", OutputLine).update(text)

    def action_doctor(self) -> None:
        models = self.models
        if not models:
            self.notify("choose models A and B first (1 and 2): the doctor checks both")
            return
        self.app.open_doctor([models["A"], models["B"]], ["A", "B"])

    @one_line_errors
    def action_pick(self, side: str) -> None:
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

        self.app.choose_checkpoint(f"compare: choose model {side}", chosen)

    # -- drawing ---------------------------------------------------------------------------------
    def show_selection(self) -> str:
        return f"step {self.position} · {super().show_selection()}"

    def draw_extras(self) -> None:
        if not self.models:
            return
        self._draw_summary()
        if self.steppers:
            self._draw_output()
            self._draw_diff()

    def _draw_output(self) -> None:
        panels = self.panels
        width = max(len(p.session.record.name) for p in panels.values())
        lines = []
        for side, panel in panels.items():
            s = panel.session.stepper
            level = panel.session.record.task.vocab.level
            parts = [Text(f"{side} {panel.session.record.name:<{width}}", style="bold"),
                     panel.verdict() if s.finished else Text("·", style="dim"),
                     token_line([r.text for r in s.results[: s.position]] or ["·"], level)]
            expected = panel.session.expected_labels
            if s.finished and panel.session.correct is False and expected is not None:
                parts.append(token_line(expected, level, "expected "))
            lines.append(parts)
        self.query_one("#pair-output", OutputLine).show(*lines)

    def _draw_diff(self) -> None:
        show_difference(self.query_one("#diff-box"), self.query_one("#diff", DiffGrid),
                        list(self.panels.values()), self.size.width)

    def on_resize(self) -> None:
        if self.steppers:
            self.call_after_refresh(self.refresh_view)

    def _draw_summary(self) -> None:
        if self.draw_changes(self.query_one("#summary-box"), self.query_one("#summary", CompareSummary)):
            return
        note = f"decoding {SUMMARY_SEQUENCES} fresh sequences with both models…" \
            if self.summary_loading else ""
        a = self.panels["A"].session
        self.query_one("#summary", CompareSummary).show(self.comparison, a.layer_index, a.head_index, note)


def _named(model) -> str:
    """A name or path as given, or the name of a model on screen."""
    return model if isinstance(model, str) else model.name
