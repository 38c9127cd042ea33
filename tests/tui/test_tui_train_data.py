"""The Train form with data files and runs trained on them: a new run is checked (its data file
read) before the last run is offered to be dropped; a data run can be continued or copied; the
form shows what a data file decides, its expected pattern and the next run's size; u explores; the
form fits 60x20."""

from __future__ import annotations

import pytest
import torch
from textual.widgets import Input

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.dialogs import ChoiceDialog
from minitx.tui.app.screens.explore import ExploreScreen
from minitx.tui.app.widgets.choice import ChoiceField
from tests.tui.tui_helpers import (
    fill_form,
    notifications,
    on_train_screen,
    reverse_checkpoint,
    screen_lines,
    wait_for,
)


def names_file(path, n=300):
    """'Ana Lee<TAB>Lee, Ana' lines: a task of its own that the digit tasks know nothing of."""
    first, last = ["Ana", "Bo", "Cai", "Dee", "Eli", "Fay"], ["Lee", "Kim", "Park", "Diaz", "Cruz"]
    lines = [f"{first[i % 6]} {last[i // 6 % 5]}{i}\t{last[i // 6 % 5]}{i}, {first[i % 6]}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def data_run(tmp_path_factory):
    """A resumable checkpoint trained on names.tsv for a few steps (a second on a busy core)."""
    from minitx.core.config import ModelConfig, TrainConfig
    from minitx.core.training.trainer import Trainer

    folder = tmp_path_factory.mktemp("data-run")
    data = names_file(folder / "names.tsv")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    trainer = Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                                  max_len=24, dropout=0.0),
                      TrainConfig(task="data", data=str(data), steps=5, batch_size=16, warmup=2, eval_every=5,
                                  device="cpu"))
    trainer.run()
    path = str(trainer.save(folder / "names.safetensors", resumable=True))
    torch.set_num_threads(threads)
    return path, data


def choice(screen, name: str) -> ChoiceField:
    return screen.query_one(f"#{name}", ChoiceField)


async def pick_start(pilot, screen, word: str) -> None:
    """Move `from` until its label has `word` (resume, like)."""
    source = choice(screen, "from")
    for _ in range(len(source.choices)):
        if word in screen.form.start.label:
            return
        source.action_move(1)
        await pilot.pause()
    raise AssertionError(f"no start with {word!r}")


@pytest.mark.slow  # tier 2: a bad data file's one line is tier 1's
@pytest.mark.asyncio
async def test_a_bad_data_file_is_refused_before_the_unsaved_run_is_offered_to_be_dropped(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n", encoding="utf-8")
    app = create_app([reverse_checkpoint()])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="8")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the first run")
        run = screen.current_run
        assert run.unsaved_steps > 0
        screen.query_one("#data", Input).value = str(bad)
        await pilot.press("space")
        await wait_for(pilot, lambda: any("bad.tsv, line 1" in m for m in notifications(app)), "the refusal")
        assert not isinstance(app.screen, ChoiceDialog)  # nothing was offered to be dropped
        assert screen.current_run is run and run.unsaved_steps > 0 and screen.state == "finished"
        assert "bad.tsv, line 1" in screen.form_error and screen.query_one("#data").has_class("-invalid")
        await wait_for(pilot, lambda: "✗ data: " in "\n".join(screen_lines(app)), "the note to say why")
        screen.query_one("#data", Input).value = ""  # a form that can start: now it asks
        await pilot.press("space")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the question")
        await pilot.press("escape")


@pytest.mark.asyncio
@pytest.mark.parametrize("start", ["resume", pytest.param("like", marks=pytest.mark.slow)])  # like: tier 2
async def test_a_run_trained_on_a_data_file_continues_or_is_copied_from_the_form(data_run, start, tmp_path):
    path, data = data_run
    app = create_app([path])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        await pick_start(pilot, screen, start)
        assert choice(screen, "task").value == "data" and screen.query_one("#data", Input).value == str(data)
        assert screen.query_one("#lengths", Input).value == ""  # the file's own lengths
        screen.query_one("#steps", Input).value = "8"
        await pilot.pause()
        assert screen.form_error == ""
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run")
        trainer = screen.trainer
        assert trainer.task.name == "data" and trainer.step_count == 8
        assert screen.current_run.first_step == (5 if start == "resume" else 0)


