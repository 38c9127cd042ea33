"""The circuit view (C in Explore): a worker finds the model's circuit (core/interp/circuit.py,
as `minitx circuit` does), then the heads show as boxes by layer and kind with the kept edges
drawn between them, and the faithfulness. Knocking a head in or out of the circuit (k, space)
redraws at once and re-measures in a worker: the faithfulness first (teacher-forced, a few
forwards), then the exact match; a newer change supersedes an older measurement."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import get_current_worker

from minitx.tui.app.errors import error_text
from minitx.tui.app.exports import EXPORT_BINDING
from minitx.tui.app.messages import CircuitFound, CircuitMeasured, CircuitProgress
from minitx.tui.app.widgets.topk import bar

CIRCUIT_PAIRS = 32  # as `minitx circuit` measures it
FOUND_SEQUENCES = 200  # the found circuit's exact match, as `minitx circuit` measures it
ACCURACY_SEQUENCES = 100  # the exact match re-measured after each change
BANDS = ("enc", "cross", "self")  # the diagram's rows, top to bottom


class _Closed(Exception):
    """The circuit view closed while its circuit was being found."""


class CircuitScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q", "dismiss(None)", "close"),
        Binding("left", "move(0, -1)", "head", show=False),
        Binding("right", "move(0, 1)", "head", show=False),
        Binding("up", "move(-1, 0)", "kind", show=False),
        Binding("down", "move(1, 0)", "kind", show=False),
        Binding("k,space", "toggle", "in/out"),
        Binding("r", "reset", "found circuit"),
        EXPORT_BINDING,
    ]
    DEFAULT_CSS = """
    #circuit-box { width: 80; max-width: 100%; height: auto; max-height: 100%; }
    #circuit-diagram { height: auto; text-wrap: nowrap; text-overflow: clip; }
    #circuit-figures, #circuit-status, #circuit-head { height: auto; }
    """

    def __init__(self, model, task, name: str, found: dict | None = None) -> None:
        """found: circuits found before, kept by whoever opens the view (the app), so opening it
        again on the same model and task shows them at once instead of seconds of measuring."""
        super().__init__()
        self.decoded = (model, task)  # (Screen has a `task` of its own)
        self.model_name = name
        self.result = None  # core.circuit.CircuitResult once found
        self.circuit = None  # what is on screen: the found circuit, or it with heads knocked in/out
        self.found = {} if found is None else found  # (id(model), id(task)) -> (model, task, result, figures)
        known = self.found.get(self._key())
        self.figures: dict = known[3] if known else {}  # circuit -> (faithfulness, accuracy or None)
        self.cursor = (1, 0)  # (band, column): column = layer * heads + head

    def _key(self) -> tuple[int, int]:
        return id(self.decoded[0]), id(self.decoded[1])

    def compose(self) -> ComposeResult:
        with Vertical(id="circuit-box", classes="dialog"):
            yield Static("finding the circuit…", id="circuit-status", markup=False)
            yield Static("", id="circuit-diagram")
            yield Static("", id="circuit-figures")
            yield Static("", id="circuit-head")
            yield Static("[dim]←→↑↓ a head · k or space: in or out (re-measured) · r the found one · "
                         "esc[/dim]")

    def on_mount(self) -> None:
        self.query_one("#circuit-box").border_title = f"the circuit of {self.model_name}"
        known = self.found.get(self._key())
        if known is not None:  # found before: the same model, task and pairs give the same circuit
            self.post_message(CircuitFound(known[2]))
        else:
            self.find()

    # -- finding it ---------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="circuit-find", exit_on_error=False)
    def find(self) -> None:
        from minitx.core.interp.circuit import find_circuit
        from minitx.core.interp.pairs import draw_pairs

        model, task = self.decoded
        worker = get_current_worker()

        def progress(stage: str, done: int, total: int) -> None:
            if worker.is_cancelled:  # the view was closed: stop at the next step
                raise _Closed
            self.post_message(CircuitProgress(stage, done, total))

        try:
            pairs = draw_pairs(task, CIRCUIT_PAIRS, 1234, model.cfg.eos_id)
            result = find_circuit(model, task, pairs, accuracy_n=FOUND_SEQUENCES, progress=progress)
        except _Closed:
            return
        except Exception as e:  # a model that cannot be measured: a line in the dialog, never a traceback
            self.post_message(CircuitFound(error=error_text(e)))
            return
        self.post_message(CircuitFound(result))

    def on_circuit_progress(self, message: CircuitProgress) -> None:
        done = message.done / message.total if message.total else 0.0
        self._status(f"finding the circuit: {message.stage} {bar(done, 12)} {message.done}/{message.total}")

    def on_circuit_found(self, message: CircuitFound) -> None:
        if message.error:
            self._status(f"✗ cannot find the circuit: {message.error}")
            return
        result = self.result = message.result
        self.circuit = result.circuit
        self.figures[result.circuit] = (result.faithfulness, result.accuracy)
        self.found[self._key()] = (*self.decoded, result, self.figures)  # the objects kept with their ids
        self._status("")
        self.redraw()

    # -- changing it ----------------------------------------------------------------------------
    def action_move(self, rows: int, columns: int) -> None:
        if self.result is None:
            return
        shape = self._shape()
        band = (self.cursor[0] + rows) % len(BANDS)
        width = shape.layers(BANDS[band]) * shape.heads
        column = min(max(self.cursor[1] + columns, 0), width - 1)
        self.cursor = (band, column)
        self.redraw()

    def action_toggle(self) -> None:
        if self.circuit is None:
            return
        head = self.selected()
        model = self.decoded[0]
        self.circuit = self.circuit.without_head(head) if head in self.circuit.heads \
            else self.circuit.with_head(model, head)
        self.redraw()
        if self.circuit not in self.figures:
            self.measure(self.circuit)

    def action_reset(self) -> None:
        if self.result is not None:
            self.circuit = self.result.circuit
            self.redraw()

    @work(thread=True, exclusive=True, group="circuit-measure", exit_on_error=False)
    def measure(self, circuit) -> None:
        from minitx.core.interp.circuit import circuit_accuracy

        worker = get_current_worker()
        measure = self.result.measure
        faithfulness = measure(circuit)
        if worker.is_cancelled:
            return
        self.post_message(CircuitMeasured(circuit, faithfulness))
        accuracy = circuit_accuracy(measure.runner, circuit, self.decoded[1], ACCURACY_SEQUENCES)
        if not worker.is_cancelled:
            self.post_message(CircuitMeasured(circuit, faithfulness, accuracy))

    def on_circuit_measured(self, message: CircuitMeasured) -> None:
        self.figures[message.circuit] = (message.faithfulness, message.accuracy)
        if message.circuit == self.circuit:
            self.redraw()

    # -- drawing ------------------------------------------------------------------------------
    def _shape(self):
        from minitx.tui.render.circuit_diagram import Shape

        return Shape.of(self.decoded[0])

    def selected(self):
        from minitx.core.interp.interventions import Head

        band, column = self.cursor
        heads = self._shape().heads
        return Head(BANDS[band], column // heads, column % heads)

    def redraw(self) -> None:
        from minitx.core.interp.interventions import describe_heads
        from minitx.tui.render.circuit_diagram import circuit_text

        if self.circuit is None:
            return
        shape, circuit, result = self._shape(), self.circuit, self.result
        edges = [(e.sender, e.receiver.head, e.receiver.side) for e in sorted(circuit.edges)]
        picture = circuit_text(shape, circuit.heads, edges, self.selected(), width=76)
        self.query_one("#circuit-diagram", Static).update(
            picture if picture is not None else f"(the diagram needs more than 76 columns) heads: "
            f"{describe_heads(circuit.heads, shape.heads)}")
        faithfulness, accuracy = self.figures.get(circuit, (None, None))
        shown = "measuring…" if faithfulness is None else f"[b]{faithfulness:.3f}[/b]"
        exact = "measuring…" if accuracy is None else f"{accuracy:.1%}"
        changed = "changed" if circuit != result.circuit else f"found, keep {result.keep:.0%}"
        self.query_one("#circuit-figures", Static).update(
            f"{len(circuit.heads)} of {result.total_heads} heads, {len(circuit.edges)} edges ({changed}) · "
            f"[#56b4e9]K/V[/] lines above, [#e69f00]Q[/] below\n"
            f"faithfulness {shown} · exact match {exact} alone ({result.model_accuracy:.1%} whole)")
        head = self.selected()
        inside = "in the circuit" if head in circuit.heads else "out: mean-ablated"
        score = result.head_scores.get(str(head), 0.0)
        self.query_one("#circuit-head", Static).update(
            f"[b]{head}[/b] {inside} · patched alone it recovers {score:+.2f}")

    def export_numbers(self):
        """The numbers beside the picture when E exports this view: `minitx circuit --json`'s,
        and the circuit on screen (heads knocked in or out) with what was measured of it."""
        from minitx.tui.app.exports import json_numbers

        if self.result is None:
            return None
        faithfulness, accuracy = self.figures.get(self.circuit, (None, None))
        shown = {"heads": sorted(str(h) for h in self.circuit.heads),
                 "edges": sorted(str(e) for e in self.circuit.edges),
                 "faithfulness": faithfulness, "accuracy": accuracy}
        return json_numbers("circuit", {"model": self.model_name, **self.result.to_dict(), "shown": shown})

    def _status(self, text: str) -> None:
        status = self.query_one("#circuit-status", Static)
        status.update(text)
        status.display = bool(text)
