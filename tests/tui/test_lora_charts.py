"""A LoRA fine-tune's update sizes in the app's charts: g offers the table once an evaluation
recorded them (never for a full fine-tune), a row per adapted layer with its latest size."""

from __future__ import annotations

from minitx.core.history import History
from minitx.tui.app.widgets.curve_chart import CurveChart
from minitx.tui.render.charts import update_sizes_text

ADAPTED = ["encoder.0.self_attn.q_proj", "decoder.1.cross_attn.v_proj"]


def watched(updates: bool) -> History:
    history = History()
    for step, size in ((0, 0.0), (100, 0.012), (200, 0.031)):
        sizes = [(name, size * (i + 1)) for i, name in enumerate(ADAPTED)]
        history.record_watch(step, 0.1 * step, updates=sizes if updates else ())
    return history


def test_the_chart_cycle_offers_lora_updates_only_where_they_were_recorded():
    chart = CurveChart()
    chart.show_runs([("full", watched(False))])
    assert "numerics" in chart.charts() and "lora_updates" not in chart.charts()
    chart.show_runs([("lora", watched(True))])
    assert "lora_updates" in chart.charts()


def test_the_update_size_table_names_each_adapted_layer_with_its_latest_size():
    lines = update_sizes_text(watched(True), 80, 10).plain.splitlines()
    assert lines[0].startswith("LoRA update size") and "3 evaluations, step 0-200" in lines[0]
    assert lines[1].startswith("enc L1 self q") and lines[1].endswith("0.031")
    assert lines[2].startswith("dec L2 cross v") and lines[2].endswith("0.062")
    assert all(len(line) <= 80 for line in lines)
    assert "no LoRA update sizes recorded" in update_sizes_text(watched(False), 80, 10).plain
