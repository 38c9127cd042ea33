"""A big model's waits in the app say how far they are and can be left (what a 74M opus-mt-size
folder's 511-step decodes need): the beam view makes its session in a worker, saying greedy's
step, and esc leaves at once, stopping the work; Explore's Enter decodes a frame at a time once a
decode outlasts its first frame, and a key that moves the decode stops it there. The waits are
made long here by hand (a slow preparation, frames of one step), so the bundled models serve."""

from __future__ import annotations

import threading
import time

import pytest

from minitx.tui.app import decode_keys
from minitx.tui.app.main import create_app
from minitx.tui.app.screens.beam import BeamScreen
from tests.tui.tui_helpers import key_while_busy, model_ready, notifications, screen_text, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.asyncio
async def test_the_beam_view_says_greedys_step_while_it_gets_ready_and_esc_leaves_stopping_it():
    stopped = threading.Event()

    def prepare(progress):  # a greedy decode of 100,000 steps at 1 ms each: a wait nobody sits out
        for step in range(1, 100_001):
            time.sleep(0.001)
            if progress(step, 100_000):
                stopped.set()
                return None
        raise AssertionError("the preparation was never told to stop")

    app = create_app(["sort"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await app.push_screen(BeamScreen(prepare=prepare))
        await wait_for(pilot, lambda: "of at most 100000 · esc leaves" in screen_text(app), "its progress")
        assert "getting ready: greedy's output, step" in screen_text(app)
        key_while_busy(pilot, "g")  # a key of the view says why it does nothing yet
        await wait_for(pilot, lambda: any("getting ready" in n for n in notifications(app)), "why not")
        key_while_busy(pilot, "escape")
        took = await wait_for(pilot, lambda: not isinstance(app.screen, BeamScreen), "the view to close")
        assert took < 5
        await wait_for(pilot, stopped.is_set, "the preparation to stop", timeout=5)


@pytest.mark.asyncio
async def test_explore_decodes_a_long_decode_frame_by_frame_and_a_step_key_stops_it(monkeypatch):
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        monkeypatch.setattr(decode_keys, "RUN_AT_ONCE", 1e-9)  # every frame: one step, then a draw
        monkeypatch.setattr(decode_keys, "RUN_FRAME", 0.0)
        screen.action_reset()
        screen.action_run()
        assert screen.position == 1  # the first frame's step, drawn; the rest to come
        await wait_for(pilot, lambda: screen.session.finished, "the decode to its end")
        assert any("a frame at a time" in n for n in notifications(app))
        screen.action_reset()
        screen.action_run()
        screen.action_back()  # a key that moves the decode, before the next frame
        await pilot.pause(0.2)
        assert screen.position == 0 and not screen.session.finished


@pytest.mark.asyncio
async def test_a_knocked_out_head_decodes_again_frame_by_frame_past_its_budget():
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        await wait_for(pilot, lambda: screen.session.finished, "the first decode")
        screen.session.budget = 1e-9  # a change's decode to the end: one step at once, then frames
        screen.action_ablate()
        assert screen.session.position == 1 and screen.session.ablated
        await wait_for(pilot, lambda: screen.session.finished, "the decode without the head")


@pytest.mark.asyncio
async def test_g_on_a_long_hypothesis_says_its_steps_while_a_worker_makes_them(monkeypatch):
    from minitx.core.interp.replay import Replay
    from tests.tui.test_beam_view import searched

    step_all = Replay.step_all

    def slowly(self, progress=None):  # each of the hypothesis's steps a tenth of a second
        def told(done, cap):
            time.sleep(0.1)
            return progress(done, cap) if progress is not None else None
        step_all(self, told)

    app = create_app(["sort"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await searched(pilot)
        monkeypatch.setattr(Replay, "step_all", slowly)
        key_while_busy(pilot, "g")
        await wait_for(pilot, lambda: "the chosen hypothesis's grid: its steps, step" in screen_text(app),
                       "its progress")
        await wait_for(pilot, lambda: screen.session.view == "grid", "the grid")
        await wait_for(pilot, lambda: "cross-attention L" in screen_text(app), "the grid drawn")
