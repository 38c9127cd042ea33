"""Compare screen: two checkpoints on one source, stepping in lockstep, with a summary table."""

from __future__ import annotations

import re

import pytest
from textual.widgets import Input, Static

from minitx.tui.app.help import HelpScreen
from minitx.tui.app.main import create_app
from minitx.tui.app.screens import compare as compare_screen
from minitx.tui.app.screens.compare import CompareScreen
from minitx.tui.app.screens.dialogs import OpenCheckpointScreen
from minitx.tui.app.widgets.diffgrid import DiffGrid
from minitx.tui.app.widgets.keybar import KeyBar
from tests.tui.tui_helpers import notifications, screen_lines, wait_for

EOS = 12
REVERSED = [5, 1, 4, 1, 3, EOS]  # "3 1 4 1 5" reversed, then <eos>
COPIED = [3, 1, 4, 1, 5, EOS]


@pytest.fixture
def quick_summary(monkeypatch):
    """Fewer summary sequences for tests that do not look at the summary's numbers."""
    monkeypatch.setattr(compare_screen, "SUMMARY_SEQUENCES", 16)


def compare_app(a: str = "reverse", b: str = "reverse-no-reverse"):
    return create_app([a, b])


async def models_ready(pilot) -> CompareScreen:
    screen = pilot.app.screen
    assert isinstance(screen, CompareScreen)
    await wait_for(pilot, lambda: bool(screen.steppers), "both models to load")
    await pilot.pause()
    return screen


async def summary_ready(pilot) -> CompareScreen:
    screen = await models_ready(pilot)
    await wait_for(pilot, lambda: screen.comparison is not None, "the summary")
    await wait_for(pilot, lambda: pilot.app.model_ready, "the explore model")  # a quiet screen
    await pilot.pause()
    return screen


async def type_source(pilot, text: str) -> None:
    await pilot.press("i")
    source = pilot.app.screen.query_one("#source", Input)
    assert pilot.app.focused is source
    source.value = text
    await pilot.press("enter")
    await pilot.pause()


def tokens(screen) -> tuple[list[int], list[int]]:
    return screen.steppers["A"].tokens, screen.steppers["B"].tokens


@pytest.mark.asyncio
async def test_two_checkpoints_open_compare_with_both_whole_decodes_and_a_summary():
    app = compare_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause()
        assert app.current_mode == "compare"
        screen = await summary_ready(pilot)
        assert not app.screen.query_one("#summary-box").loading
        assert tokens(screen) == (REVERSED, COPIED)
        output = str(screen.query_one("#pair-output").render())
        a_line, b_line = output.splitlines()
        assert a_line.startswith("A reverse") and "✓ correct" in a_line
        assert b_line.startswith("B reverse-no-reverse") and "✗ wrong" in b_line
        assert "expected 5 1 4 1 3" in b_line
        c = screen.comparison
        assert c.a.accuracy > 0.9 and c.b.accuracy < 0.1
        summary = str(screen.query_one("#summary", Static).render())
        assert f"{c.a.accuracy:.1%}" in summary and f"{c.b.accuracy:.1%}" in summary
        bug_row = next(line for line in summary.splitlines() if line.startswith("bug"))
        assert bug_row.split() == ["bug", "–", "no-reverse"]


@pytest.mark.asyncio
async def test_the_difference_grid_marks_rows_whose_tokens_differ(quick_summary):
    app = compare_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await models_ready(pilot)
        diff = screen.query_one("#diff", DiffGrid)
        lines = diff.render().plain.splitlines()
        assert "5≠3" in lines[1] and "1=1" in lines[2] and "3≠5" in lines[5]
        # |A−B| is large where a reverser and a copier look at different source positions.
        assert max(diff.rows[0]) > 0.5
        assert screen.panels["A"].grid.row_labels == ["5", "1", "4", "1", "3", "<eos>"]
        assert screen.panels["B"].grid.row_labels == ["3", "1", "4", "1", "5", "<eos>"]


