"""The app with other vocabularies: dates, a data file trained from the form, long sources at
80x24, and models that cannot be compared."""

from __future__ import annotations

import random

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Input, Static

from minitx.tui.app.main import create_app
from minitx.tui.app.widgets.attention import AttentionGrid
from minitx.tui.app.widgets.choice import ChoiceField
from tests.tui.tui_helpers import fill_form, model_ready, notifications, on_train_screen, wait_for


class GridApp(App):
    """One attention grid as wide as Explore's at 80 columns."""

    def compose(self) -> ComposeResult:
        yield AttentionGrid(id="grid")


def header(grid: AttentionGrid) -> str:
    return grid.render().plain.splitlines()[0]


@pytest.mark.asyncio
async def test_a_40_character_source_shows_every_column_in_explores_grid_width():
    columns = list("the quick brown fox jumps over a lazy do")  # 40 characters
    labels = [c if c != " " else "␣" for c in columns]
    async with GridApp().run_test(size=(46, 20)) as pilot:  # the grid's width at 80 columns
        grid = pilot.app.query_one(AttentionGrid)
        grid.show([[1 / 40] * 40] * 3, labels, ["T", "H", "<eos>"], current=2)
        await pilot.pause()
        assert header(grid).strip() == "".join(labels)  # one character a column, none cropped
        assert "columns" not in grid.render().plain  # no window: everything is on screen
        rows = grid.render().plain.splitlines()
        assert rows[3].lstrip().startswith("eos") and rows[3].rstrip().endswith("◂")


@pytest.mark.asyncio
async def test_a_source_wider_than_the_grid_gets_a_window_that_follows_the_step_and_scrolls():
    columns = [str(i % 10) for i in range(90)]
    async with GridApp().run_test(size=(46, 20)) as pilot:
        grid = pilot.app.query_one(AttentionGrid)
        weights = [0.0] * 90
        weights[70] = 1.0  # the current step attends to column 71
        grid.show([weights], columns, ["x"], current=0)
        await pilot.pause()
        text = grid.render().plain
        start, end = (int(x) for x in text.split("columns ")[1].split(" of")[0].split("-"))
        assert start <= 71 <= end and "of 90 · < > scroll" in text
        grid.scroll_columns(-10)  # by hand: back to the first columns
        await pilot.pause()
        assert "columns 1-" in grid.render().plain


@pytest.mark.asyncio
async def test_explore_on_dates_starts_from_a_date_and_labels_columns_with_its_characters():
    app = create_app(["dates"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await wait_for(pilot, lambda: app.screen.stepper is not None and app.screen.stepper.finished,
                       "the first decode")
        screen = app.screen
        assert screen.query_one("#source", Input).value == "Tuesday, 1 December 2026"
        grid = screen.panel.grid
        assert grid.columns == list("Tuesday,␣1␣December␣2026")
        assert "Tuesday,␣1␣December␣2026" in header(grid)
        output = str(screen.panel.output.render())
        assert "2026-12-01 <eos>" in output and "expected" not in output  # no known answer


def letters_file(path, n=400, seed=3):
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcd") for _ in range(rng.randint(2, 5))) for _ in range(n)]
    path.write_text("".join(f"{w}\t{w.upper()}\n" for w in words), encoding="utf-8")
    return path


@pytest.mark.asyncio
async def test_the_train_form_trains_on_a_data_file_and_explore_takes_free_text_for_it(tmp_path):
    data = letters_file(tmp_path / "letters.tsv")
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="60", data=str(data))
        screen.query_one("#tokens", ChoiceField).value = "char"
        await pilot.pause()
        assert screen.form_error == ""  # the task field says nothing once a file is the task
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run")
        await pilot.press("u")  # hand the run to Explore
        await wait_for(pilot, lambda: app.current.task.name == "data", "the hand-over")
        assert app.current.name.startswith("run 1 · letters")
        await pilot.press("e")
        explore = app.screen
        await wait_for(pilot, lambda: explore.stepper is not None, "a decode")
        held_out = app.current.task.example()
        assert explore.query_one("#source", Input).value == held_out  # not the digits of before
        assert explore.set_source("abcd")
        assert explore.panel.grid.columns == ["a", "b", "c", "d"]
        assert not explore.set_source("abz")  # a letter it never saw: said inline, decode kept
        error = str(explore.query_one("#source-error", Static).render())
        assert "unknown character" in error and "'z'" in error


@pytest.mark.asyncio
async def test_starting_a_run_says_how_its_data_file_was_read_as_train_prints_it(tmp_path):
    data = letters_file(tmp_path / "letters.tsv")
    with data.open("a", encoding="utf-8") as f:
        f.write("ab" * 300 + "\tAB\n")  # longer than the model's positions: skipped, and said
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="2", data=str(data))
        screen.query_one("#tokens", ChoiceField).value = "char"
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run")
        said = [m for m in notifications(app) if "skipped 1 pair longer than the model's positions" in m]
        assert len(said) == 1 and "\n" not in said[0]


@pytest.mark.slow  # tier 2: the form's inline errors are tier 1's
@pytest.mark.asyncio
async def test_a_missing_data_file_is_an_inline_form_error_that_blocks_start(tmp_path):
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        screen.query_one("#data", Input).value = str(tmp_path / "nope.tsv")
        await pilot.pause()
        assert "data:" in screen.form_error and "not a file" in screen.form_error
        assert screen.query_one("#data").has_class("-invalid")
        await pilot.press("space")
        assert screen.state == "idle"


@pytest.mark.asyncio
async def test_a_bad_data_file_fails_the_run_with_one_line_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("ab\tAB\nno tab here\n", encoding="utf-8")
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="20", data=str(bad))
        await pilot.press("space")
        await wait_for(pilot, lambda: any("bad.tsv, line 2" in m for m in notifications(app)), "failure")
        message = next(m for m in notifications(app) if "bad.tsv" in m)
        assert "\n" not in message and "no tab" in message and app.is_running


@pytest.mark.asyncio
async def test_compare_refuses_two_models_of_different_vocabularies_in_one_line():
    app = create_app(["dates", "reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: any("different vocabularies" in m for m in notifications(app)),
                       "the refusal")
        assert app.is_running
