"""A new user's waits in the app (issue 49): each long piece of work says so at once. `w` says
it is saving before the file is written; Compare's "choose model B" list says it is looking
while the folder's checkpoints are read; the speed line never rounds a slow run to 0."""

from __future__ import annotations

import threading

import pytest
from textual.app import App, ComposeResult
from textual.widgets import OptionList

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.dialogs import OpenCheckpointScreen
from minitx.tui.app.widgets.attention import AttentionGrid
from minitx.tui.render.numbers import rate
from tests.tui.tui_helpers import (
    fill_form,
    model_ready,
    notifications,
    on_train_screen,
    reverse_checkpoint,
    wait_for,
)


@pytest.mark.asyncio
async def test_w_says_it_is_saving_before_the_saved_line(tmp_path):
    app = create_app([reverse_checkpoint()])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="12")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run to finish")
        said = len(notifications(app))
        await pilot.press("w")
        path = tmp_path / "reverse-run1.safetensors"
        await wait_for(pilot, lambda: any(m.startswith("saved ") for m in notifications(app)[said:]), "saved")
        after = notifications(app)[said:]
        saving = next(i for i, m in enumerate(after) if m.startswith("saving to ") and path.name in m)
        assert saving < next(i for i, m in enumerate(after) if m.startswith("saved "))


@pytest.mark.asyncio
async def test_the_checkpoint_list_says_it_is_looking_before_the_folder_is_read(monkeypatch):
    from minitx import checkpoints

    release = threading.Event()
    original = checkpoints.list_checkpoints

    def slow_listing(folder=None):
        release.wait(10)  # a folder of large checkpoints: each header read takes a while
        return original(folder)

    monkeypatch.setattr(checkpoints, "list_checkpoints", slow_listing)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("c")  # Compare: choose model B
        await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the B picker")
        await pilot.pause(0.1)
        listed = app.screen.query_one("#open-list", OptionList)
        shown = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
        assert shown == ["looking for checkpoints…"]
        release.set()
        await wait_for(pilot, lambda: listed.option_count > 1, "the listing")
        assert "looking" not in str(listed.get_option_at_index(0).prompt)
        await pilot.press("escape")


def test_a_slow_runs_speed_never_reads_0():
    assert [rate(v) for v in (0.35, 0.0, 3.0, 9.4, 12.6, 1234.4)] == ["0.35", "0", "3", "9.4", "13", "1,234"]


def test_the_ex_per_s_of_a_log_line_is_the_mean_of_the_latest_steps_not_one_steps_swing():
    import io
    from types import SimpleNamespace

    from minitx.core.training.results import StepStats
    from minitx.tui.cli.train_progress import Reporter

    out = io.StringIO()  # no terminal: plain lines
    trainer = SimpleNamespace(step_count=0, last_accuracy=None, step_rows=10, last_scores=None, guide=None,
                              cfg=SimpleNamespace(steps=3, until=0.0))
    reporter = Reporter(trainer, out, quiet=False, log_every=1, metrics=None, resume=False)
    for step, speed in ((1, 10.0), (2, 100.0), (3, 1000.0)):  # 1 s, 0.1 s, 0.01 s for 10 pairs each
        reporter.on_step(trainer, StepStats(step, 1.0, 1.0, 1e-3, speed, 0.0))
    speeds = [line.split("  ")[-1] for line in out.getvalue().splitlines()]
    assert speeds == ["10 ex/s", "18 ex/s", "27 ex/s"]  # 10, 20 and 30 pairs over 1, 1.1, 1.11 s


def test_the_probe_replay_counts_evaluations_and_never_goes_back_in_the_run():
    from types import SimpleNamespace

    import torch

    from minitx.core.history import ProbeRecord, Watched
    from minitx.tui.app.widgets.timeline import Timeline

    records = [ProbeRecord(step, probe, f"source {probe}", "out", "out", [], ["a"], ["b"],
                           torch.ones(1, 1, 1, 1))
               for probe in range(2) for step in (0, 30, 60)]  # 2 probes at 3 evaluations, probe by probe
    timeline = Timeline()
    timeline.show_history(SimpleNamespace(watched=Watched(probes=records), last_step=60, snapshots=None))
    seen = [(timeline.step, timeline.counted())]
    while timeline.step_by(1):
        seen.append((timeline.step, timeline.counted()))
    steps = [step for step, _ in seen]
    assert len(seen) == 6 and steps == sorted(steps)  # → goes forward in the run, every frame once
    assert [counted for _, counted in seen] == [("evaluation", k, 3) for k in (1, 1, 2, 2, 3, 3)]