@pytest.mark.asyncio
async def test_typing_a_source_restarts_both_and_the_step_keys_move_them_together(quick_summary):
    app = compare_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await models_ready(pilot)
        await type_source(pilot, "2 7 1 8")
        a, b = screen.steppers["A"], screen.steppers["B"]
        assert a.src_ids == b.src_ids == [2, 7, 1, 8]
        assert a.finished and b.finished and app.focused is None  # one Enter decodes both
        await pilot.press("x")
        assert (a.position, b.position) == (0, 0)
        await pilot.press("right", "n")
        assert (a.position, b.position) == (2, 2)
        assert tokens(screen) == ([8, 1], [2, 7])
        await pilot.press("left")
        assert (a.position, b.position) == (1, 1)
        await pilot.press("b")
        assert (a.position, b.position) == (0, 0)
        await pilot.press("enter")
        assert a.finished and b.finished
        assert tokens(screen) == ([8, 1, 7, 2, EOS], [2, 7, 1, 8, EOS])
        await pilot.press("x")
        assert (a.position, b.position) == (0, 0)
        await pilot.press("r")
        assert a.finished and b.finished


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_a_model_that_stops_early_waits_at_its_end_while_the_other_goes_on(quick_summary):
    app = compare_app("reverse", "reverse-no-shift")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await models_ready(pilot)
        a, b = screen.steppers["A"], screen.steppers["B"]
        assert a.position == 6 and b.position > 6  # reverse ends at <eos>; no-shift runs on
        await pilot.press("left")
        assert b.position == screen.position and a.position == min(6, screen.position)
        await pilot.press("x", *["right"] * 6)
        assert (a.position, b.position) == (6, 6) and a.finished
        await pilot.press("right")
        assert (a.position, b.position) == (6, 7)
        assert screen.panels["A"].grid.current is None  # A is done
        assert screen.panels["B"].grid.current == 6


@pytest.mark.asyncio
async def test_layer_and_head_keys_change_both_grids_and_the_summary_row(quick_summary):
    app = compare_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await summary_ready(pilot)
        a = screen.panels["A"]
        from minitx.core.interp.alignment import best_head

        layer, head = a.session.layer_index, a.session.head_index
        assert (layer, head) == best_head(a.session.record.scores)  # A's best head
        before = screen.panels["A"].grid.rows
        await pilot.press("right_square_bracket", "full_stop")  # the next layer and head, wrapping
        moved = ((layer + 1) % 2, (head + 1) % 4)
        assert all((p.session.layer_index, p.session.head_index) == moved for p in screen.panels.values())
        for panel in screen.panels.values():
            assert str(panel.grid_box.border_subtitle) == f"L{moved[0] + 1} H{moved[1] + 1}"
        assert screen.panels["A"].grid.rows != before
        summary = str(screen.query_one("#summary", Static).render())
        assert f"alignment L{moved[0] + 1} H{moved[1] + 1}" in summary
        await pilot.press("left_square_bracket", "comma")
        back = {(p.session.layer_index, p.session.head_index) for p in screen.panels.values()}
        assert back == {(layer, head)}
        await pilot.press("number_sign")
        assert screen.panels["A"].grid.numbers
        assert "." in screen.query_one("#diff", DiffGrid).render().plain.splitlines()[1]


@pytest.mark.parametrize("text, message", [("1 x 3", "not a token"), ("   ", "empty")])
@pytest.mark.asyncio
async def test_a_bad_source_is_an_inline_message_and_both_decodes_stay(quick_summary, text, message):
    app = compare_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await models_ready(pilot)
        before = dict(screen.steppers)
        await type_source(pilot, text)
        error = screen.query_one("#source-error", Static)
        assert error.display and message in str(error.render())
        assert screen.steppers == before
        await type_source(pilot, "1 2 3")
        assert not error.display and screen.steppers["A"].src_ids == [1, 2, 3]


