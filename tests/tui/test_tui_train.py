"""Train screen: the form, a tiny live run (start, pause, resume, stop), saving, failures."""

from __future__ import annotations

import asyncio
import time

import pytest
from textual.widgets import Input, Static
from tui_helpers import (
    fill_form,
    model_ready,
    notifications,
    on_train_screen,
    reverse_checkpoint,
    wait_for,
)

from minitx.tui.app import create_app
from minitx.tui.screens.dialogs import HelpScreen
from minitx.tui.screens.explore import ExploreScreen
from minitx.tui.widgets.curve_chart import CurveChart


@pytest.mark.asyncio
async def test_the_form_starts_from_the_default_recipe():
    from minitx.core.config import DEFAULT_RECIPE, recipe

    expected = recipe(DEFAULT_RECIPE)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        values = screen.form_values()
        assert int(values["steps"]) == expected.train.steps
        assert int(values["batch_size"]) == expected.train.batch_size
        assert float(values["lr"]) == expected.train.lr
        assert int(values["d_model"]) == expected.model.d_model
        assert values["norm"] == expected.model.norm and values["task"] == expected.train.task
        assert screen.form_error == ""


@pytest.mark.asyncio
@pytest.mark.parametrize("field, value, blamed, words", [
    ("lr", "-1", "lr", "positive"),
    ("steps", "abc", "steps", "whole number"),
    ("heads", "3", "d_model", "divisible"),
])
async def test_a_bad_form_value_gets_an_inline_message_and_blocks_start(field, value, blamed, words):
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        screen.query_one(f"#{field}", Input).value = value
        await pilot.pause()
        message = str(screen.query_one("#form-error", Static).render())
        assert blamed in message and words in message
        assert screen.query_one(f"#{blamed}").has_class("-invalid")
        await pilot.press("space")
        assert screen.state == "idle"


@pytest.mark.asyncio
async def test_start_pause_resume_stop_a_tiny_run_draws_its_curves_and_hands_over_the_model():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="5000")
        await pilot.press("space")
        assert screen.state == "running"
        chart = screen.query_one(CurveChart)
        await wait_for(pilot, lambda: len(screen.losses) >= 10, "ten steps")
        [(_, history)] = chart.runs  # the chart draws the run's own history as it grows
        assert history is screen.trainer.history
        assert history.series("loss")[1][: len(screen.losses)] == screen.losses
        await pilot.press("space")
        assert screen.state == "paused"
        await pilot.pause(0.3)  # let a step in flight land
        held = len(screen.losses)
        await pilot.pause(0.5)
        assert len(screen.losses) == held
        await pilot.press("space")
        await wait_for(pilot, lambda: len(screen.losses) > held + 5, "training to resume")
        stats = str(screen.query_one("#stats", Static).render())
        for words in ("step", "/5000", "loss", "grad", "lr", "steps/s", "ETA"):
            assert words in stats
        await wait_for(pilot, lambda: screen.query_one("#probe").rows, "the probe grid")
        assert screen.query_one("#probe").columns == ["7", "2", "9", "0", "4", "6"]
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.state == "stopped", "the run to stop")
        await wait_for(pilot, lambda: app.current.name.startswith("trained"), "the hand-over")
        assert app.current.model is screen.trainer.model
        assert any("stopped" in m for m in notifications(app))
        await pilot.press("e")
        assert isinstance(app.screen, ExploreScreen)
        await wait_for(pilot, lambda: app.screen.stepper.model is app.current.model, "explore")


@pytest.mark.asyncio
async def test_the_worker_posts_at_most_ten_progress_messages_a_second():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="5000")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.progress_messages >= 1, "first progress")
        start, first = time.monotonic(), screen.progress_messages
        await pilot.pause(1.5)
        rate = (screen.progress_messages - first) / (time.monotonic() - start)
        steps = len(screen.losses)
        await pilot.press("x")
        assert rate <= 11
        assert steps > screen.progress_messages  # several steps per message


@pytest.mark.asyncio
async def test_a_key_press_is_handled_while_training_runs():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="5000")
        await pilot.press("space")
        await wait_for(pilot, lambda: len(screen.losses) >= 5, "training")
        # Time from the key to the help screen being up, polled without the pilot's own
        # "wait until every queue is empty" (never true while progress keeps arriving).
        start = time.monotonic()
        press = asyncio.create_task(pilot.press("question_mark"))
        while not isinstance(app.screen, HelpScreen) and time.monotonic() - start < 5:
            await asyncio.sleep(0.002)
        latency = time.monotonic() - start
        await press
        await pilot.press("escape")
        assert screen.state == "running"
        steps_before = len(screen.losses)
        await wait_for(pilot, lambda: len(screen.losses) > steps_before, "more steps")
        await pilot.press("x")
        assert latency < 0.5, f"a key took {latency:.2f} s while training"


