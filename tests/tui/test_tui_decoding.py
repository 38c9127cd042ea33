"""What the decode panel shows when it gets hard: a rejected source, a 30-token source at 80
columns, terminals with 16 colours or none, and the views' keys."""

from __future__ import annotations

import re

import pytest
from rich.text import Text
from textual.widgets import Input, Static

from minitx.tui.app.main import create_app
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.app.widgets.output_line import Tokens, elide, fit
from tests.tui.tui_helpers import model_ready, screen_lines, tiny_trainer, wait_for

LONG = " ".join("1234567890" * 5)  # 50 tokens: more than even 1-character cells fit at 80 columns


async def enter_source(pilot, text: str) -> None:
    await pilot.press("i")
    pilot.app.screen.query_one("#source", Input).value = text
    await pilot.press("enter")
    await pilot.pause()


@pytest.mark.asyncio
async def test_a_rejected_source_stays_to_be_fixed_and_esc_shows_the_decoded_one_again_without_the_error():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen, before = app.screen, app.screen.stepper
        box = screen.query_one("#source", Input)
        await enter_source(pilot, "3 1 x")
        assert app.focused is box and box.value == "3 1 x"  # still editing, text kept to fix
        assert "not a token" in str(screen.query_one("#source-error", Static).render())
        await pilot.press("escape")
        assert app.focused is None
        assert box.value == "3 1 4 1 5" and screen.stepper is before  # the box shows the grid's source
        assert not screen.query_one("#source-error").display  # no reason left for a text no longer there


@pytest.mark.asyncio
async def test_s_cycles_the_attention_kind_and_a_shows_or_hides_every_head_of_that_kind():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        panel = app.screen.panel
        for key, shown in (("a", ("heads", "cross")), ("s", ("heads", "self")), ("s", ("heads", "enc")),
                           ("a", ("grid", "enc")), ("s", ("grid", "cross")),
                           ("l", ("lens", "cross")), ("s", ("grid", "self"))):  # s leaves the lens
            await pilot.press(key)
            assert (panel.session.view_mode, panel.session.kind) == shown, key
        assert panel.grid.display and not panel.heads.display


@pytest.mark.asyncio
async def test_a_50_token_source_at_80_columns_shows_a_window_that_follows_the_step_and_scrolls():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await enter_source(pilot, LONG)
        panel = app.screen.panel
        grid = panel.grid
        await pilot.pause()
        assert grid.cropped
        visible = grid.cell_layout().visible
        assert re.search(r"columns \d+-\d+ of 50 · < > scroll", grid.render().plain)
        assert app.screen.query_one(KeyBar).size.height <= 3  # the grid says < >: the footer keeps 3 lines
        await pilot.press("x", "right")  # step 1 of a reverser looks at the last source token
        strongest = max(range(50), key=grid.rows[0].__getitem__)
        assert grid.first_column <= strongest < grid.first_column + visible
        first = grid.first_column
        await pilot.press("less_than_sign")
        assert grid.first_column < first or first == 0
        await pilot.press("greater_than_sign", "greater_than_sign")
        assert grid.first_column > 0
        await pilot.press("r")
        lines = screen_lines(app)
        output = next(line for line in lines if "step " in line and "/" in line)
        assert re.search(r"[✓✗] (correct|wrong)", output)  # the verdict is never what gets cut
        assert all(len(line) <= 80 for line in lines)


@pytest.mark.asyncio
async def test_numbers_in_cells_never_run_together_in_a_cropped_grid():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await enter_source(pilot, LONG)
        await pilot.press("number_sign")
        rows = app.screen.panel.grid.render().plain.splitlines()[1:6]
        assert all(not re.search(r"\d\.\d|\.\d\d\.", row) for row in rows), rows


@pytest.mark.asyncio
@pytest.mark.parametrize("environment, depth", [
    ({"NO_COLOR": "1"}, "none"),
    ({"TERM": "xterm", "COLORTERM": ""}, "16"),
    ({"TERM": "xterm-256color", "COLORTERM": ""}, "full"),
])
async def test_grids_put_the_weights_into_characters_without_enough_colours(monkeypatch, environment, depth):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        assert app.colour_depth == depth
        grid: Text = app.screen.panel.grid.render()
        first_row = grid.plain.splitlines()[1]  # '    5 ...': a reverser's first output looks last
        if depth == "full":
            assert "█" not in first_row and any(s.style and "on #" in str(s.style) for s in grid.spans)
            return
        assert first_row.rstrip().endswith("███") and not any("on #" in str(s.style) for s in grid.spans)
        await pilot.press("a")
        assert "█" in app.screen.panel.heads.render().plain
        await pilot.press("a", "number_sign")
        assert "1.0" in app.screen.panel.grid.render().plain.splitlines()[1]


def test_a_token_list_gives_way_in_the_middle_and_keeps_both_ends():
    tokens = [str(i % 10) for i in range(31)]
    for width in (5, 9, 20, 40):
        shown = elide(tokens, width)
        assert len(shown) <= width and "…" in shown and shown.endswith(tokens[-1])
    assert elide(tokens[:5], 20) == "0 1 2 3 4"
    line = fit([Text("✗ wrong"), "step 31/32", Tokens(tokens), Tokens(tokens, label="expected ")], 78)
    assert line.plain.startswith("✗ wrong  step 31/32") and line.cell_len <= 78
    assert "expected " in line.plain


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (100, 32)])
async def test_the_title_bar_keeps_the_device_and_every_tab(size):
    app = create_app(["reverse"])
    async with app.run_test(size=size) as pilot:
        await model_ready(pilot)
        title = screen_lines(app)[0]
        assert "cpu" in title and title.rstrip().endswith("Explore  Train  Compare")


@pytest.mark.asyncio
async def test_a_message_takes_the_footers_first_lines_and_covers_no_panel():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.pause()
        before = screen_lines(app)
        message = " ".join(["a long message that would have covered the right half of the panels"] * 2)
        app.notify(message, timeout=1.5)
        await wait_for(pilot, lambda: screen_lines(app) != before, "the message")
        lines = screen_lines(app)
        footer = len(app.screen.query_one(KeyBar).render().plain.splitlines())
        assert lines[:-footer] == before[:-footer]  # every panel and border as it was
        assert message in " ".join(line.strip() for line in lines[-footer:])  # whole, wrapped
        assert lines[-1] == before[-1]  # the last line of keys stays
        await wait_for(pilot, lambda: screen_lines(app) == before, "the keys to come back")


@pytest.mark.asyncio
async def test_the_open_dialog_rounds_accuracy_honestly(tmp_path):
    for name, accuracy in (("nearly", 0.996), ("barely", 0.004)):
        trainer = tiny_trainer()
        trainer.last_accuracy, trainer.accuracy_step = accuracy, trainer.step_count  # as if measured
        trainer.save(tmp_path / f"{name}.safetensors")
    app = create_app(["reverse"])
    async with app.run_test(size=(100, 32)) as pilot:
        await model_ready(pilot)
        await pilot.press("o")
        dialog = app.screen
        dialog.list_folder(str(tmp_path))
        await wait_for(pilot, lambda: any("nearly" in p for p in dialog.paths.values()), "the listing")
        options = dialog.query_one("#open-list")
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any("nearly" in label and "99.6%" in label for label in labels)
        assert any("barely" in label and "0.4%" in label for label in labels)