@pytest.mark.asyncio
async def test_a_bad_checkpoint_is_a_notification_and_the_pair_on_screen_stays(quick_summary, tmp_path):
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    app = compare_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await models_ready(pilot)
        models = dict(screen.models)
        await pilot.press("2")
        assert isinstance(app.screen, OpenCheckpointScreen)
        path_input = app.screen.query_one("#open-path", Input)
        path_input.focus()
        path_input.value = str(bad)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("cannot open" in m for m in notifications(app)), "failure")
        assert any("broken.safetensors" in m and "still comparing reverse and reverse-no-reverse" in m
                   for m in notifications(app))
        assert screen.models == models and screen.steppers
        await pilot.press("right")  # still usable
        assert app.is_running


@pytest.mark.asyncio
async def test_c_from_explore_compares_the_current_model_with_one_picked_in_the_dialog(quick_summary):
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model_ready, "the explore model")
        await pilot.press("c")
        assert app.current_mode == "compare"
        await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the dialog")
        assert "model B" in str(app.screen.query_one("#open-box").border_title)
        path_input = app.screen.query_one("#open-path", Input)
        path_input.focus()
        path_input.value = "copy"
        await pilot.press("enter")
        screen = await models_ready(pilot)
        assert screen.models["A"].name == "reverse" and screen.models["B"].name == "copy"
        assert tokens(screen) == (REVERSED, COPIED)
        assert "✓" in str(screen.query_one("#pair-output").render()).splitlines()[1]



@pytest.mark.slow  # tier 2: a bad checkpoint as B is tier 1's
@pytest.mark.asyncio
async def test_a_missing_model_b_says_why_on_screen_and_another_can_be_chosen(quick_summary, tmp_path):
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model_ready, "the explore model")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the dialog")
        await pilot.press("escape")
        screen = app.screen
        assert "press 2 to choose model B" in str(screen.query_one("#pair-output").render())
        for name in (str(tmp_path / "nowhere.safetensors"), "copy"):
            await pilot.press("2")
            path_input = app.screen.query_one("#open-path", Input)
            path_input.focus()
            path_input.value = name
            await pilot.press("enter")
            if name != "copy":
                await wait_for(pilot, lambda: any("no such file" in m for m in notifications(app)),
                               "the failure")
                assert "no such file" in str(screen.query_one("#pair-output").render())
                assert not screen.models
        await models_ready(pilot)
        assert screen.models["B"].name == "copy"


@pytest.mark.slow  # tier 2: Explore's help and footer are tier 1's
@pytest.mark.asyncio
async def test_footer_shows_every_compare_key_and_the_help_explains_them(quick_summary):
    app = compare_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await models_ready(pilot)
        bar = app.screen.query_one(KeyBar)
        shown = bar.keys_text()
        for words in ("→/n step", "←/b back", "⏎/r run", "x reset", "[/] layer", ",/. head",
                      "# nums", "i source", "1/2 open A/B", "e explore",
                      "? help", "q quit"):
            assert words in shown
        assert " o open" not in shown and "c compare" not in shown  # o and c do nothing here
        assert bar.size.height <= 2
        await pilot.press("question_mark")  # the help of Compare's own keys
        assert isinstance(app.screen, HelpScreen)
        help_text = str(app.screen.query_one("#help-text").render())
        assert "1/2 open model A / B" in help_text and "knock B's selected head out" in help_text
        assert "Compare: the keys that work here now" in help_text
        await pilot.press("escape", "e")
        assert app.current_mode == "explore"
        assert "c compare" in app.screen.query_one(KeyBar).keys_text()




@pytest.mark.slow  # tier 2: 80x24's labels and numbers are tier 1's
@pytest.mark.asyncio
async def test_at_80_columns_the_difference_grid_narrows_then_hides_so_a_and_b_stay_whole(quick_summary):
    app = compare_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await models_ready(pilot)
        diff, panel = screen.query_one("#diff", DiffGrid), screen.query_one("#diff-box")
        assert diff.cell == 2 and panel.display
        await type_source(pilot, "9 8 7 6 5 4 3")
        await pilot.press("r")
        assert diff.cell == 1 and panel.display
        await type_source(pilot, "1 2 3 4 5 6 7 8 9 0")
        await pilot.press("r")
        await pilot.pause()
        assert not panel.display
        header = screen.panels["A"].grid.render().plain.splitlines()[0]
        assert header.split() == list("1234567890")
        await pilot.resize_terminal(120, 32)  # room again: it comes back
        await pilot.pause()
        await pilot.pause()
        assert panel.display and diff.cell == 2


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_resizing_the_compare_screen_down_to_40x10_never_crashes(quick_summary):
    app = compare_app("reverse", "reverse-no-shift")
    async with app.run_test(size=(100, 32)) as pilot:
        await models_ready(pilot)
        for keys in ((), ("number_sign",), ("x", "right")):
            await pilot.press(*keys)
            for size in ((60, 20), (40, 10), (100, 32)):
                await pilot.resize_terminal(*size)
                await pilot.pause()
        assert app.is_running and app.current_mode == "compare"


