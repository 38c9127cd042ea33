"""No run is lost: every quit path asks or saves, a new run never silently replaces the last one
or the explored model, runs are numbered, and a saved run can be continued from the form."""

from __future__ import annotations

import os
import signal

import pytest
from textual.widgets import Static

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.dialogs import ChoiceDialog
from tests.tui.tui_helpers import (
    fill_form,
    key_while_busy,
    model_ready,
    notifications,
    on_train_screen,
    tiny_trainer,
    wait_for,
)


def app_saving_to(folder):
    app = create_app(["reverse"])
    app.save_dir = folder
    return app


async def stopped(pilot, screen) -> None:
    await pilot.press("x")
    await wait_for(pilot, lambda: screen.state == "stopped", "the stop")


async def training(pilot, steps: str = "100000"):
    screen = await on_train_screen(pilot)
    fill_form(screen, steps=steps)
    key_while_busy(pilot, "space")
    await wait_for(pilot, lambda: len(screen.losses) >= 5, "training")
    return screen


def resumable_steps(path) -> int:
    from minitx import checkpoints

    ckpt = checkpoints.load(path)
    assert ckpt.resumable
    return ckpt.summary["steps"]


@pytest.mark.asyncio
# Tier 2 presses each quit key; tier 1 presses q (the others reach the same action).
@pytest.mark.parametrize("key", ["q", pytest.param("ctrl+q", marks=pytest.mark.slow),
                                 pytest.param("ctrl+c", marks=pytest.mark.slow)])
async def test_every_quit_key_while_training_asks_and_s_saves_a_resumable_checkpoint(tmp_path, key,
                                                                                   capsys):
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await training(pilot)
        key_while_busy(pilot, key)
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the question")
        question = app.screen
        asked = question.question_text()
        assert "not saved" in asked and screen.current_run.name in asked
        await pilot.press("s")
        await wait_for(pilot, lambda: app._exit, "the app to close")
        step = screen.current_run.saved_step
    path = tmp_path / "reverse-run1.safetensors"
    assert step and resumable_steps(path) == step
    assert app.return_code == 0
    said = capsys.readouterr().err
    assert f"saved at step {step} to {path}" in said and len(said.strip().splitlines()) == 1


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_esc_at_the_quit_question_keeps_the_app_and_the_run_going(tmp_path):
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await training(pilot)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the question")

        def shown_count() -> int:  # 'quit? run 1 · reverse has 123 steps not saved', as drawn
            words = str(app.screen.query_one("#choice-question", Static).render()).split()
            return int(words[words.index("steps") - 1].replace(",", ""))

        first = shown_count()  # the run trains on behind the question, and the count with it
        await wait_for(pilot, lambda: shown_count() > first, "the question to count on")
        await pilot.press("escape")
        at = screen.trainer.step_count
        await wait_for(pilot, lambda: screen.trainer.step_count > at + 3, "training to go on")
        assert app.is_running and screen.state == "running"
        await pilot.press("x")


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_quit_asks_nothing_once_the_run_is_saved(tmp_path):
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await training(pilot)
        await stopped(pilot, screen)
        await pilot.press("w")
        await pilot.press("q")
        await wait_for(pilot, lambda: app._exit, "the app to close")
        assert not isinstance(app.screen, ChoiceDialog)
    assert resumable_steps(tmp_path / "reverse-run1.safetensors") == screen.trainer.step_count


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["SIGHUP", pytest.param("SIGTERM", marks=pytest.mark.slow)])  # the same path
async def test_a_closed_terminal_or_sigterm_saves_the_run_and_says_where(tmp_path, name):
    number = getattr(signal, name)
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await training(pilot)
        # The app's handler must be installed, or the signal would end the test run itself.
        assert signal.getsignal(number) not in (signal.SIG_DFL, None)
        os.kill(os.getpid(), number)
        await wait_for(pilot, lambda: app._exit, "the app to close")
        step = screen.current_run.saved_step
    assert step and resumable_steps(tmp_path / "reverse-run1.safetensors") == step
    assert signal.getsignal(number) in (signal.SIG_DFL, signal.default_int_handler)  # handed back


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_runs_are_numbered_past_files_an_earlier_session_left(tmp_path):
    (tmp_path / "reverse-run1.safetensors").write_bytes(b"an earlier session's run")
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        assert screen.save_path.name == "reverse-run2.safetensors"
        fill_form(screen, steps="20")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run")
        assert screen.current_run.name == "run 2 · reverse"
        assert "run 2" in str(screen.query_one("#form-note", Static).render())
        await pilot.press("w")
        await pilot.press("space")  # saved: a new run starts without a question
        await wait_for(pilot, lambda: screen.current_run.number == 3, "run 3")
        await wait_for(pilot, lambda: screen.state == "finished", "run 3 to finish")
    assert (tmp_path / "reverse-run1.safetensors").read_bytes() == b"an earlier session's run"


