"""The app at 80x24, as a newcomer walks it: esc leaves every view (and the footer says so), c
compares the model on screen, a message shows once, every head of a 16-head model is listed with
the current one marked, the open dialog keeps a long file name on one line, a tall view names
the keys that scroll it, and the circuit is not found twice."""

from __future__ import annotations

import pytest
from textual.widgets import Input, OptionList

from minitx.tui.app.main import create_app
from minitx.tui.app.messages import ModelLoaded
from minitx.tui.app.screens import circuit as circuit_screen
from minitx.tui.app.screens.circuit import CircuitScreen
from minitx.tui.app.screens.dialogs import OpenCheckpointScreen
from minitx.tui.app.widgets.keybar import KeyBar
from tests.tui.tui_helpers import model_ready, screen_lines, screen_text, tiny_trainer, wait_for


def footer(app) -> str:
    return " ".join(line.plain for line in app.screen.query_one(KeyBar)._lines(80))


@pytest.fixture(scope="module")
def with_history(tmp_path_factory) -> str:
    """A tiny run's file: it has the snapshots h replays and the curves v draws."""
    trainer = tiny_trainer(steps=6)
    trainer.run()
    return str(trainer.save(tmp_path_factory.mktemp("runs") / "tiny.safetensors"))


@pytest.mark.asyncio
async def test_esc_leaves_every_view_of_explore_and_the_footer_names_it(with_history):
    app = create_app([with_history])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await wait_for(pilot, lambda: app.screen.session.stepper is not None, "the decode")
        assert "esc close" not in footer(app)  # nothing to leave on the grid
        for key, view in (("p", "positions"), ("l", "lens"), ("a", "heads"), ("m", "importance")):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen.session.view_mode == view, key
            assert "esc close" in footer(app), key
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen.session.view_mode == "grid", key
        await pilot.press("h")
        await wait_for(pilot, lambda: app.screen.timeline_shown(), "the replay")
        assert "esc close" in footer(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not app.screen.timeline_shown() and app.screen.session.view_mode == "grid"


@pytest.mark.slow  # tier 2: Explore's esc is tier 1's
@pytest.mark.asyncio
async def test_esc_leaves_compare_s_curves_and_views(with_history):
    app = create_app([with_history, with_history])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: bool(screen.steppers), "both models")
        await pilot.press("v")
        assert screen.charts_shown() and "esc close" in footer(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not screen.charts_shown()
        await pilot.press("a")
        assert all(s.view_mode == "heads" for s in screen.sessions())
        await pilot.press("escape")
        await pilot.pause()
        assert all(s.view_mode == "grid" for s in screen.sessions())


@pytest.mark.slow  # tier 2: c from Explore is tier 1's
@pytest.mark.asyncio
async def test_c_compares_the_model_being_looked_at_even_a_run_never_saved():
    """A run handed over from Train has no file: A is still that run, not the bundled model."""
    from minitx.tui.app.loaded import describe_model

    trainer = tiny_trainer(steps=3)
    trainer.run()
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        run = describe_model(trainer.model, trainer.task, "run 1 · reverse · step 3", steps=3)
        app.post_message(ModelLoaded(run))
        await wait_for(pilot, lambda: app.current is run, "the run on screen")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the dialog for B")
        path = app.screen.query_one("#open-path", Input)
        path.focus()
        path.value = "reverse"
        await pilot.press("enter")
        await wait_for(pilot, lambda: getattr(app.screen, "models", None), "both models")
        assert app.screen.models["A"] is run and app.screen.models["B"].name == "reverse"
        await wait_for(pilot, lambda: app.screen.comparison is not None, "the summary")
        assert app.screen.comparison.a.name == "run 1 · reverse · step 3"


@pytest.mark.slow  # tier 2: the footer's message is tier 1's (test_tui_decoding.py)
@pytest.mark.asyncio
async def test_a_message_shows_once_in_the_footer_or_over_a_dialog_never_both():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24), notifications=True) as pilot:  # toasts drawn, as in a terminal
        await model_ready(pilot)
        await pilot.press("g")  # teacher forcing: one message
        await pilot.pause()
        assert [s.text for s in app.said].count("fed the task's answer at every step (teacher forcing)") == 1
        assert not app._notifications  # no toast behind the footer's line
        await pilot.press("question_mark")  # a dialog: the help
        await pilot.pause()
        before = len(app.said)
        app.notify("a message while the help is open")
        await pilot.pause()
        assert len(app.said) == before and len(app._notifications) == 1  # a toast only
        await wait_for(pilot, lambda: "a message while" in screen_text(app), "the toast", timeout=5)
        toast = [y for y, line in enumerate(screen_lines(app)) if "a message while" in line]
        assert toast[0] < 5  # at the top: the dialog's keys are at its foot
        await pilot.press("escape", "o")
        await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the open dialog")
        assert not app._notifications  # the old toast does not stay over the new dialog