@pytest.mark.asyncio
async def test_save_writes_a_loadable_checkpoint_and_says_where(tmp_path):
    from minitx.core.checkpoint import load_checkpoint

    app = create_app([reverse_checkpoint()])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        await pilot.press("w")
        assert any("nothing to save" in m for m in notifications(app))
        fill_form(screen, steps="30")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run to finish")
        await pilot.press("w")
        await wait_for(pilot, lambda: list(tmp_path.glob("*.safetensors")), "the file")
        path = next(tmp_path.glob("*.safetensors"))
        await wait_for(pilot, lambda: any(str(path) in m for m in notifications(app)), "message")
        assert load_checkpoint(path).summary["steps"] == 30


@pytest.mark.asyncio
async def test_the_form_trains_a_model_with_its_components_swapped():
    from textual.widgets import Select

    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        assert screen.form_values()["kv_heads"] is None  # empty: one K/V head per head
        fill_form(screen, steps="8", heads="4", kv_heads="1")
        for field, value in {"norm_kind": "rms", "activation": "swiglu", "position_encoding": "rope"}.items():
            screen.query_one(f"#{field}", Select).value = value
        await pilot.pause()
        assert screen.form_error == ""
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run to finish")
        cfg = screen.trainer.model.cfg  # the model the run trained (and hands to Explore)
    assert (cfg.norm_kind, cfg.activation, cfg.position_encoding, cfg.n_heads, cfg.kv_heads) == (
        "rms", "swiglu", "rope", 4, 1)


@pytest.mark.asyncio
async def test_k_v_heads_that_do_not_divide_the_heads_are_marked_in_the_form():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        screen.query_one("#kv_heads", Input).value = "3"
        await pilot.pause()
        assert "kv_heads" in screen.form_error and screen.query_one("#kv_heads").has_class("-invalid")
        screen.query_one("#kv_heads", Input).value = ""  # empty again: follows the heads
        await pilot.pause()
        assert screen.form_error == ""


@pytest.mark.asyncio
async def test_a_diverging_run_is_a_notification_not_a_crash(monkeypatch):
    from minitx.core.train import Trainer, TrainingDiverged

    def diverge(self):
        raise TrainingDiverged("training diverged at step 1: loss nan")

    monkeypatch.setattr(Trainer, "train_step", diverge)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="30")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "failed", "the failure")
        assert any("diverged" in m for m in notifications(app))
        assert app.is_running and app.model_ready  # the explore model is untouched
        await pilot.press("space")  # a new run can start after a failure (and fails again)
        await wait_for(pilot, lambda: sum("diverged" in m for m in notifications(app)) == 2,
                       "the second run's failure")


@pytest.mark.asyncio
async def test_switching_screens_with_t_and_e():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("t")
        assert app.current_mode == "train"
        await pilot.press("e")
        assert app.current_mode == "explore"


@pytest.mark.asyncio
async def test_clicking_a_tab_in_the_title_switches_screens():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        tabs = app.screen.query_one("#title-tabs")
        await pilot.click(tabs, offset=(str(tabs.render()).index("Train") + 1, 0))
        await wait_for(pilot, lambda: app.current_mode == "train", "the train screen", timeout=5)


@pytest.mark.asyncio
async def test_space_starts_a_run_even_while_typing_in_the_form():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="20")
        steps = screen.query_one("#steps", Input)
        steps.focus()
        await pilot.press("space")
        assert steps.value == "20"
        assert screen.state in ("running", "finished")
        assert "space start/pause" in screen.query_one("KeyBar").render().plain
        await wait_for(pilot, lambda: screen.state == "finished", "the run")


@pytest.mark.asyncio
async def test_quitting_while_training_stops_the_worker():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="5000")
        await pilot.press("space")
        await wait_for(pilot, lambda: len(screen.losses) >= 3, "training")
        worker = next(w for w in app.workers if w.group == "train")
        await pilot.press("q")
    # The app has closed; the worker sees the cancellation at its next step and ends.
    start = time.monotonic()
    while not worker.is_finished and time.monotonic() - start < 10:
        await asyncio.sleep(0.05)
    assert worker.is_finished and screen.trainer.step_count < 5000
