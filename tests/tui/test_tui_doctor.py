"""The doctor is reachable from the app: d runs the checks of docs/checks.md on the explored model,
code checks and weight checks under their own headings, and the dialog fits 80x24: the report
scrolls inside it with the keys its footer names, and the footer stays on screen."""

import pytest

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.doctor import DoctorScreen
from tests.tui.tui_helpers import model_ready, screen_lines, wait_for


async def finished_doctor(pilot) -> DoctorScreen:
    """Press d once the model is loaded; returns the dialog after every check has run."""
    await model_ready(pilot)
    await pilot.press("d")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DoctorScreen), "the doctor")
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.finished, "the doctor to finish", timeout=120)
    await pilot.pause()
    return screen


def dialog_lines(app) -> list[str]:
    """The screen's lines inside the doctor dialog's border."""
    lines = screen_lines(app)
    top = next(i for i, line in enumerate(lines) if "doctor" in line and "╭" in line)
    bottom = next(i for i in range(top + 1, len(lines)) if "╰" in lines[i])
    return [line.strip().strip("│").strip() for line in lines[top + 1:bottom]]


@pytest.fixture
def without_the_overfit_check(monkeypatch):
    """The dialog's layout and its verdict, without the seconds of the overfit check (it shows as
    skipped, as in --quick); tier 2 runs the whole doctor in the app."""
    from minitx.core.doctor import diagnosis
    from minitx.core.doctor.code_checks import skipped

    monkeypatch.setattr(diagnosis, "check_overfit_one_batch",
                        lambda model, task: skipped("overfit-one-batch", "a fresh model fits one batch",
                                                    "< 0.01", "left out by this test"))


@pytest.mark.slow  # tier 2: the whole doctor, overfit check included (~15 s); tier 1 the 80x24 one
@pytest.mark.asyncio
async def test_d_runs_the_doctor_on_the_explored_model_and_lists_every_check_by_kind():
    app = create_app(["reverse"])
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await finished_doctor(pilot)
        results = screen.results[0]
        assert {"future-leakage-values", "accuracy", "trained-without-mask", "source-use"} <= set(results)
        assert {r.kind for r in results.values()} == {"code", "weights"}
        assert not [name for name, r in results.items() if r.passed is False]
        assert screen.diagnoses[0].verdict == "no problems found"
        lines = dialog_lines(app)
        assert lines[1].startswith("code checks: does minitx's forward pass with this config have a bug?")
        assert "esc closes" in lines[-1]
        seen = []  # the report page by page, as PgDn shows it
        for _ in range(12):
            seen += dialog_lines(app)
            await pilot.press("pagedown")
            await pilot.pause()
        assert "weight checks: were these weights trained under a bug?" in seen
        await pilot.press("end")
        await pilot.pause()
        assert "reverse: no problems found" in "\n".join(dialog_lines(app))
        await pilot.press("escape")
        assert not isinstance(app.screen, DoctorScreen)


@pytest.mark.asyncio
async def test_at_80x24_the_doctor_fits_scrolls_and_keeps_its_footer_with_the_cause_at_the_end(
        without_the_overfit_check):
    app = create_app(["reverse-no-shift"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await finished_doctor(pilot)
        lines = dialog_lines(app)
        header = next(line for line in lines if "measured" in line)
        for word in ("check", "measured", "threshold", "note"):  # whole, none cut at the edge
            assert f" {word}" in f" {header} "
        rows = [line for line in lines if line.split()[:1] in (["pass"], ["FAIL"], ["skip"])]
        assert rows and all(line.split()[1] in screen.results[0] for line in rows)  # names whole
        assert "↑↓ PgUp PgDn scroll" in lines[-1] and "esc closes" in lines[-1]
        assert not any("likely cause" in line for line in lines)  # the end is further down
        await pilot.press("end")
        await pilot.pause()
        lines = dialog_lines(app)
        text = " ".join(" ".join(lines).split())
        assert "likely cause" in text and "target not shifted right" in text
        assert "weights: trained-unshifted:" in text  # the kind of evidence and the check behind it
        assert "↑↓ PgUp PgDn scroll" in lines[-1]  # the footer is still there
        assert screen.diagnoses[0].causes[0].key == "no-shift"


def test_narrower_than_80_each_checks_note_has_lines_of_its_own_under_it():
    """At 60 columns the note column had three cells: a word a line. Narrower than 80, a note
    goes under its check, whole, and the rows keep their columns."""
    from rich.console import Console

    from minitx.core.doctor.code_checks import CheckResult

    screen = DoctorScreen([type("Record", (), {"name": "reverse"})()])
    notes = {"initial-loss": "4 inits: 3.07 to 3.38", "overfit-one-batch": "first grad norm 5.44"}
    for name, value in (("initial-loss", 3.222), ("future-leakage-values", 0.0),
                        ("overfit-one-batch", 7.2e-5)):
        screen.results[0][name] = CheckResult(name, "", value, "< 0.01", True, detail=notes.get(name, ""))
        screen.order.append(name)
    console = Console(width=56, record=True, color_system=None)
    console.print(screen._notes_below("code", 11))
    lines = console.export_text().splitlines()
    assert ["check", "measured", "threshold"] in [line.split() for line in lines]
    for name, note in notes.items():
        row = next(i for i, line in enumerate(lines) if line.split()[1:2] == [name])
        assert lines[row + 1].strip() == note
    at = [line.index("< 0.01") for line in lines if "< 0.01" in line]
    assert len(at) == 3 and len(set(at)) == 1  # the rows keep one column for it