@pytest.mark.slow  # a fine-tune, then both models decoded and compared in the app: tens of seconds
@pytest.mark.asyncio
async def test_compare_of_a_base_folder_and_its_fine_tune_measures_both_and_starts_from_a_sentence(tmp_path):
    from click.testing import CliRunner

    from minitx.tui.app.screens.compare import CompareScreen
    from minitx.tui.app.widgets.source_bar import DEFAULT_SOURCE, SourceBar
    from minitx.tui.cli.main import main
    from tests.huggingface.changed_folders import write_pairs
    from tests.huggingface.tiny_folders import save_model

    folder = save_model(tmp_path / "opus-tiny", "marian", layers=1, heads=2, d_model=16, d_ff=24)
    pairs = write_pairs(tmp_path / "pairs.tsv", [("the cat", "die katze"), ("a red house", "ein rotes haus"),
                                                 ("good morning", "guten morgen")] * 4)
    tuned = tmp_path / "ft.safetensors"
    result = CliRunner().invoke(main, ["train", "--init", str(folder), "--data", str(pairs), "--valid",
                                       str(pairs), "--steps", "2", "--threads", "1", "--quiet", "--out",
                                       str(tuned)])
    assert result.exit_code == 0, result.output
    app = create_app([str(folder), str(tuned)])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen)
                       and app.screen.comparison is not None, "the comparison", 60)
        screen = app.screen
        assert screen.comparison.n == 12  # the fine-tune's held-out pairs, the base measured on them too
        text = screen.query_one(SourceBar).text
        assert text != DEFAULT_SOURCE and text == screen.models["A"].task.example()
        await pilot.press("c")  # base against fine-tuned
        await wait_for(pilot, lambda: screen.changes is not None, "the changes", 60)
        assert screen.changes.n == 12 and screen.changes.a.bleu is not None


def test_a_models_control_characters_are_escaped_and_an_empty_output_is_said():
    from minitx.tui.app.messages import ProbeLine, Watching
    from minitx.tui.app.widgets.train_views import watching_text
    from minitx.tui.render.model_text import NOTHING, output_text, printable

    assert printable("a\x12b\tc") == "a\\x12b\\x09c" and printable("Haus · ä") == "Haus · ä"
    assert output_text("") == output_text("  ") == NOTHING
    drawn = watching_text(Watching(10, [ProbeLine("the cat", "", "x", []),
                                        ProbeLine("a\x12", "b\x12c", "b", [0])], None, "probes")).plain
    assert drawn.splitlines()[:2] == [f"the cat → {NOTHING}", "a\\x12 → b\\x12c"]
    assert not any(ord(c) < 32 and c != "\n" for c in drawn)


class NarrowGridApp(App):
    def compose(self) -> ComposeResult:
        yield AttentionGrid()


@pytest.mark.asyncio
async def test_a_narrow_grid_says_its_scroll_and_axes_shorter_never_cutting_a_word():
    app = NarrowGridApp()
    async with app.run_test(size=(24, 12)) as pilot:
        grid = app.query_one(AttentionGrid)
        rows = [[0.5, 0.5] for _ in range(20)]  # more rows than 12 lines hold: a scroll line
        grid.show(rows, ["a", "b"], [f"t{i}" for i in range(20)],
                  axes="rows: tokens generated · columns: source tokens")
        await pilot.pause()
        lines = [line.rstrip() for line in grid.render().plain.splitlines()]
        scroll = next(line for line in lines if "↑ ↓" in line)
        assert len(scroll) <= 24 and scroll.endswith("↑ ↓")  # not "rows 1-7 of 20 · ↑ ↓ scr"
        assert lines[-1] == "↓ tokens generated"  # the axes, shortened whole
