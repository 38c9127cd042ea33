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
