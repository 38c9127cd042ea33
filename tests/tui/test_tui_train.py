"""Train screen: the form, a tiny live run (start, pause, resume, stop), saving, failures."""

from __future__ import annotations

import asyncio
import time

import pytest
from textual.widgets import Input, Static

from minitx.tui.app.form_fields import FIELDS, FINE_TUNE_FIELDS
from minitx.tui.app.help import HelpScreen
from minitx.tui.app.main import create_app
from minitx.tui.app.screens.dialogs import ChoiceDialog
from minitx.tui.app.screens.explore import ExploreScreen
from minitx.tui.app.widgets.curve_chart import CurveChart
from tests.tui.tui_helpers import (
    fill_form,
    model_ready,
    notifications,
    on_train_screen,
    reverse_checkpoint,
    screen_text,
    wait_for,
)


@pytest.mark.asyncio
async def test_the_form_starts_from_the_default_recipe():
    from minitx.core.config import DEFAULT_RECIPE, recipe

    expected = recipe(DEFAULT_RECIPE)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        values = screen.form.values()
        assert int(values["steps"]) == expected.train.steps
        assert int(values["batch_size"]) == expected.train.batch_size
        assert float(values["lr"]) == expected.train.lr
        assert int(values["d_model"]) == expected.model.d_model
        assert values["norm"] == expected.model.norm and values["task"] == expected.train.task
        assert screen.form_error == ""


@pytest.mark.asyncio
@pytest.mark.parametrize("field, value, blamed, words", [  # tier 1: a field's own, and one blamed on another
    pytest.param("lr", "-1", "lr", "positive", marks=pytest.mark.slow),
    ("steps", "abc", "steps", "whole number"),
    ("heads", "3", "d_model", "divisible"),
    pytest.param("lengths", "10-4", "lengths", "MIN <= MAX", marks=pytest.mark.slow),
    pytest.param("lengths", "four", "lengths", "MIN-MAX", marks=pytest.mark.slow),
])
async def test_a_bad_form_value_gets_an_inline_message_and_blocks_start(field, value, blamed, words):
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        screen.query_one(f"#{field}", Input).value = value
        await pilot.pause()
        message = str(screen.query_one("#form-note", Static).render())
        assert blamed in message and words in message
        assert screen.query_one(f"#{blamed}").has_class("-invalid")
        await pilot.press("space")
        assert screen.state == "idle"


@pytest.mark.slow  # end to end: tier 2 (a run started from the form: test_tui_runs, test_exports)
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
        shown = screen_text(app)  # at 80x24 every number of the run is on screen, none cut
        for words in ("step", "/5000", "loss", " grad ", " lr ", "steps/s", "ETA"):
            assert words in shown
        await wait_for(pilot, lambda: screen.query_one("#probe").rows, "the probe grid")
        assert screen.query_one("#probe").columns == ["7", "2", "9", "0", "4", "6"]
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.state == "stopped", "the run to stop")
        assert any("stopped" in m for m in notifications(app))
        await pilot.pause(0.3)
        assert app.current.name == "reverse"  # nothing replaces the explored model unasked
        assert "u explore run" in screen.query_one("KeyBar").keys_text()
        await pilot.press("u")
        await wait_for(pilot, lambda: app.current.name.startswith("run 1 · reverse"), "the hand-over")
        assert app.current.model is screen.trainer.model
        await pilot.press("e")
        assert isinstance(app.screen, ExploreScreen)
        await wait_for(pilot, lambda: app.screen.stepper.model is app.current.model, "explore")


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
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
@pytest.mark.slow  # end to end: tier 2
async def test_a_key_press_is_handled_while_training_runs():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="500000")  # never ends before the keys below
        await pilot.press("space")
        await wait_for(pilot, lambda: len(screen.losses) >= 5, "training")
        # The help comes up while progress keeps arriving, polled without the pilot's own "wait
        # until every queue is empty" (never true while training); how fast is benchmarks' question.
        start = time.monotonic()
        press = asyncio.create_task(pilot.press("question_mark"))
        while not isinstance(app.screen, HelpScreen) and time.monotonic() - start < 5:
            await asyncio.sleep(0.002)
        assert isinstance(app.screen, HelpScreen)
        await press
        await pilot.press("escape")
        assert screen.state == "running"
        steps_before = len(screen.losses)
        await wait_for(pilot, lambda: len(screen.losses) > steps_before, "more steps")
        await pilot.press("x")


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
        path = tmp_path / "reverse-run1.safetensors"
        assert screen.save_path == path
        note = str(screen.query_one("#form-note", Static).render())
        assert str(path) in note or "reverse-run1.safetensors" in note  # said before saving
        assert not path.exists()
        await pilot.press("w")
        await wait_for(pilot, lambda: path.exists(), "the file")
        await wait_for(pilot, lambda: any(str(path) in m for m in notifications(app)), "message")
        assert load_checkpoint(path).summary["steps"] == 30
        assert "saved at step 30" in str(screen.query_one("#form-note", Static).render())


