"""Explore screen: typing a source, stepping the decoder, choosing what to look at."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from textual.widgets import Input, Static

from minitx.tui.app.help import HelpScreen
from minitx.tui.app.main import create_app
from minitx.tui.app.screens.dialogs import OpenCheckpointScreen
from minitx.tui.app.widgets.keybar import KeyBar
from tests.tui.tui_helpers import (
    model_ready,
    notifications,
    reverse_checkpoint,
    screen_text,
    tiny_trainer,
    wait_for,
)


async def type_source(pilot, text: str, keystrokes: bool = False) -> None:
    """Edit the source (i), enter `text` (typed key by key, or pasted at once) and press Enter."""
    await pilot.press("i")
    source = pilot.app.screen.query_one("#source", Input)
    assert pilot.app.focused is source
    source.value = "" if keystrokes else text
    if keystrokes:
        await pilot.press(*text)
    await pilot.press("enter")
    await pilot.pause()


def test_importing_the_app_does_not_import_torch():
    code = "import sys, minitx.tui.app.main; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.asyncio
async def test_first_model_load_freezes_what_is_loaded_out_of_the_garbage_collectors_reach():
    import gc

    gc.unfreeze()
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        frozen = gc.get_freeze_count()
        assert frozen > 10_000  # torch and the app: full collections no longer walk them
        app.start_loading("copy")  # a later load leaves the frozen set alone
        await wait_for(pilot, lambda: app.model_ready and app.current.name == "copy", "the copy model")
        assert gc.get_freeze_count() <= frozen  # (frozen objects may still be freed)


@pytest.mark.asyncio
async def test_app_paints_a_loading_indicator_then_opens_the_bundled_model(monkeypatch):
    import threading

    import minitx.tui.app.main

    # Hold the load until the first screen was checked: torch may already be imported by
    # earlier tests, and then loading finishes within a frame.
    release, real_load = threading.Event(), minitx.tui.app.main.load_named
    monkeypatch.setattr(minitx.tui.app.main, "load_named",
                        lambda name, progress=None: release.wait(30) and real_load(name, progress))
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.model_ready
        assert app.screen.panel.main.loading
        # What it waits for is said where the output goes, outside the loading indicator.
        await wait_for(pilot, lambda: "loading reverse…" in str(app.screen.panel.output.render()),
                       "the loading message")
        release.set()
        await model_ready(pilot)
        assert not app.screen.panel.main.loading
        assert "reverse" in app.current.summary


@pytest.mark.asyncio
async def test_first_screen_shows_the_whole_decode_of_the_default_source_on_the_best_head():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(100, 32)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        assert screen.stepper.finished
        assert screen.stepper.tokens[:5] == [5, 1, 4, 1, 3]
        scores = app.current.scores
        session = screen.panel.session
        assert scores[session.layer_index][session.head_index] == max(max(row) for row in scores)
        assert "✓ correct" in str(screen.panel.output.render())


@pytest.mark.asyncio
async def test_one_enter_in_the_source_box_decodes_the_whole_source():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await type_source(pilot, "2 7 1 8", keystrokes=True)
        screen = app.screen
        assert screen.stepper.src_ids == [2, 7, 1, 8]
        assert screen.stepper.finished and screen.stepper.tokens == [8, 1, 7, 2, 12]
        assert "✓ correct" in str(screen.panel.output.render())
        assert not screen.query_one("#source-error").display
        assert app.focused is None  # back on the step keys
        await pilot.press("x", "right")  # and stepping starts over from there
        assert screen.stepper.position == 1


@pytest.mark.parametrize("text, message", [
    ("1 x 3", "not a token"),
    ("   ", "empty"),
    ("7" * 70, "at most"),
])
@pytest.mark.asyncio
async def test_a_bad_source_gets_an_inline_message_and_keeps_the_decoder(text, message):
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        before = app.screen.stepper
        await type_source(pilot, text)
        error = app.screen.query_one("#source-error", Static)
        assert error.display and message in str(error.render())
        assert app.screen.stepper is before
        await type_source(pilot, "1 2 3")
        assert not error.display


@pytest.mark.asyncio
async def test_step_forward_back_run_and_reset_move_through_the_decode():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await type_source(pilot, "3 1 4 1 5")
        stepper = app.screen.stepper
        await pilot.press("x", "right")
        await pilot.press("n")
        assert stepper.position == 2
        recorded = list(stepper.results)  # Enter decoded all of it already
        await pilot.press("left")
        await pilot.press("b")
        assert stepper.position == 0
        await pilot.press("right", "right")
        assert stepper.position == 2
        assert stepper.results == recorded and all(  # replayed, nothing recomputed
            a is b for a, b in zip(stepper.results, recorded))
        await pilot.press("enter")
        assert stepper.finished and stepper.tokens == [5, 1, 4, 1, 3, 12]
        await pilot.press("x")
        assert stepper.position == 0
        await pilot.press("r")
        assert stepper.finished


@pytest.mark.asyncio
async def test_the_grid_has_source_columns_generated_rows_and_marks_the_current_step():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await type_source(pilot, "3 1 4 1 5")
        await pilot.press("x", "right", "right", "right")
        grid = app.screen.panel.grid
        assert grid.columns == ["3", "1", "4", "1", "5"]
        assert grid.row_labels == ["5", "1", "4"]
        assert grid.current == 2
        assert "◂ step" in grid.render().plain.splitlines()[3]
        assert "0.0" in grid.render().plain and "1.0" in grid.render().plain  # the legend
        bars = app.screen.panel.topk.render().plain.splitlines()
        assert bars[0].startswith("4") and "█" in bars[0]  # step 3 chose 4: the top bar


@pytest.mark.asyncio
async def test_layer_and_head_keys_cycle_and_wrap_around():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        layers, heads = app.current.layers, app.current.heads
        panel = screen.panel
        layer, head = panel.session.layer_index, panel.session.head_index
        await pilot.press("right_square_bracket")
        assert panel.session.layer_index == (layer + 1) % layers
        await pilot.press("left_square_bracket")
        assert panel.session.layer_index == layer
        await pilot.press(*["full_stop"] * heads)
        assert panel.session.head_index == head
        await pilot.press("comma")
        assert panel.session.head_index == (head - 1) % heads
        title = panel.grid_box.border_title
        assert f"L{layer + 1} H{(head - 1) % heads + 1}" in str(title)


@pytest.mark.asyncio
async def test_view_keys_switch_between_cross_self_encoder_all_heads_and_numbers():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        grid, heads = screen.panel.grid, screen.panel.heads
        panel = screen.panel.grid_box
        await pilot.press("a")
        assert heads.display and not grid.display
        assert len(heads.grids) == app.current.layers and len(heads.grids[0]) == app.current.heads
        assert "H1 " in heads.render().plain
        await pilot.press("a")
        assert grid.display and not heads.display
        await pilot.press("s")
        assert "decoder self-attention" in str(panel.border_title)
        assert grid.columns[0] == "<sos>"
        await pilot.press("s")
        assert "encoder self-attention" in str(panel.border_title)
        assert grid.columns == grid.row_labels == ["3", "1", "4", "1", "5"]
        await pilot.press("s")
        assert str(panel.border_title).startswith("cross-attention")
        assert "." not in grid.render().plain.splitlines()[1]
        await pilot.press("number_sign")
        assert grid.numbers and "." in grid.render().plain.splitlines()[1]


@pytest.mark.asyncio
@pytest.mark.parametrize("opened, screen_key", [  # tier 1 Explore's; tier 2 Train's and Compare's
    (["reverse"], "e"), pytest.param(["reverse"], "t", marks=pytest.mark.slow),
    pytest.param(["reverse", "reverse-no-shift"], "", marks=pytest.mark.slow)])
async def test_help_lists_every_working_key_of_its_screen_fits_80x24_whole_and_closes(opened, screen_key):
    from minitx.tui.app.help import ANYWHERE_GAP, anywhere, help_text, key_entries

    app = create_app(opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        if screen_key:
            await pilot.press(screen_key)
        else:  # Compare: both models decoded
            await wait_for(pilot, lambda: bool(getattr(app.screen, "steppers", None)), "both models")
        await pilot.pause(0.3)
        under = app.screen
        entries = key_entries(under)
        footer = {app.get_key_display(b.binding) for b in under.active_bindings.values()
                  if b.binding.show and b.enabled and b.binding.action != "help"}
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = screen_text(app)
        for line in help_text(under).plain.splitlines():
            assert line.strip() in shown, line  # every line whole: no scrolling, no wrapped words
        listed = {key for keys, _ in entries for key in re.split(r"/| or ", keys)}
        app_keys = anywhere(under).plain.removeprefix("Anywhere: ").split(ANYWHERE_GAP)
        listed |= {part.split()[0] for part in app_keys}
        assert footer <= listed  # the footer's keys, each with its help, from the same bindings
        assert "esc, ? or q closes this help" in shown  # and how to close it
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.asyncio
async def test_help_leaves_out_a_key_that_does_nothing_here(without_history):
    from minitx.tui.app.help import key_entries

    app = create_app([without_history])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        tooltips = [what for _, what in key_entries(app.screen)]
        assert "replay the probe's attention as it trained" not in tooltips  # h: nothing to replay
        assert "step one token" in tooltips


@pytest.mark.asyncio
async def test_footer_shows_every_explore_key_at_80x24():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        bar = app.screen.query_one(KeyBar)
        shown = bar.keys_text()
        for words in ("→/n step", "←/b back", "⏎/r run", "x reset", "[/] layer", ",/. head",
                      "s attn", "a heads", "l lens", "m rank", "p pos", "k ablate",
                      "K restore", "g teacher", "f force", "w wrong", "P patch", "# nums", "i source",
                      "t train", "o open", "d doctor", "c compare", "? help", "q quit"):
            assert words in shown
        assert bar.size.height <= 3


@pytest.mark.asyncio
async def test_opening_a_bad_file_says_why_and_keeps_the_current_model(tmp_path):
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        before = app.current
        await pilot.press("o")
        assert isinstance(app.screen, OpenCheckpointScreen)
        path_input = app.screen.query_one("#open-path", Input)
        path_input.focus()
        path_input.value = str(bad)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.loading, "the load to fail")
        assert app.current is before
        message = next(m for m in notifications(app) if "cannot open" in m)
        assert message.count("broken.safetensors") == 1  # the path once, not twice


@pytest.mark.asyncio
async def test_open_lists_checkpoints_in_a_folder_and_loads_the_chosen_one(tmp_path):
    tiny = tiny_trainer()
    tiny.train_step()
    tiny.save(tmp_path / "tiny.safetensors")
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("o")
        dialog = app.screen
        dialog.list_folder(str(tmp_path))
        await wait_for(pilot, lambda: any("tiny" in p for p in dialog.paths.values()), "listing")
        key = next(k for k, p in dialog.paths.items() if "tiny" in p)
        option_list = dialog.query_one("#open-list")
        option_list.highlighted = option_list.get_option_index(key)
        option_list.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.model_ready and app.current.name == "tiny.safetensors",
                       "the tiny model")
        # The screen hears of the new model through a signal, delivered on its next message.
        await wait_for(pilot, lambda: app.screen.stepper.model is app.current.model, "the redecode")


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_resizing_down_to_60x20_in_every_view_never_crashes():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(100, 32)) as pilot:
        await model_ready(pilot)
        for keys in ((), ("a",), ("a", "s", "number_sign"), ("t",), ("question_mark",)):
            await pilot.press(*keys)
            for size in ((60, 20), (40, 10), (100, 32)):
                await pilot.resize_terminal(*size)
                await pilot.pause()
        assert app.is_running


@pytest.mark.asyncio
async def test_a_second_checkpoint_is_kept_for_the_compare_view():
    name = reverse_checkpoint()
    app = create_app([name, name])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        assert app.compare_with == name


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_a_missing_first_checkpoint_opened_from_the_app_is_a_message_and_it_stays_usable(tmp_path):
    app = create_app([str(tmp_path / "nowhere.safetensors")])  # as a library: the CLI exits instead
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: not app.loading, "the load to fail")
        assert app.current is None
        # The panel hears of the failure just after `loading` drops: wait for it, do not race it.
        await wait_for(pilot, lambda: "no such file" in str(app.screen.panel.output.render()),
                       "the message in the panel")
        assert any("cannot open" in m for m in notifications(app))
        await pilot.press("right", "a", "s", "number_sign", "right_square_bracket", "enter")
        await pilot.press("t")
        assert app.current_mode == "train"


@pytest.mark.asyncio
async def test_an_unexpected_error_in_a_key_action_is_one_line_not_a_traceback(monkeypatch):
    from minitx.core.interp.decode import Stepper

    def broken(self):
        raise RuntimeError("the decoder fell over")

    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        monkeypatch.setattr(Stepper, "back", broken)
        await pilot.press("left")
        assert app.is_running
        assert "unexpected error: the decoder fell over" in notifications(app)  # no exception's name
        await pilot.press("x", "right")  # the other keys still work
        assert app.screen.stepper.position == 1


@pytest.mark.asyncio
async def test_typing_a_bundled_name_in_the_open_dialog_loads_it_and_a_long_source_is_flagged():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        before = app.current
        await pilot.press("o")
        path_input = app.screen.query_one("#open-path", Input)
        path_input.focus()
        path_input.value = "reverse"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.model_ready and app.current is not before, "reload")
        assert any("now exploring reverse" in m for m in notifications(app))
        await type_source(pilot, "1 2 3 4 5 6 7 8 9 0 1 2")
        assert "longer than trained (10)" in str(app.screen.panel.output.render())


@pytest.mark.asyncio
async def test_a_new_model_never_leaves_the_old_models_decode_on_screen():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await type_source(pilot, "2 7 1")
        await type_source(pilot, "2 7 x")  # a bad source is left in the input
        before = app.current
        app.start_loading("reverse")
        await wait_for(pilot, lambda: app.model_ready and app.current is not before, "reload")
        # The screen hears of the new model through a signal, delivered on its next message.
        await wait_for(pilot, lambda: getattr(app.screen.stepper, "model", None) is app.current.model,
                       "the redecode")
        assert app.screen.stepper.src_ids == [2, 7, 1]


@pytest.mark.asyncio
@pytest.mark.parametrize("names", [["nowhere.safetensors"], ["reverse", "nowhere.safetensors"]])
async def test_a_command_line_checkpoint_that_cannot_be_opened_ends_the_app_with_one_line(
        tmp_path, names, capsys):
    names = [n if n == "reverse" else str(tmp_path / n) for n in names]
    app = create_app(names, exit_on_start_error=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app._exit, "the app to end")
    said = capsys.readouterr().err.strip()
    assert app.return_code == 2  # a usage error, as in every other command
    assert said.startswith("minitx-tui: cannot open") and "no such file" in said
    assert len(said.splitlines()) == 1 and said.count("nowhere.safetensors") == 1