# Snapshots: both models and the summary loaded (no loading indicator), nothing focused, no timing.
@pytest.mark.slow  # tier 2: the wider terminal; tier 1 draws Compare at 80x24
def test_compare_a_reverser_with_a_copier_at_100x32(snap_compare):
    assert snap_compare(compare_app("reverse", "reverse-no-reverse"), terminal_size=(100, 32),
                        run_before=summary_ready)


@pytest.mark.slow  # tier 2: a picture; 80x24's labels and numbers are tier 1's
def test_compare_a_reverser_with_a_no_shift_model_mid_decode_at_80x24(snap_compare):
    async def run_before(pilot):
        await summary_ready(pilot)
        await pilot.press("x", "right", "right", "right")

    assert snap_compare(compare_app("reverse", "reverse-no-shift"), terminal_size=(80, 24),
                        run_before=run_before)


@pytest.mark.slow  # tier 2: the full doctor twice (~15 s); tier 1 runs it on one model in Explore
@pytest.mark.asyncio
async def test_d_in_compare_runs_the_doctor_on_both_models(quick_summary):
    from minitx.tui.app.screens.doctor import DoctorScreen

    app = compare_app("reverse", "reverse-no-shift")
    async with app.run_test(size=(80, 24)) as pilot:  # both models' columns fit 80 columns
        screen = await models_ready(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), "the doctor")
        doctor = app.screen
        assert [r.name for r in doctor.records] == [m.name for m in screen.models.values()]
        await wait_for(pilot, lambda: doctor.finished, "the doctor to finish", timeout=180)
        a, b = doctor.results
        assert a.keys() == b.keys() and "trained-unshifted" in a
        assert not [n for n, r in a.items() if r.passed is False]  # A is sound
        assert b["trained-unshifted"].passed is False  # B was trained on its own labels
        assert doctor.diagnoses[1].causes[0].key == "no-shift" and doctor.diagnoses[0].causes == []
        await pilot.pause()
        header = next(line for line in screen_lines(app) if "A measured" in line)
        assert all(f" {word} " in f" {header} " for word in ("check", "threshold", "A", "B measured", "B"))


@pytest.mark.asyncio
async def test_at_80x24_compare_keeps_titles_labels_and_numbers_apart(quick_summary):
    app = compare_app("reverse", "reverse-no-shift")
    async with app.run_test(size=(80, 24)) as pilot:
        await summary_ready(pilot)
        await pilot.press("number_sign")
        lines = screen_lines(app)
        text = "\n".join(lines)
        assert "╭─ A reverse ─" in text and "╭─ B reverse-no-shift ─" in text
        for label in ("exact match", r"alignment L\d H\d", "agree on"):  # the head A's best
            assert re.search(label, text), label
        grid_rows = [line for line in lines if "││" in line and re.search(r"\.\d\d", line)]
        assert grid_rows and not any(re.search(r"\d\.\d\d|\.\d\d\.", line) for line in grid_rows)
        assert all(len(line) <= 80 for line in lines)


@pytest.mark.slow  # tier 2: a picture; # is tier 1's on Explore
def test_compare_with_numbers_at_80x24(snap_compare):
    async def run_before(pilot):
        await summary_ready(pilot)
        await pilot.press("number_sign")

    assert snap_compare(compare_app("reverse", "reverse-no-shift"), terminal_size=(80, 24),
                        run_before=run_before)