@pytest.mark.asyncio
async def test_space_after_an_unsaved_run_asks_and_neither_answer_replaces_the_explored_model(tmp_path):
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        explored = app.current
        fill_form(screen, steps="20")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "run 1")
        await pilot.press("space")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the question")
        await pilot.press("escape")
        assert screen.current_run.number == 1 and screen.state == "finished"  # kept
        await pilot.press("space")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the question")
        await pilot.press("s")  # save run 1, then start run 2
        await wait_for(pilot, lambda: screen.current_run.number == 2, "run 2")
        assert resumable_steps(tmp_path / "reverse-run1.safetensors") == 20
        await wait_for(pilot, lambda: screen.state == "finished", "run 2 to finish")
        assert app.current is explored  # only u hands a run to Explore


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_the_status_line_and_the_toast_name_the_same_step_a_run_stopped_at(tmp_path):
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await training(pilot)
        await stopped(pilot, screen)
        step = screen.trainer.step_count
        assert f"step {step}/100000" in str(screen.query_one("#stats", Static).render())
        assert any(f"stopped at step {step} " in m for m in notifications(app))
        assert len(screen.losses) == step  # every step's loss reached the picture


@pytest.mark.asyncio
@pytest.mark.slow  # end to end: tier 2
async def test_explore_shows_that_a_run_is_training_and_when_it_stopped(tmp_path):
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await training(pilot)
        await pilot.press("e")
        await wait_for(pilot, lambda: "● run 1" in str(app.screen.query_one("#title-run").render()),
                       "the run in Explore's title")
        title = app.screen.query_one("TitleBar")
        assert "Compare" in str(title.query_one("#title-tabs").render())  # the tabs stay whole
        await pilot.press("t", "x")
        await wait_for(pilot, lambda: screen.state == "stopped", "the stop")
        await pilot.press("e")
        await wait_for(pilot, lambda: "run 1 stopped" in str(app.screen.query_one("#title-run").render()),
                       "the stop in Explore's title")


@pytest.mark.slow  # tier 2: resume from the form of a data run is tier 1's
@pytest.mark.asyncio
async def test_the_form_resumes_the_open_checkpoints_run_from_its_saved_step(tmp_path):
    saved = tiny_trainer(task="copy", steps=12, min_source_len=2, lr=3e-3, warmup=2, seed=7)
    for _ in range(12):
        saved.train_step()
    path = tmp_path / "copy-run.safetensors"
    saved.save(path)
    app = create_app([str(path)])
    app.save_dir = tmp_path  # the continued run saves here, not over the file it came from
    async with app.run_test(size=(100, 32)) as pilot:
        await model_ready(pilot)
        screen = await on_train_screen(pilot)
        form = screen.form
        assert {"like", "resume"} <= set(form.starts)
        form.query_one("#from").value = "like"  # a new run pre-filled from the file
        form.fill()
        assert form.values()["task"] == "copy" and form.values()["lengths"] == "2-6"
        assert form.values()["d_model"] == "16" and form.values()["seed"] == "7"
        form.query_one("#from").value = "resume"
        form.fill()
        assert form.query_one("#d_model").disabled and not form.query_one("#steps").disabled
        await pilot.pause()
        assert "raise steps" in screen.form_error  # 12 of 12: nothing left to train
        form.query_one("#steps").value = "20"
        await pilot.pause()
        assert screen.form_error == ""
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the continued run")
        assert screen.current_run.first_step == 12 and screen.trainer.step_count == 20
        assert screen.trainer.cfg.seed == 7 and screen.trainer.task.name == "copy"
        assert screen.current_run.unsaved_steps == 8


@pytest.mark.asyncio
async def test_the_app_and_the_command_line_name_a_runs_file_the_same_way(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from minitx.tui.cli.main import main

    monkeypatch.chdir(tmp_path)
    tiny = ["--d-model", "16", "--heads", "2", "--layers", "1", "--steps", "2", "--eval-every", "0", "-q"]
    assert CliRunner().invoke(main, ["train", *tiny]).exit_code == 0
    assert [p.name for p in tmp_path.glob("*.safetensors")] == ["reverse-run1.safetensors"]
    app = app_saving_to(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        assert screen.save_path == tmp_path / "reverse-run2.safetensors"  # the next of the same names
