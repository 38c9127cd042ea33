"""Text that fits at 80x24: every line the app draws in a narrow box is whole (no 'toke', no
'◂ ste', no 'no-causa'), counts read as people write them (235M), and a finished decode counts
its own steps."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from minitx.tui.app.main import create_app
from minitx.tui.app.widgets.compare_summary import COLUMN, LABEL, differences
from minitx.tui.app.widgets.decode_panel import middle_cut
from minitx.tui.app.widgets.positions import PositionsView
from minitx.tui.app.widgets.titlebar import TitleBar
from minitx.tui.app.widgets.topk import TopKBars
from minitx.tui.render.grid import fit
from minitx.tui.render.numbers import short_count
from tests.tui.tui_helpers import model_ready, screen_lines, wait_for


def test_parameter_counts_read_in_thousands_millions_and_billions():
    counts = (812, 4_100, 235_981, 999_950, 11_100_000, 235_092_000, 2_500_000_000)
    shown = {n: short_count(n) for n in counts}
    assert shown == {812: "812", 4_100: "4.1k", 235_981: "236k", 999_950: "1.0M", 11_100_000: "11M",
                     235_092_000: "235M", 2_500_000_000: "2.5B"}


def test_the_current_rows_mark_is_whole_or_a_bare_arrow_at_every_width():
    for width in range(8, 60):
        for columns in range(1, 16):
            layout = fit(["5", "1", "<eos>"], columns, width)
            if layout.visible < columns:
                continue  # a window of columns: a bare arrow after them
            used = layout.label_width + layout.visible * (layout.cell + layout.gap)
            assert layout.mark.strip() in ("◂ step", "◂"), (width, columns, layout.mark)
            assert used + len(layout.mark) <= width or layout.mark == "◂", (width, columns, layout)


def test_the_summary_names_each_difference_once_and_only_whole():
    row = differences([("model.bug", "", "no-causal-mask"), ("training.accuracy", 1.0, 0.0),
                       ("training.bug", "", "no-causal-mask"), ("training.loss", 0.05, 0.01)], 78)
    assert row.plain.split() == ["bug", "–", "no-causal-mask"]
    many = [(f"model.field_{i}", f"value-a-{i}", f"value-b-{i}") for i in range(6)]
    row = differences(many, 78).plain
    names, a, b = row[:LABEL].strip(), row[LABEL:LABEL + COLUMN].strip(), row[LABEL + COLUMN:].strip()
    shown = names.split(" · ")
    b, more = b.split("  (")
    assert more == f"+{6 - len(shown)} more fields differ)"  # in words, not a bare "+5"
    assert a.split(" · ") == [f"value-a-{i}" for i in range(len(shown))]
    assert b.split(" · ") == [f"value-b-{i}" for i in range(len(shown))] and len(row) <= 78


def test_the_summary_says_what_a_differing_field_is():
    """A run of the default recipe against the bundled reverse differs first in how attention is
    computed: the row names the field in words and says how many more differ."""
    diff = [("model.attention", "explicit", "fused"), ("model.d_ff", 256, 128), ("model.dropout", 0.1, 0.0),
            ("model.d_model", 64, 32), ("training.steps", 3000, 300)]
    row = differences(diff, 78).plain
    assert row.startswith("attention kernel") and "explicit" in row and "fused" in row
    assert "more field" in row and "differ)" in row and len(row) <= 78


def test_a_long_name_is_cut_in_its_middle_to_fit_a_panel_title():
    assert middle_cut("reverse", 20) == "reverse"
    cut = middle_cut("reverse-no-causal-mask", 15)
    assert len(cut) == 15 and cut.startswith("reverse") and cut.endswith("l-mask") and "…" in cut


class Boxes(App):
    def compose(self) -> ComposeResult:
        yield TitleBar("Explore")
        yield TopKBars(id="topk")
        yield PositionsView(id="positions")

    CSS = "#topk { width: 26; height: 3; } #positions { width: 46; height: 5; }"


@pytest.mark.asyncio
async def test_the_hints_of_narrow_boxes_fit_whole():
    async with Boxes().run_test(size=(80, 24)) as pilot:
        app = pilot.app
        app.query_one(TopKBars).show([], "→ steps to the first token")
        app.query_one(PositionsView).show(None, [], "rope")
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "→ steps to the first token" in text
        assert "this model adds no positional table;" in text and "and keys of each self-attention" in text
        title = app.query_one(TitleBar)
        title.set_info("reverse without cross:L1.H1, self:L2.H3, enc:L1.H4 · teacher-forced",
                       "reverse without 3 heads · teacher-forced")
        await pilot.pause()
        assert "reverse without 3 heads · teacher-forced" in screen_lines(app)[0]  # never cut by …


@pytest.mark.asyncio
async def test_a_finished_decode_counts_its_own_steps_and_a_stale_error_goes_with_its_text():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        await wait_for(pilot, lambda: screen.stepper.finished, "the first decode")
        output = lambda: str(screen.panel.output.render())  # noqa: E731
        assert "step 6/6" in output()  # 5 digits and <eos>: not the cap of 7
        await pilot.press("x")
        assert "step 0/6" in output()  # seen to its end already: its length is known
        await pilot.press("i")
        screen.query_one("#source").value = ""
        await pilot.press("enter")
        assert screen.query_one("#source-error").display  # "the source is empty"
        await pilot.press("escape")  # the decoded source back in the box: no error about another
        assert not screen.query_one("#source-error").display
        assert screen.set_source("1 2 3")
        assert "step 0 " in output() + " "  # a new source not decoded yet: no bound shown


@pytest.mark.asyncio
async def test_the_log_probabilities_stay_whole_beside_long_pieces():
    async with Boxes().run_test(size=(80, 24)) as pilot:
        bars = pilot.app.query_one(TopKBars)
        bars.show([("▁Bahnhofsvorsteher", 0.6, -0.51), ("▁die", 0.3, -1.2), ("▁x", 0.1, -13.2)])
        await pilot.pause()
        lines = bars.render().plain.splitlines()
        assert all(len(line) <= bars.size.width for line in lines), lines  # nothing cut at the edge
        assert [line.split()[-1] for line in lines] == ["-0.51", "-1.20", "-13.20"]
        assert lines[0].startswith("▁Bahnh") and "…" in lines[0] and lines[1].startswith("▁die ")


@pytest.mark.asyncio
async def test_a_long_models_title_drops_the_device_and_layout_before_cutting_anything():
    from minitx import checkpoints
    from minitx.tui.app.loaded import describe_model

    loaded = checkpoints.load("reverse")
    record = describe_model(loaded.model, loaded.task, "fine-tuned-copy-of-the-model-r16")
    async with Boxes().run_test(size=(80, 24)) as pilot:
        pilot.app.query_one(TitleBar).set_info(*record.summaries)
        await pilot.pause()
        title = screen_lines(pilot.app)[0]
        assert "…" not in title and "fine-tuned-copy-of-the-model-r16 · 236k params" in title
    async with Boxes().run_test(size=(120, 24)) as pilot:  # room for all of it
        pilot.app.query_one(TitleBar).set_info(*record.summaries)
        await pilot.pause()
        assert record.summary in screen_lines(pilot.app)[0] and record.summary.endswith("· cpu")
