"""The doctor is reachable from the app: d runs the model checks (docs/checks.md) on the explored model."""

import pytest
from textual.widgets import DataTable, Static
from tui_helpers import model_ready, wait_for

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.doctor import DoctorScreen


async def finished_doctor(pilot) -> DoctorScreen:
    """Press d once the model is loaded; returns the dialog after every check has run."""
    await model_ready(pilot)
    await pilot.press("d")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DoctorScreen), "the doctor")
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.finished, "the doctor to finish", timeout=120)
    return screen


@pytest.mark.asyncio
async def test_d_runs_the_doctor_on_the_explored_model_and_lists_every_check():
    app = create_app(["reverse"])
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await finished_doctor(pilot)
        table = screen.query_one(DataTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        names = [row[0] for row in rows]
        assert "future-leakage-values" in names and "accuracy" in names
        assert all("FAIL" not in str(row[3]) for row in rows)
        await pilot.press("escape")
        assert not isinstance(app.screen, DoctorScreen)


@pytest.mark.asyncio
async def test_the_doctor_names_the_cause_for_a_model_that_copies_its_input():
    app = create_app(["reverse-no-shift"])
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await finished_doctor(pilot)
        causes = str(screen.query_one("#doctor-causes", Static).render())
        assert "shifted right" in causes
