"""The doctor is reachable from the app: d runs SPEC §7's checks on the model being explored."""

import pytest
from tui_helpers import model_ready, wait_for

from tui.app import create_app


@pytest.mark.asyncio
async def test_d_runs_the_doctor_on_the_explored_model_and_lists_every_check():
    from textual.widgets import DataTable

    from tui.screens.doctor import DoctorScreen

    app = create_app(["reverse"])
    async with app.run_test(size=(100, 32)) as pilot:
        await model_ready(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), "the doctor")
        screen = app.screen
        await wait_for(pilot, lambda: screen.finished, "the doctor to finish", timeout=120)
        table = screen.query_one(DataTable)
        names = [table.get_row_at(i)[0] for i in range(table.row_count)]
        assert "future-leakage-values" in names and "accuracy" in names
        assert all("FAIL" not in str(table.get_row_at(i)[3]) for i in range(table.row_count))
        await pilot.press("escape")
        assert not isinstance(app.screen, DoctorScreen)


@pytest.mark.asyncio
async def test_the_doctor_names_the_cause_for_a_model_that_copies_its_input():
    from textual.widgets import Static

    from tui.screens.doctor import DoctorScreen

    app = create_app(["reverse-no-shift"])
    async with app.run_test(size=(100, 32)) as pilot:
        await model_ready(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DoctorScreen), "the doctor")
        screen = app.screen
        await wait_for(pilot, lambda: screen.finished, "the doctor to finish", timeout=120)
        causes = str(screen.query_one("#doctor-causes", Static).render())
        assert "shifted right" in causes
