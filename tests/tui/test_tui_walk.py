"""A new user's waits in the app (issue 49): each long piece of work says so at once. `w` says
it is saving before the file is written; Compare's "choose model B" list says it is looking
while the folder's checkpoints are read; the speed line never rounds a slow run to 0."""

from __future__ import annotations

import threading

import pytest
from textual.widgets import OptionList

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.dialogs import OpenCheckpointScreen
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
    trainer = SimpleNamespace(step_count=0, last_accuracy=None, step_rows=10,
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
