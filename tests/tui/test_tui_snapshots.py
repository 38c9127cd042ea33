"""Snapshots of the main screens at a fixed size with the bundled reverse model.

Deterministic by construction: every snapshot waits for the model (and the train form) to
load, nothing is focused (no cursor), and no training numbers (steps/s, ETA) are shown.
Regenerate with `pytest tests/tui --snapshot-update` after a deliberate change.
"""

from __future__ import annotations

import pytest

from minitx.tui.app.main import create_app
from tests.tui.tui_helpers import (
    fill_form,
    model_ready,
    on_fine_tune_form,
    on_train_screen,
    reverse_checkpoint,
    wait_for,
)


@pytest.mark.slow  # tier 2: the wider terminal; tier 1 draws the same at 80x24
def test_explore_shows_the_anti_diagonal_of_the_best_head_at_100x32(snap_compare):
    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(100, 32),
                        run_before=model_ready)


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_explore.py checks the numbers
def test_explore_mid_decode_with_numbers_at_80x24(snap_compare):
    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("x", "right", "right", "right", "number_sign")

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_decoding.py checks the overview
def test_explore_all_heads_overview_at_80x24(snap_compare):
    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("a")

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_explore.py checks the message
def test_explore_inline_error_for_a_bad_source_at_80x24(snap_compare):
    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("i")
        pilot.app.screen.query_one("#source").value = "3 1 x"
        await pilot.press("enter", "escape")

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


@pytest.mark.slow  # tier 2: a picture; the fine-tune form's is tier 1's
def test_train_form_before_a_run_at_80x24(snap_compare):
    # Fixed form values: the recipe's defaults are tuned elsewhere (and tested elsewhere);
    # this picture is about the layout.
    async def run_before(pilot):
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="3000", batch_size="64", lr="0.001", warmup="400", dropout="0.1",
                  d_model="64", heads="4", layers="2", lengths="4-10")
        await wait_for(pilot, screen.check_holds, "the check of the form's run")  # the note's size

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


def test_train_form_fine_tuning_the_open_model_at_80x24(snap_compare):
    # A fine-tune's own fields (LoRA, keep best, languages, guided alignment) in the rows of
    # the architecture its base decides; no data file yet: the note says the form's one problem.
    async def run_before(pilot):
        await on_fine_tune_form(pilot)
        await pilot.pause()

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


def test_help_screen_at_80x24(snap_compare):
    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("question_mark")

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


def test_explore_decoder_self_attention_at_80x24(snap_compare):
    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("s")

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


@pytest.mark.slow  # tier 2: the wider terminal; tier 1 draws the same at 80x24
def test_train_form_before_a_run_at_100x32(snap_compare):
    async def run_before(pilot):
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="3000", batch_size="64", lr="0.001", warmup="400", dropout="0.1",
                  d_model="64", heads="4", layers="2", lengths="4-10")
        await wait_for(pilot, screen.check_holds, "the check of the form's run")  # the note's size

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(100, 32),
                        run_before=run_before)


@pytest.mark.slow  # tier 2: the wider terminal; tier 1 draws the same at 80x24
def test_help_screen_at_100x32(snap_compare):
    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("question_mark")

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(100, 32),
                        run_before=run_before)


LONG_SOURCE = " ".join("1234567890" * 3)


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_decoding.py checks the window
def test_explore_a_30_token_source_shows_a_window_of_columns_at_80x24(snap_compare):
    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("i")
        pilot.app.screen.query_one("#source").value = LONG_SOURCE
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=run_before)


def test_explore_without_colour_draws_shades_at_80x24(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(80, 24),
                        run_before=model_ready)


@pytest.mark.slow  # tier 2: the wider terminal; tier 1 draws the same at 80x24
def test_explore_all_heads_without_colour_at_100x32(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")

    async def run_before(pilot):
        await model_ready(pilot)
        await pilot.press("a")

    assert snap_compare(create_app([reverse_checkpoint()]), terminal_size=(100, 32),
                        run_before=run_before)
