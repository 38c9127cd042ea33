"""Every picture of one decode: the panel Explore shows once and Compare twice.

The panel draws its DecodeSession (tui/app/decode_session.py: the model, the stepper, what is
looked at and what is done to the model) and holds nothing else: the output line, the attention
grid, every head at once, the logit lens, the head-importance table, the positional encoding,
the next-token bars and the alignment table. Screens change the session (through the shared
decoding keys, tui/app/decode_keys.py), then call redraw(); a panel never reads the app's state,
so two panels can step in lockstep.

Adding a view: name it in decode_session.VIEWS, give it a widget in compose and `_widgets`, a
`_draw_<view>` method here, and bind a key to the screen's `view('name')` action.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Region

from minitx.core.wording import counted
from minitx.tui.app.decode_session import (
    KIND_TITLES,
    METHOD_NAMES,
    ROW_LABELS,
    RUN_AT_ONCE,
    DecodeSession,
)
from minitx.tui.app.widgets.attention import AttentionGrid, HeadsOverview, ScoreTable
from minitx.tui.app.widgets.importance import ImportanceTable
from minitx.tui.app.widgets.lens_view import LensTable
from minitx.tui.app.widgets.output_line import OutputLine, token_line
from minitx.tui.app.widgets.positions import PositionsView
from minitx.tui.app.widgets.topk import TopKBars


def middle_cut(name: str, room: int) -> str:
    """`name` in at most `room` characters, cut in the middle ('reverse-no…l-mask'): both ends
    of a file name say which it is."""
    if len(name) <= room:
        return name
    keep = max(2, room - 1)
    return name[: (keep + 1) // 2] + "…" + name[len(name) - keep // 2:]


class DecodePanel(Vertical):
    def __init__(self, *, label: str = "", side: bool = True, output: bool = True,
                 step_hint: str = "press → (or n) to generate a token", id: str | None = None) -> None:
        super().__init__(id=id, classes="decode-panel")
        self.label = label  # "A" / "B" in Compare: titles name the side and the model
        self.with_side, self.with_output, self.step_hint = side, output, step_hint
        self.session = DecodeSession(budget=RUN_AT_ONCE)  # a big model's decode: frame by frame

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
                with Horizontal(classes="attribution"):  # the head's cross-attention, the attribution
                    yield AttentionGrid(classes="attribution-head", compact=bool(self.label))
                    yield AttentionGrid(classes="attribution-matrix", compact=bool(self.label))
            if self.with_side:
                with Vertical(classes="side"):
                    with Vertical(classes="topk-box"):
                        yield TopKBars(classes="topk")
                    with VerticalScroll(classes="scores-box", can_focus=False):  # 8 or 16 heads: blocks
                        yield ScoreTable(classes="scores")

    def on_mount(self) -> None:
        for view, widget in self._widgets().items():
            widget.display = view == "grid"
        matrix = self.query_one(".attribution-matrix", AttentionGrid)
        matrix.window_of = self.query_one(".attribution-head", AttentionGrid)
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
    def scroll_grid(self) -> AttentionGrid:
        """The grid whose columns < > move: the one grid, or in the attribution view the head's
        (the attribution beside it shows the same columns)."""
        if self.session.view_mode == "attribution":
            return self.query_one(".attribution-head", AttentionGrid)
        return self.grid

    @property
    def topk(self) -> TopKBars:
        return self.query_one(".topk", TopKBars)

    @property
    def output(self) -> OutputLine:
        return self.query_one(".output", OutputLine)

    def _widgets(self) -> dict:
        return {"grid": self.grid, "heads": self.heads, "lens": self.query_one(".lens"),
                "importance": self.query_one(".importance"), "positions": self.query_one(".positions"),
                "attribution": self.query_one(".attribution")}

    def name_scrolling(self) -> None:
        """A view taller than its box (the positions at 80x24, 48 heads at once) names the keys
        that scroll it on its frame; the ranking names its own (↑ ↓ choose a head)."""
        box = self.grid_box
        tall = box.max_scroll_y > 0 and self.session.view_mode != "importance"
        box.border_subtitle = "↑↓ scroll" if tall else ""

    def show_status(self, text: str) -> None:
        """Say what is happening where the output goes (before a model is there)."""
        if self.with_output:
            self.output.update(text)

    # -- drawing ---------------------------------------------------------------------------------
    def redraw(self) -> None:
        v = self.session
        if v.record is None:
            return
        if self.with_side:
            box = self.query_one(".scores-box")
            box.border_title = f"all heads · {v.record.measure}"
            note = (f"expected: {v.record.task.alignment_name}" if v.record.measure == "alignment"
                    else "no expected pattern")
            selected = (v.layer_index, v.head_index) if v.kind == "cross" else None
            table = self.query_one(".scores", ScoreTable)
            table.show(v.record.scores, selected, note=note, off=v.off_heads("cross"))
            # the selected head's line in view (a model of 8 or 16 heads has blocks below)
            self.call_after_refresh(lambda: box.scroll_to_region(Region(0, table.selected_line(), 1, 1),
                                                                 animate=False))
        if v.stepper is None:
            return
        if self.with_output:
            self._draw_output()
        if self.with_side:
            self._draw_topk()
        self._draw_view()

    def verdict(self) -> Text:
        """'✓ correct', '✗ wrong', or what the decode is doing: first on every output line, so
        a narrow terminal cuts tokens, never the verdict."""
        v = self.session
        if not v.finished:
            return Text("decoding" if v.position else "not started", style="dim")
        if v.correct is None:  # the task cannot tell what is correct
            return Text("done", style="bold")
        if v.correct:
            return Text("✓ correct", style="bold green")
        return Text("✗ wrong", style="bold red")

    def _draw_output(self) -> None:
        v = self.session
        s, task = v.stepper, v.record.task
        # Teacher forcing: the steps it got right out of those so far (they count the steps),
        # what it was fed (the answer) and what it would have said instead.
        right = sum(a == b for a, b in zip(v.predictions, s.tokens))
        length = v.output_length  # 'step 3/6' of a decode seen to its end; before, no bound
        progress = f"{right}/{s.position} right" if v.teacher else \
            f"step {s.position}/{length}" if length else f"step {s.position}"
        parts = [self.verdict(), progress]
        # A model trained outside minitx: its training lengths are unknown (its positions limit a
        # source, and a longer one is refused as it is typed).
        if not v.record.pretrained and task.source_length(s.src_ids) > task.max_len:
            parts.append(Text(f"longer than trained ({task.max_len})", style="yellow"))
        level = task.vocab.level
        shown = [r.text + ("*" if r.forced else "") for r in s.results[: s.position]] or ["·"]
        if v.teacher:
            parts += [token_line(shown, level, "fed "),
                      token_line(task.vocab.labels(v.predictions) or ["·"], level, "model says ")]
        else:
            parts.append(token_line(shown, level))
            expected = v.expected_labels
            if expected is not None:  # None: the task cannot tell (dates, text not held out)
                parts.append(token_line(expected, level, "expected "))
        self.output.show(parts)

    def _draw_topk(self) -> None:
        v = self.session
        s, box, vocab = v.stepper, self.query_one(".topk-box"), v.record.task.vocab
        r = s.current
        if r is None:
            box.border_title = "next token"
            self.topk.show([], "→ steps to the first token")  # 26 characters: the box's width
            return
        box.border_title = f"next token · step {s.position}"
        note = f"entropy {r.entropy:.3f} nats"
        if r.forced:
            note += f" · {vocab.label(r.token)} forced"
        top = r.top_k
        if r.settings_forced:  # the settings chose, not the model: show what the model would have
            own = v.record.model.generation.emittable(r.log_probs).exp().topk(s.top_k)  # (k,)
            top = [(int(i), float(p)) for p, i in zip(own.values, own.indices)]
            note += f"\n{vocab.label(r.token)} forced ({r.settings_forced})"
        elif r.ruled:  # generation settings changed the choice: the model's own, then which rules
            note += f"\nwas {vocab.label(r.ruled[0][1])}: {'+'.join(rule for rule, _ in r.ruled)}"
        self.topk.show([(vocab.label(i), p, float(r.log_probs[i])) for i, p in top], footnote=note)

    def _title(self, picture: str) -> str:
        """Explore: 'cross-attention · L2 H2'. Compare: 'A reverse', the head at the bottom, so a
        narrow panel cuts neither the side nor the head."""
        v = self.session
        where = f"L{v.layer_index + 1} H{v.head_index + 1}"
        if (v.layer_index, v.head_index) in v.off_heads():
            where += " ✗"
        n = len(v.ablated)
        off = f" · {counted(n, 'head')} off" if n else ""
        if self.label:  # a narrow panel: the name gives way in its middle, the count to ' · 3 off'
            self.grid_box.border_subtitle = where
            off = f" · {n} off" if n else ""
            room = (self.grid_box.outer_size.width or 30) - 6 - len(self.label) - 1 - len(off)  # "╭─ " " ─╮"
            return f"{self.label} {middle_cut(v.record.name, room)}{off}"
        return f"{picture} · {where}{off}"

    def _draw_view(self) -> None:
        v = self.session
        for view, widget in self._widgets().items():
            widget.display = view == v.view_mode
        # Two grids side by side fill the box's width: its scrollbar keeps a gutter of its own,
        # or it would cover the right one's last columns and its note.
        self.grid_box.set_class(v.view_mode == "attribution", "two-grids")
        self.grid.numbers = v.numbers
        for grid in self.query(".attribution AttentionGrid").results(AttentionGrid):
            grid.numbers = v.numbers
        getattr(self, f"_draw_{v.view_mode}")()

    def _draw_grid(self) -> None:
        v = self.session
        s, grid, box = v.stepper, self.grid, self.grid_box
        rows_labels = [r.text for r in s.results[: s.position]]
        current_row = s.position - 1 if s.position and s.position == v.target else None
        hint = "" if v.target else self.step_hint
        layer, head = v.layer_index, v.head_index
        box.border_title = self._title(KIND_TITLES[v.kind])
        if not v.has_selected_head:  # Compare: the other model is larger
            count = v.layer_count()
            grid.show([], [], [], hint=f"no L{layer + 1}: {counted(count, 'layer')} only"
                      if layer >= count else f"no H{head + 1}: {v.record.heads} heads only")
        elif v.kind == "cross":
            rows = s.cross_attention_grid(layer, head).tolist()
            under, note = self._attribution_row(current_row)
            grid.show(rows, v.record.task.source_labels(s.src_ids), rows_labels, current_row, hint,
                      "" if self.label else "rows: tokens generated · columns: source tokens",
                      under=under, note=note, unit="weight, share" if under else "weight")
        elif v.kind == "self":
            inputs = s.vocab.labels(s.decoder_input([])) + rows_labels[:-1]  # the start, then outputs
            rows = s.self_attention_grid(layer, head).tolist()
            grid.show(rows, inputs, rows_labels, current_row, hint,
                      "rows: outputs · columns: inputs (· future)", causal=True)
        else:
            tokens = v.record.task.source_labels(s.src_ids)
            grid.show(s.encoder_attention_grid(layer, head).tolist(), tokens, tokens, None, "",
                      "rows: queries · columns: keys (source tokens)")
        if v.attribution_shown and v.kind != "cross" and v.has_selected_head:
            grid.note = f"{METHOD_NAMES[v.attribution_method]}: its row goes under cross-attention (s)"

    def _attribution_row(self, current_row: int | None) -> tuple[tuple | None, str]:
        """(label, shares, mark) of the current step's attribution, drawn under its attention row,
        and the line that says what it is; (None, "") with no method chosen."""
        v = self.session
        if not v.attribution_shown:
            return None, ""
        name = METHOD_NAMES[v.attribution_method]
        if current_row is None:
            return None, f"{name}: step to a token (→) for its row"
        row = v.attribution_row()
        if row is None:
            return None, measuring(name, v.attribution_measured(current_row))
        token = v.stepper.results[current_row].text
        against = "" if v.attribution_method == "attention" else "; - against"
        note = f"{name}: what {token!r} depends on{against}"
        return (ROW_LABELS[v.attribution_method], row, "◂ " + name), note

    def _draw_heads(self) -> None:
        v = self.session
        s, record = v.stepper, v.record
        grid_of = {"cross": s.cross_attention_grid, "self": s.self_attention_grid,
                   "enc": s.encoder_attention_grid}[v.kind]
        grids = [[grid_of(layer, head).tolist() for head in range(record.heads)]
                 for layer in range(v.layer_count())]
        self.grid_box.border_title = f"{KIND_TITLES[v.kind]} · all heads"
        scores = record.scores if v.kind == "cross" else []
        note = ("score: attention where the task expects it" if record.measure == "alignment"
                else "score: sharpness, each head's largest weight") if scores else "▸ selected"
        why = "" if record.task.has_examples else "needs example pairs (O chooses a file)"
        self.heads.show(grids, scores, (v.layer_index, v.head_index), v.off_heads(), note, v.roles_grid(),
                        why)

    def _draw_lens(self) -> None:
        v = self.session
        s, lens, vocab = v.stepper, self.query_one(".lens", LensTable), v.record.task.vocab
        self.grid_box.border_title = "logit lens · each decoder layer's guess"
        r = s.current
        if r is None:
            lens.show([])
            return
        fed = vocab.label(s.decoder_input(s.results)[r.index])
        top = v.record.model.generation.emittable(r.lens).exp().topk(3, dim=-1)  # (layers, 3) emittable
        layers = [[(vocab.label(int(i)), float(p)) for p, i in zip(ps, idx)]
                  for ps, idx in zip(top.values, top.indices)]
        lens.show(layers, f"step {s.position}: fed {fed}, output {r.text}")

    def _draw_importance(self) -> None:
        v = self.session
        table = self.query_one(".importance", ImportanceTable)
        self.grid_box.border_title = "which heads matter · each ablated alone"
        if v.importance is None:
            table.show_progress(*v.importance_progress)
        else:
            table.show(v.importance, str(v.selected_head), {str(h) for h in v.ablated})

    def _draw_positions(self) -> None:
        from minitx.core.interp.positions import position_similarity, positional_table

        v = self.session
        self.grid_box.border_title = "positional encoding · positions × dimensions"
        n = min(v.record.model.cfg.max_len, max(8, len(v.stepper.src_ids) + 2))
        table = positional_table(v.record.model, n)
        view = self.query_one(".positions", PositionsView)
        kind = v.record.model.cfg.position_encoding
        if table is None:
            view.show(None, [], kind)
        else:
            view.show(table.tolist(), position_similarity(table).tolist(), kind, v.numbers)

    def _draw_attribution(self) -> None:
        """The selected head's cross-attention beside the attribution of every step shown, in one
        palette: where the head looks, and what the output depends on."""
        v = self.session
        s, task = v.stepper, v.record.task
        head_grid = self.query_one(".attribution-head", AttentionGrid)
        matrix = self.query_one(".attribution-matrix", AttentionGrid)
        name = METHOD_NAMES[v.attribution_method or "ig"]
        layer, head = v.layer_index, v.head_index
        box_title = f"cross-attention L{layer + 1} H{head + 1} · {name} attribution"
        self.grid_box.border_title = box_title if not self.label else self._title(box_title)
        outputs = [r.text for r in s.results[: s.position]]
        columns = task.source_labels(s.src_ids)
        current = s.position - 1 if s.position and s.position == v.target else None
        hint = "" if v.target else self.step_hint
        if v.layer_index < len(v.record.model.decoder) and v.head_index < v.record.heads:
            head_grid.show(s.cross_attention_grid(layer, head).tolist(), columns, outputs, current, hint,
                           f"L{layer + 1} H{head + 1} looks at")
        else:
            head_grid.show([], [], [], hint=f"no L{layer + 1} H{head + 1} in this model")
        result = v.attribution
        signed = v.attribution_method != "attention"
        if result is None:
            matrix.show([], columns, [], hint=measuring(name, v.attribution_measured(None), short=True),
                        unit="share", signed=signed)
            return
        shares = result.shares()[: s.position].tolist()
        axes = name + (" (- against)" if signed else "")
        matrix.show(shares, columns, outputs, current, "", axes, unit="share", signed=signed)


def measuring(method: str, done: str, short: bool = False) -> str:
    """What an attribution row or matrix says while a worker computes it: how far, and how to stop
    (short: for the matrix beside the head's grid, half the panel at 80 columns)."""
    if short:
        return f"{method}: {done or '…'} (esc stops)"
    return f"{method}: measuring… {done + ' ' if done else ''}(esc stops)"
