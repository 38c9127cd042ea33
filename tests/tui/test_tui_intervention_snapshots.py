"""Snapshots of the intervention views at 80x24 with the bundled reverse model (deterministic:
seeded measurements, nothing focused, workers awaited). Regenerate with
`pytest tests/tui/test_tui_intervention_snapshots.py --snapshot-update` after a deliberate change."""

from __future__ import annotations

import pytest

from minitx.tui.app import head_ranking
from minitx.tui.app.main import create_app
from minitx.tui.app.screens import compare as compare_screen
from tests.tui.tui_helpers import model_ready, reverse_checkpoint, wait_for

SIZE = (80, 24)


async def knock_out_layer_2(pilot) -> None:
    await model_ready(pilot)
    panel = pilot.app.screen.panel
    while panel.session.layer_index != 1:
        await pilot.press("right_square_bracket")
    for head in range(4):
        while panel.session.head_index != head:
            await pilot.press("full_stop")
        await pilot.press("k")


def snapshot(snap_compare, *keys: str, before=model_ready, app=None) -> bool:
    async def run_before(pilot):
        await before(pilot)
        if keys:
            await pilot.press(*keys)
        await pilot.pause()
        pilot.app.clear_notifications()  # the toasts say what a key did; the picture is the screen
        await pilot.pause()

    return snap_compare(app or create_app([reverse_checkpoint()]), terminal_size=SIZE,
                        run_before=run_before)


def test_explore_with_layer_2s_cross_attention_knocked_out_at_80x24(snap_compare):
    assert snapshot(snap_compare, before=knock_out_layer_2)


def test_explore_logit_lens_mid_decode_at_80x24(snap_compare):
    assert snapshot(snap_compare, "x", "right", "right", "l")


def test_explore_encoder_self_attention_at_80x24(snap_compare):
    assert snapshot(snap_compare, "s", "s", "number_sign")


def test_explore_positional_encoding_at_80x24(snap_compare):
    assert snapshot(snap_compare, "p")


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_interventions.py checks what it shows
def test_explore_teacher_forcing_a_model_without_layer_2s_cross_attention_at_80x24(snap_compare):
    assert snapshot(snap_compare, "g", before=knock_out_layer_2)


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_interventions.py checks what it shows
def test_explore_force_dialog_at_80x24(snap_compare):
    assert snapshot(snap_compare, "left", "left", "left", "f")


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_interventions.py checks what it shows
def test_explore_head_ranking_at_80x24(snap_compare, monkeypatch):
    monkeypatch.setattr(head_ranking, "IMPORTANCE_SEQUENCES", 40)

    async def ranked(pilot):
        await model_ready(pilot)
        await pilot.press("m")
        panel = pilot.app.screen.panel
        await wait_for(pilot, lambda: panel.session.importance is not None, "the ranking")

    assert snapshot(snap_compare, before=ranked)


@pytest.mark.slow  # end to end: tier 2
def test_explore_failures_of_a_model_without_layer_2s_cross_attention_at_80x24(snap_compare):
    async def listed(pilot):
        await knock_out_layer_2(pilot)
        await pilot.press("w")
        await wait_for(pilot, lambda: bool(getattr(pilot.app.screen, "failures", None)), "failures")

    assert snapshot(snap_compare, before=listed)


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_interventions.py checks what it shows
def test_explore_patching_dialog_at_80x24(snap_compare):
    async def patched(pilot):
        await model_ready(pilot)
        await pilot.press("P", "enter")
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "result", None) is not None, "patching")

    assert snapshot(snap_compare, before=patched)


@pytest.mark.slow  # tier 2: a picture; tests/tui/test_tui_interventions.py checks what it shows
def test_compare_b_as_a_without_one_head_at_80x24(snap_compare, monkeypatch):
    monkeypatch.setattr(compare_screen, "SUMMARY_SEQUENCES", 16)

    async def ablated(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.comparison is not None, "the summary")
        await pilot.press("left_square_bracket", "k")
        await pilot.pause(0.2)
        await wait_for(pilot, lambda: screen.comparison is not None, "the summary of B")
        await pilot.press("right_square_bracket")

    assert snapshot(snap_compare, before=ablated, app=create_app(["reverse", "reverse"]))