@pytest.mark.slow  # tier 2: swapped components train in tier 1's tests/core/test_components.py
@pytest.mark.asyncio
async def test_the_form_trains_a_model_with_its_components_swapped():
    from minitx.tui.app.widgets.choice import ChoiceField

    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        assert screen.form.values()["kv_heads"] is None  # empty: one K/V head per head
        fill_form(screen, steps="8", heads="4", kv_heads="1")
        for field, value in {"norm_kind": "rms", "activation": "swiglu", "position_encoding": "rope"}.items():
            screen.query_one(f"#{field}", ChoiceField).value = value
        await pilot.pause()
        assert screen.form_error == ""
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run to finish")
        cfg = screen.trainer.model.cfg  # the model the run trained (and hands to Explore)
    assert (cfg.norm_kind, cfg.activation, cfg.position_encoding, cfg.n_heads, cfg.kv_heads) == (
        "rms", "swiglu", "rope", 4, 1)


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_the_form_gives_its_rows_to_the_chart_while_a_run_goes_and_comes_back_when_it_ends():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        panel, keys = screen.query_one("#curves-panel"), screen.query_one("KeyBar")
        before = panel.size.height + keys.size.height  # the footer lists the keys that work: x, u...
        fill_form(screen, steps="100000")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "running" and screen.losses, "training")
        await pilot.pause()
        assert not screen.form.display and panel.size.height + keys.size.height >= before + 6  # its rows
        assert "run 1" in screen_text(app).splitlines()[0]  # the title bar names the run meanwhile
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.state == "stopped", "the stop")
        await pilot.pause()
        assert screen.form.display and panel.size.height + keys.size.height == before
        assert screen.form.values()["steps"] == "100000"  # as the run left it, for the next one


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
    from minitx.core.training.trainer import Trainer, TrainingDiverged

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


@pytest.mark.slow  # tier 2: t and e are pressed in most tier-1 tests
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
@pytest.mark.slow  # end to end: tier 2
async def test_clicking_a_tab_in_the_title_switches_screens():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        tabs = app.screen.query_one("#title-tabs")
        await pilot.click(tabs, offset=(str(tabs.render()).index("Train") + 1, 0))
        await wait_for(pilot, lambda: app.current_mode == "train", "the train screen", timeout=5)


@pytest.mark.asyncio
async def test_space_types_in_a_text_field_and_enter_there_starts_the_run():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="20")
        steps = screen.query_one("#steps", Input)
        steps.focus()
        await pilot.press("end", "space")
        assert steps.value == "20 " and screen.state == "idle"
        await pilot.press("backspace", "enter")
        assert screen.state in ("running", "finished")
        assert "space start/pause" in screen.query_one("KeyBar").keys_text()
        await wait_for(pilot, lambda: screen.state == "finished", "the run")


@pytest.mark.slow  # tier 2: a text field's space and enter are tier 1's
@pytest.mark.asyncio
async def test_space_types_in_the_probe_field_and_enter_starts_the_run():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="20", probe_source="")
        probe = screen.query_one("#probe_source", Input)
        probe.focus()
        await pilot.press("3", "space", "1", "space", "4", "space", "1")
        assert probe.value == "3 1 4 1" and screen.state == "idle"
        await pilot.press("enter")
        assert screen.state in ("running", "finished")
        await wait_for(pilot, lambda: screen.state == "finished", "the run")
        assert screen.trainer.probe_ids == [3, 1, 4, 1]


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_quitting_without_the_run_after_asking_stops_the_worker_and_writes_nothing(tmp_path):
    app = create_app([reverse_checkpoint()])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="5000")
        await pilot.press("space")
        await wait_for(pilot, lambda: len(screen.losses) >= 3, "training")
        worker = next(w for w in app.workers if w.group == "train")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the question")
        await pilot.press("d")
    # The app has closed; the worker sees the stop (or the cancellation) at its next step.
    start = time.monotonic()
    while not worker.is_finished and time.monotonic() - start < 10:
        await asyncio.sleep(0.05)
    assert worker.is_finished and screen.trainer.step_count < 5000
    assert not list(tmp_path.iterdir())


@pytest.mark.slow  # tier 2: the form's fields are tier 1's
@pytest.mark.asyncio
async def test_choices_change_with_arrow_keys_in_place_and_the_edited_field_is_marked():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        task = screen.query_one("#task")
        task.focus()
        await pilot.pause()
        row = task.parent
        assert row.has_class("-editing")
        assert "reverse" in str(row.query_one(".field-label").rich_style)  # label reversed
        before = task.value
        await pilot.press("right")
        assert task.value != before and screen.form.values()["task"] == task.value
        assert screen.form_error == ""
        # Nothing opened over the form: every label of it is still on screen.
        form_rows = "\n".join(screen_text(app).splitlines()[1:1 + screen.form.styles.grid_size_rows])
        shown = [label for name, label in FIELDS.items() if name not in FINE_TUNE_FIELDS]  # a fine-tune's
        assert all(f" {label} " in form_rows for label in ("from", *shown))
        await pilot.press("escape")
        assert not row.has_class("-editing") and app.focused is None
