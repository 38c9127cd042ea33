"""One model decoding one source, and every picture of it: the panel Explore shows once and
Compare twice.

The panel owns the model record, the core Stepper (which records each step, so stepping back
replays), the view state (which attention kind, layer, head and picture, numbers on or off),
what is done to the model (heads knocked out, teacher forcing, forced tokens) and the widgets
that draw them: the output line, the attention grid, every head at once, the logit lens, the
head-importance table, the positional encoding, the next-token bars and the alignment table.
Screens drive it (set_model, set_source, goto, select_head, set_view, set_kind, toggle_ablation,
then redraw) and it never reads the app's state, so two panels can step in lockstep.

Adding a view: name it in VIEWS, give it a widget in compose and `_widgets`, draw it in
`_draw_view` (the views other than the grid draw in tui/app/widgets/panel_views.py), and bind a
key to the screen's `view('name')` action (tui/app/decode_keys.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll

from minitx.tui.app.widgets.attention import AttentionGrid, HeadsOverview, ScoreTable
from minitx.tui.app.widgets.importance import ImportanceTable
from minitx.tui.app.widgets.lens_view import LensTable
from minitx.tui.app.widgets.output_line import OutputLine, token_line
from minitx.tui.app.widgets.panel_views import KIND_TITLES, OtherViews
from minitx.tui.app.widgets.positions import PositionsView
from minitx.tui.app.widgets.topk import TopKBars

if TYPE_CHECKING:
    from minitx.core.interp.decode import Stepper
    from minitx.tui.app.loaded import LoadedModel

KINDS = ("cross", "self", "enc")  # the attention a grid shows; s cycles through them
VIEWS = ("grid", "heads", "lens", "importance", "positions")  # "grid" is where every other returns


class DecodePanel(OtherViews, Vertical):
    def __init__(self, *, label: str = "", side: bool = True, output: bool = True,
                 step_hint: str = "press → (or n) to generate a token", id: str | None = None) -> None:
        super().__init__(id=id, classes="decode-panel")
        self.label = label  # "A" / "B" in Compare: titles name the side and the model
        self.with_side, self.with_output, self.step_hint = side, output, step_hint
        self.record: LoadedModel | None = None
        self.stepper: Stepper | None = None
        self.target = 0  # the step the screen asked for; a decode that ended earlier stays at its end
        self.layer_index = self.head_index = 0
        self.kind, self.view_mode = "cross", "grid"
        self.numbers = False
        self.ablated: frozenset = frozenset()  # core Heads knocked out (zero ablation)
        self.teacher = False  # feed the decoder the task's answer instead of its own tokens
        self.forced: dict[int, int] = {}  # step -> token output there instead of the model's
        self.importance = None  # core.importance.Importance of this model, once measured
        self.importance_progress = (0, 0)

    def compose(self) -> ComposeResult:
        if self.with_output:
            yield OutputLine(classes="output")
        with Horizontal(classes="decode-main"):
            with VerticalScroll(classes="grid-box", can_focus=False):
                yield AttentionGrid(classes="grid", compact=bool(self.label))  # Compare: rows count
                yield HeadsOverview(classes="heads")
                yield LensTable(classes="lens")
                yield ImportanceTable(classes="importance")
                yield PositionsView(classes="positions")
            if self.with_side:
                with Vertical(classes="side"):
                    with Vertical(classes="topk-box"):
                        yield TopKBars(classes="topk")
                    with Vertical(classes="scores-box"):
                        yield ScoreTable(classes="scores")

    def on_mount(self) -> None:
        for view, widget in self._widgets().items():
            widget.display = view == "grid"
        if self.with_side:
            self.query_one(".topk-box").border_title = "next token"
            self.query_one(".scores-box").border_title = "all heads · alignment"

    # -- the widgets -----------------------------------------------------------------------------
    @property
    def main(self) -> Horizontal:
        """Everything but the output line: what a loading indicator covers."""
        return self.query_one(".decode-main", Horizontal)

    @property
    def grid(self) -> AttentionGrid:
        return self.query_one(".grid", AttentionGrid)

    @property
    def heads(self) -> HeadsOverview:
        return self.query_one(".heads", HeadsOverview)

    @property
    def grid_box(self) -> VerticalScroll:
        return self.query_one(".grid-box", VerticalScroll)

    @property
    def topk(self) -> TopKBars:
        return self.query_one(".topk", TopKBars)

    @property
    def output(self) -> OutputLine:
        return self.query_one(".output", OutputLine)

    def _widgets(self) -> dict:
        return {"grid": self.grid, "heads": self.heads, "lens": self.query_one(".lens"),
                "importance": self.query_one(".importance"), "positions": self.query_one(".positions")}

    # -- state -----------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        return self.stepper.position if self.stepper else 0

    @property
    def finished(self) -> bool:
        return self.stepper is not None and self.stepper.finished

    @property
    def longest_source(self) -> int:
        """Source tokens this model's positional table holds (plus SOS and EOS)."""
        return self.record.model.cfg.max_len - 2 if self.record else 0

    @property
    def answer(self) -> list[int] | None:
        """The task's output for the source, then EOS; None when the task cannot tell (dates,
        a data file: typed text has no known answer)."""
        return self.answer_of(self.stepper.src_ids)

    def answer_of(self, ids: list[int]) -> list[int] | None:
        output = self.record.task.expected_output(ids)
        return None if output is None else output + [self.record.task.vocab.eos]

    @property
    def expected(self) -> str | None:
        answer = self.answer
        return None if answer is None else self.record.task.format(answer)

    @property
    def predictions(self) -> list[int]:
        """What the model chose at each shown step (under teacher forcing, not what it was fed)."""
        shown = self.stepper.results[: self.position]
        return [r.token if r.predicted is None else r.predicted for r in shown]

    @property
    def correct(self) -> bool | None:
        """None when the task cannot tell what is correct."""
        expected = self.expected
        if expected is None:
            return None
        shown = self.predictions if self.teacher else self.stepper.tokens
        return self.record.task.format(shown) == expected

    def layer_count(self, kind: str | None = None) -> int:
        """Layers of `kind` (the kind shown when None): the encoder's or the decoder's."""
        kind = kind or self.kind
        return len(self.record.model.encoder) if kind == "enc" else self.record.layers

    @property
    def selected_head(self):
        """The core Head the selection names in the kind shown (what k knocks out)."""
        from minitx.core.interp.interventions import Head

        return Head(self.kind, self.layer_index, self.head_index)

    def off_heads(self, kind: str | None = None) -> set[tuple[int, int]]:
        """(layer, head) of the heads knocked out in `kind` (the kind shown when None)."""
        kind = kind or self.kind
        return {(h.layer, h.head) for h in self.ablated if h.kind == kind}

    def set_model(self, record: LoadedModel) -> None:
        """A new model: start on the head that does the work, so its alignment shows at once;
        nothing done to the old model carries over."""
        from minitx.core.interp.alignment import best_head

        self.record, self.stepper, self.target = record, None, 0
        self.kind, self.ablated, self.forced, self.teacher = "cross", frozenset(), {}, False
        self.importance, self.importance_progress = None, (0, 0)
        self.layer_index, self.head_index = best_head(record.scores)
        if self.with_side:
            self.query_one(".scores-box").border_title = f"all heads · {record.measure}"

    def set_source(self, ids: list[int]) -> None:
        self.forced, self.target = {}, 0
        self.stepper = self._new_stepper(ids)

    def _new_stepper(self, ids: list[int]):
        from minitx.core.interp.decode import Stepper
        from minitx.core.interp.interventions import Interventions

        task, cfg = self.record.task, self.record.model.cfg
        teacher = self.answer_of(ids) if self.teacher else None
        return Stepper(self.record.model, ids, top_k=5, cap=task.decode_cap(len(ids), cfg.max_len),
                       interventions=Interventions(zero=self.ablated), forced=self.forced,
                       teacher=teacher, vocab=task.vocab)

    def restart(self) -> None:
        """Decode again after a change to the model or the feeding, to the same step (or again to
        the end, if the decode was shown to its end)."""
        if self.stepper is None:
            return
        at_end = self.stepper.finished
        self.stepper = self._new_stepper(self.stepper.src_ids)
        if at_end:
            self.run_to_end()
        else:
            self.goto(self.target)

    def goto(self, position: int) -> None:
        """Move to `position` steps (a decode that ends earlier stays at its end)."""
        s, self.target = self.stepper, position
        if position == 0:
            s.reset()
        while s.position > position:
            s.back()
        while s.position < position and s.step() is not None:
            pass

    def run_to_end(self) -> None:
        self.stepper.run()
        self.target = self.stepper.position

    def select_head(self, layer: int, head: int) -> None:
        self.layer_index, self.head_index = layer, head

    def set_view(self, view: str) -> None:
        self.view_mode = view if view in VIEWS else "grid"

    def set_kind(self, kind: str) -> None:
        """Show another attention kind, keeping the selected head where that kind has it."""
        self.kind = kind if kind in KINDS else "cross"
        self.layer_index = min(self.layer_index, self.layer_count() - 1)

    def toggle_ablation(self) -> None:
        """Knock the selected head out, or bring it back; the decode follows at once."""
        self.ablated = self.ablated ^ {self.selected_head}
        self.restart()

    def clear_ablations(self) -> None:
        self.ablated = frozenset()
        self.restart()

    def set_teacher(self, on: bool) -> None:
        self.teacher, self.forced = on, {}
        self.restart()

    def force(self, token: int) -> None:
        """Output `token` at the current step, then decode greedily from it to the end."""
        self.stepper.force(token)
        self.forced = dict(self.stepper.forced)
        self.run_to_end()

    def show_status(self, text: str) -> None:
        """Say what is happening where the output goes (before a model is there)."""
        if self.with_output:
            self.output.update(text)

    # -- drawing ---------------------------------------------------------------------------------
    def redraw(self) -> None:
        if self.record is None:
            return
        if self.with_side:
            self.query_one(".scores", ScoreTable).show(
                self.record.scores, (self.layer_index, self.head_index) if self.kind == "cross" else None,
                note=f"expected: {self.record.task.alignment_name}" if self.record.measure == "alignment"
                else "no expected pattern", off=self.off_heads("cross"))
        if self.stepper is None:
            return
        if self.with_output:
            self._draw_output()
        if self.with_side:
            self._draw_topk()
        self._draw_view()

    def verdict(self) -> Text:
        """'✓ correct', '✗ wrong', or what the decode is doing: first on every output line, so
        a narrow terminal cuts tokens, never the verdict."""
        if not self.finished:
            return Text("decoding" if self.position else "not started", style="dim")
        if self.correct is None:  # the task cannot tell what is correct
            return Text("done", style="bold")
        if self.correct:
            return Text("✓ correct", style="bold green")
        return Text("✗ wrong", style="bold red")

    def _draw_output(self) -> None:
        s, task = self.stepper, self.record.task
        # Teacher forcing: the steps it got right out of those so far (they count the steps),
        # what it was fed (the answer) and what it would have said instead.
        right = sum(a == b for a, b in zip(self.predictions, s.tokens))
        progress = f"{right}/{s.position} right" if self.teacher else f"step {s.position}/{s.cap}"
        parts = [self.verdict(), progress]
        if task.source_length(s.src_ids) > task.max_len:
            parts.append(Text(f"longer than trained ({task.max_len})", style="yellow"))
        level = task.vocab.level
        shown = [r.text + ("*" if r.forced else "") for r in s.results[: s.position]] or ["·"]
        if self.teacher:
            parts += [token_line(shown, level, "fed "),
                      token_line(task.vocab.labels(self.predictions) or ["·"], level, "model says ")]
        else:
            parts.append(token_line(shown, level))
            expected = self.expected
            if expected is not None:  # None: the task cannot tell (dates, a typed data source)
                parts.append(token_line(list(expected) if level == "char" else expected.split(),
                                        level, "expected "))
        self.output.show(parts)

    def _draw_topk(self) -> None:
        s, box, vocab = self.stepper, self.query_one(".topk-box"), self.record.task.vocab
        r = s.current
        if r is None:
            box.border_title = "next token"
            self.topk.show([], "→ generates the first token")
            return
        box.border_title = f"next token · step {s.position}"
        note = f"entropy {r.entropy:.3f} nats"
        if r.forced:
            note += f" · {vocab.label(r.token)} forced"
        self.topk.show([(vocab.label(i), p, float(r.log_probs[i])) for i, p in r.top_k], footnote=note)

    def _title(self, picture: str) -> str:
        """Explore: 'cross-attention · L2 H2'. Compare: 'A reverse', the head at the bottom, so a
        narrow panel cuts neither the side nor the head."""
        where = f"L{self.layer_index + 1} H{self.head_index + 1}"
        if (self.layer_index, self.head_index) in self.off_heads():
            where += " ✗"
        n = len(self.ablated)
        off = f" · {n} head{'s' if n > 1 else ''} off" if n else ""
        if self.label:
            self.grid_box.border_subtitle = where
            return f"{self.label} {self.record.name}{off}"
        return f"{picture} · {where}{off}"

    def _draw_view(self) -> None:
        for view, widget in self._widgets().items():
            widget.display = view == self.view_mode
        self.grid.numbers = self.numbers
        draw = {"grid": self._draw_grid, "heads": self._draw_heads, "lens": self._draw_lens,
                "importance": self._draw_importance, "positions": self._draw_positions}
        draw[self.view_mode]()

    def _draw_grid(self) -> None:
        s, grid, box = self.stepper, self.grid, self.grid_box
        rows_labels = [r.text for r in s.results[: s.position]]
        current_row = s.position - 1 if s.position and s.position == self.target else None
        hint = "" if self.target else self.step_hint
        layer, head = self.layer_index, self.head_index
        box.border_title = self._title(KIND_TITLES[self.kind])
        if self.kind == "cross":
            rows = s.cross_attention_grid(layer, head).tolist()
            grid.show(rows, self.record.task.source_labels(s.src_ids), rows_labels, current_row, hint,
                      "" if self.label else "rows: tokens generated · columns: source tokens")
        elif self.kind == "self":
            inputs = ["<sos>"] + rows_labels[:-1] if rows_labels else ["<sos>"]
            rows = s.self_attention_grid(layer, head).tolist()
            grid.show(rows, inputs, rows_labels, current_row, hint,
                      "rows: outputs · columns: inputs (· future)", causal=True)
        else:
            tokens = self.record.task.source_labels(s.src_ids)
            grid.show(s.encoder_attention_grid(layer, head).tolist(), tokens, tokens, None, "",
                      "rows: queries · columns: keys (source tokens)")
