"""The pictures a decode panel shows in place of its attention grid: every head at once, the
logit lens, the head-importance ranking and the positional encoding. A mixin of DecodePanel
(tui/app/widgets/decode_panel.py), which owns the state these read."""

from __future__ import annotations

from minitx.tui.app.widgets.importance import ImportanceTable
from minitx.tui.app.widgets.lens_view import LensTable
from minitx.tui.app.widgets.positions import PositionsView

KIND_TITLES = {"cross": "cross-attention", "self": "decoder self-attention",
               "enc": "encoder self-attention"}


class OtherViews:
    def _draw_heads(self) -> None:
        s, record = self.stepper, self.record
        grid_of = {"cross": s.cross_attention_grid, "self": s.self_attention_grid,
                   "enc": s.encoder_attention_grid}[self.kind]
        grids = [[grid_of(layer, head).tolist() for head in range(record.heads)]
                 for layer in range(self.layer_count())]
        self.grid_box.border_title = f"{KIND_TITLES[self.kind]} · all heads"
        scores = record.scores if self.kind == "cross" else []
        note = ("score: attention where the task expects it" if record.measure == "alignment"
                else "score: sharpness, each head's largest weight") if scores else "▸ selected"
        self.heads.show(grids, scores, (self.layer_index, self.head_index), self.off_heads(), note)

    def _draw_lens(self) -> None:
        s, lens, vocab = self.stepper, self.query_one(".lens", LensTable), self.record.task.vocab
        self.grid_box.border_title = "logit lens · each decoder layer's guess"
        r = s.current
        if r is None:
            lens.show([])
            return
        fed = "<sos>" if r.index == 0 else vocab.label(s.results[r.index - 1].token)
        from minitx.core.interp.decode import emittable

        top = emittable(r.lens, self.record.model.cfg).exp().topk(3, dim=-1)  # (layers, 3) of the emittable
        layers = [[(vocab.label(int(i)), float(p)) for p, i in zip(ps, idx)]
                  for ps, idx in zip(top.values, top.indices)]
        lens.show(layers, f"step {s.position}: fed {fed}, output {r.text}")

    def _draw_importance(self) -> None:
        table = self.query_one(".importance", ImportanceTable)
        self.grid_box.border_title = "which heads matter · each ablated alone"
        if self.importance is None:
            table.show_progress(*self.importance_progress)
        else:
            table.show(self.importance, str(self.selected_head), {str(h) for h in self.ablated})

    def _draw_positions(self) -> None:
        from minitx.core.interp.positions import position_similarity, positional_table

        self.grid_box.border_title = "positional encoding · positions × dimensions"
        n = min(self.record.model.cfg.max_len, max(8, len(self.stepper.src_ids) + 2))
        table = positional_table(self.record.model, n)
        view = self.query_one(".positions", PositionsView)
        kind = self.record.model.cfg.position_encoding
        if table is None:
            view.show(None, [], kind)
        else:
            view.show(table.tolist(), position_similarity(table).tolist(), kind, self.numbers)