@pytest.fixture(scope="module")
def sixteen_heads(tmp_path_factory) -> str:
    """An untrained model of 16 heads a layer: the side panel must list them all."""
    import torch

    from minitx.core.checkpoint import save_checkpoint
    from minitx.core.config import ModelConfig
    from minitx.core.data.tasks import get_task
    from minitx.core.model.transformer import Seq2Seq

    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=32, n_heads=16, d_ff=32, n_encoder_layers=1, n_decoder_layers=2,
                                max_len=16))
    path = tmp_path_factory.mktemp("wide") / "sixteen.safetensors"
    return str(save_checkpoint(path, model, get_task("reverse", 4, 8), {"steps": 0}))


@pytest.mark.slow  # tier 2: 48 heads at 80x24 are tier 1's in tests/tui/test_tui_huggingface.py
@pytest.mark.asyncio
async def test_the_side_panel_lists_every_head_of_a_16_head_model_and_marks_the_current_one(sixteen_heads):
    app = create_app([sixteen_heads])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await wait_for(pilot, lambda: app.screen.session.stepper is not None, "the decode")
        table = app.screen.query_one(".scores")
        shown = str(table.render())
        for head in range(1, 17):
            assert f"H{head}" in shown.split(), head  # every head has a column, in blocks of four
        while app.screen.session.head_index != 13:  # H14
            await pilot.press("full_stop")
        await pilot.pause(0.2)
        side = [line[50:] for line in screen_lines(app)]  # the side panel's column
        marked = [y for y, line in enumerate(side) if "[" in line and "]" in line]
        assert marked, "\n".join(side)  # the current head's score is in view, marked
        header = next(line for line in reversed(side[: marked[0]]) if "H13" in line or "H1 " in line)
        assert header.split()[:5] == ["│", "H13", "H14", "H15", "H16"], header  # in its block of four


@pytest.mark.asyncio
async def test_the_open_dialog_keeps_a_long_file_name_on_one_line(tmp_path, monkeypatch, with_history):
    import shutil

    long = tmp_path / "a-very-long-checkpoint-name-of-some-experiment-with-many-words-run12.safetensors"
    shutil.copy(with_history, long)
    monkeypatch.chdir(tmp_path)
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the dialog")
        listing = app.screen.query_one("#open-list", OptionList)
        await wait_for(pilot, lambda: listing.option_count > 9, "the folder's files")
        listing.highlighted = listing.option_count - 1
        await pilot.pause(0.2)
        line = next(line for line in screen_lines(app) if "run12.safetensors" in line)
        assert "a-very-long" in line and "…" in line and "reverse" in line  # both ends, one line
        assert listing.max_scroll_x == 0  # no sideways scrollbar under the list


@pytest.mark.asyncio
async def test_a_view_taller_than_its_box_names_the_keys_that_scroll_it():
    app = create_app(["dates"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await wait_for(pilot, lambda: app.screen.session.stepper is not None, "the decode")
        await pilot.press("p")
        await pilot.pause(0.2)
        box = app.screen.panel.grid_box
        assert box.max_scroll_y > 0 and box.border_subtitle == "↑↓ scroll"
        await pilot.press("down", "down")
        await pilot.pause()
        assert box.scroll_y == 2
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert box.border_subtitle == ""  # the grid fits


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_opening_the_circuit_again_shows_the_one_found_without_measuring_again(monkeypatch):
    monkeypatch.setattr(circuit_screen, "CIRCUIT_PAIRS", 8)
    monkeypatch.setattr(circuit_screen, "FOUND_SEQUENCES", 20)
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("C")
        await wait_for(pilot, lambda: app.screen.result is not None, "the circuit")
        found = app.screen.result
        await pilot.press("escape")

        def no_second_search(*args, **kwargs):
            raise AssertionError("the circuit was found again")

        monkeypatch.setattr("minitx.core.interp.circuit.find_circuit", no_second_search)
        await pilot.press("C")
        assert isinstance(app.screen, CircuitScreen)
        await wait_for(pilot, lambda: app.screen.result is not None, "the circuit shown again", timeout=2)
        assert app.screen.result is found and "cannot find" not in screen_text(app)