@pytest.mark.asyncio
async def test_the_form_shows_what_a_data_file_decides_and_the_next_run_s_size(tmp_path):
    data = names_file(tmp_path / "names.tsv")
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        task, lengths = choice(screen, "task"), screen.query_one("#lengths", Input)
        assert task.value == "reverse" and lengths.value == "4-10"
        assert choice(screen, "expect").disabled and choice(screen, "tokens").disabled  # no file yet
        await wait_for(pilot, lambda: "236k params" in str(screen.query_one("#form-note").render()),
                       "the size of the default run")
        screen.query_one("#data", Input).value = str(data)
        await pilot.pause()
        assert task.value == "data" and task.disabled and lengths.value == "" and lengths.disabled
        assert not choice(screen, "expect").disabled
        assert "held-out pair" in screen.query_one("#probe_source", Input).placeholder  # not digits
        choice(screen, "expect").value = "anti-diagonal"
        screen.validate_form()
        note = screen.query_one("#form-note")
        # The names' vocabulary is the model's: counted once the file is read.
        await wait_for(pilot, lambda: "params" in str(note.render()) and "236k" not in str(note.render()),
                       "the size of the data run")
        assert screen.form_configs[1].expect == "anti-diagonal"
        screen.query_one("#data", Input).value = ""  # back to the task it was
        await pilot.pause()
        assert task.value == "reverse" and lengths.value == "4-10" and not lengths.disabled


@pytest.mark.asyncio
async def test_u_hands_the_ended_run_to_explore_and_goes_there(tmp_path):
    app = create_app([reverse_checkpoint()])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="6")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run")
        await pilot.press("u")
        await wait_for(pilot, lambda: app.current is screen.ended_record, "the hand-over")
        assert isinstance(app.screen, ExploreScreen)


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_at_60x20_every_field_of_the_form_shows_its_whole_value():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(60, 20)) as pilot:
        screen = await on_train_screen(pilot)
        await pilot.pause()
        rows = "\n".join(screen_lines(app)[1:1 + screen.form.styles.grid_size_rows])
        for shown in ("until 0.999", "◂recipe fast▸", "◂reverse▸", "◂cosine▸", "◂sinusoidal▸", "◂layer▸",
                      "◂post▸", "◂relu▸", "◂auto▸", "◂char▸", "◂none▸", "lengths 4-10", "lr 0.003"):
            assert shown in rows, f"{shown!r} is cut at 60x20:\n{rows}"
        assert screen.form.columns == 3


@pytest.mark.asyncio
async def test_explore_checks_a_held_out_pair_and_w_counts_the_held_out_pairs_it_decodes(data_run):
    from minitx.tui.app.screens.dialogs import FailuresScreen

    app = create_app([data_run[0]])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model_ready and app.screen.stepper is not None
                       and app.screen.stepper.finished, "the first decode")
        screen, task = app.screen, app.current.task
        held = task.example()  # the first held-out pair's source: the checkpoint has its target
        answer = task.vocab.labels(task.expected_output(task.parse(held)))
        output = str(screen.panel.output.render())
        assert ("✓ correct" in output or "✗ wrong" in output) and "expected " + "".join(answer) in output
        assert screen.set_source("Ana Lee")  # typed, not held out: no verdict, no expected output
        screen.action_run()
        output = str(screen.panel.output.render())
        assert "done" in output and "expected" not in output
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, FailuresScreen)
                       and "wrong" in str(app.screen.query_one("#failures-summary").render()), "the failures")
        summary = str(app.screen.query_one("#failures-summary").render())
        assert " of 100 held-out pairs wrong" in summary  # 300 pairs: 100 held out, not "of 500"


@pytest.mark.asyncio
async def test_a_long_reason_for_a_refused_source_shows_whole_at_80x24(data_run):
    app = create_app([data_run[0]])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model_ready and app.screen.stepper is not None, "the model")
        assert not app.screen.set_source("QX!@#$%^&*1234567890")
        await pilot.pause()
        text = " ".join(line.strip() for line in screen_lines(app))
        assert "unknown characters for this model:" in text and "`minitx inspect` lists them)" in text


@pytest.mark.asyncio
async def test_a_typed_source_with_a_character_met_only_in_targets_decodes_with_a_warning(data_run):
    app = create_app([data_run[0]])  # names.tsv: "Lee0, Ana" has its comma in targets only
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model_ready and app.screen.stepper is not None, "the model")
        assert app.screen.set_source("Ana Lee")
        assert not [n for n in notifications(app) if "only in targets" in n]
        assert app.screen.set_source("Lee, Ana")  # decoded all the same, and the reason said
        warned = [n for n in notifications(app) if "only in targets" in n]
        assert len(warned) == 1 and "','" in warned[0]
        assert app.screen.shown_source() == "Lee, Ana"
