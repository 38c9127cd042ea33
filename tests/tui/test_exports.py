"""The export key (E): on every screen one key saves the screen as SVG and the numbers behind
the view on it as CSV or JSON into ./minitx-exports/, and a note names the files. (Through a
browser under `minitx serve` the same key downloads them: tests/tui/test_serve.py and
test_serve_browser.py.)"""

from __future__ import annotations

import csv
import io
import json

import pytest
from textual.widgets import Input

from minitx.tui.app import head_ranking
from minitx.tui.app.exports import save
from minitx.tui.app.help import help_text
from minitx.tui.app.main import create_app
from minitx.tui.app.screens import compare as compare_screen
from minitx.tui.app.screens.doctor import DoctorScreen
from minitx.tui.app.screens.patch import PatchScreen
from tests.tui.test_tui_curves import two_runs  # noqa: F401 - two tiny runs with history
from tests.tui.tui_helpers import model_ready, notifications, on_train_screen, reverse_checkpoint, wait_for


@pytest.fixture
def in_folder(tmp_path, monkeypatch):
    """The app runs in an empty folder: its exports go into ./minitx-exports/ there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / "minitx-exports"


async def export(pilot) -> dict[str, str]:
    """Press E; the files it wrote (suffix -> text), checked against the note that names them."""
    folder = pilot.app.export_dir
    before = set(folder.glob("*")) if folder.exists() else set()
    await pilot.press("E")
    await pilot.pause()
    written = sorted(set(folder.glob("*")) - before)
    note = notifications(pilot.app)[-1]
    assert written and note.startswith("saved ") and "./minitx-exports/" in note
    assert all(path.name in note for path in written)
    assert len({path.stem for path in written}) == 1  # the picture and its numbers share a name
    return {path.suffix: path.read_text(encoding="utf-8") for path in written}


def matrix(text: str) -> tuple[list[str], list[str], list[list[float]]]:
    header, *rows = list(csv.reader(io.StringIO(text)))
    return header, [r[0] for r in rows], [[float(v) for v in r[1:]] for r in rows]


@pytest.mark.asyncio
async def test_e_saves_explore_as_svg_and_the_grid_s_weights_as_csv_in_minitx_exports(in_folder):
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        files = await export(pilot)
        session = app.screen.session
        expected = session.stepper.cross_attention_grid(session.layer_index, session.head_index).tolist()
    assert set(files) == {".svg", ".csv"} and in_folder.is_dir()
    shown = f"cross-attention · L{session.layer_index + 1} H{session.head_index + 1}"  # the best head
    assert shown in files[".svg"].replace("&#160;", " ")
    header, rows, weights = matrix(files[".csv"])
    assert header == ["output\\source", "3", "1", "4", "1", "5"]
    assert rows == ["5", "1", "4", "1", "3", "<eos>"]
    assert [len(row) for row in weights] == [len(row) for row in expected]
    assert sum(weights, []) == pytest.approx(sum(expected, []), abs=1e-6)


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_each_explore_view_saves_the_numbers_it_shows(in_folder, monkeypatch):
    monkeypatch.setattr(head_ranking, "IMPORTANCE_SEQUENCES", 16)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        session = app.screen.session
        await pilot.press("s")  # decoder self-attention: nothing after the step it sees
        header, rows, weights = matrix((await export(pilot))[".csv"])
        assert header[:2] == ["output\\input", "<sos>"]
        assert all(w == 0 for i, row in enumerate(weights) for w in row[i + 1:])
        await pilot.press("s", "a")  # every encoder head
        lines = list(csv.DictReader(io.StringIO((await export(pilot))[".csv"])))
        every_head = {(str(layer), str(head)) for layer in (1, 2) for head in (1, 2, 3, 4)}
        assert {(r["layer"], r["head"]) for r in lines} == every_head
        assert len(lines) == 8 * 5 * 5 and {r["kind"] for r in lines} == {"enc"}
        await pilot.press("s", "s", "l")  # cross again, then the logit lens of the last step
        lens = list(csv.DictReader(io.StringIO((await export(pilot))[".csv"])))
        top = [r for r in lens if r["rank"] == "1"]
        assert [r["layer"] for r in top] == ["1", "2"] and top[-1]["token"] == "<eos>"  # the model's own
        await pilot.press("m")  # the head ranking, once measured: the picture alone until then
        await wait_for(pilot, lambda: session.importance is not None, "the ranking")
        ranking = json.loads((await export(pilot))[".json"])
        assert len(ranking["heads"]) == 24 and ranking["model"] == session.record.name
        assert [h["head"] for h in ranking["heads"]] == [e.head for e in session.importance.heads]
        await pilot.press("p")  # the positional table the view draws
        header, positions, _ = matrix((await export(pilot))[".csv"])
        assert header[:3] == ["position", "dim0", "dim1"] and len(header) == 65 and positions[0] == "0"


@pytest.mark.asyncio
async def test_train_saves_its_run_s_curves_and_compare_the_pair_s_grids_and_summary(in_folder, two_runs,  # noqa: F811
                                                                                     monkeypatch):
    monkeypatch.setattr(compare_screen, "SUMMARY_SEQUENCES", 16)
    a, b = two_runs
    app = create_app([a, b])
    async with app.run_test(size=(100, 32)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.comparison is not None, "the summary")
        pair = json.loads((await export(pilot))[".json"])
        assert pair["A"]["model"] == "run0.safetensors" and pair["B"]["model"] == "run1.safetensors"
        a, b = pair["A"]["weights"][0][0], pair["B"]["weights"][0][0]
        assert pair["difference"][0][0] == pytest.approx(abs(a - b))
        assert pair["summary"]["a"]["accuracy"] == screen.comparison.a.accuracy
        await pilot.press("v")  # their curves overlaid: every point of both runs
        points = list(csv.DictReader(io.StringIO((await export(pilot))[".csv"])))
        assert {r["run"] for r in points} == {"A run0.safetensors", "B run1.safetensors"}
        assert [int(r["step"]) for r in points if r["run"].startswith("A") and r["series"] == "loss"] == list(
            range(1, 31))


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_the_patching_and_doctor_dialogs_save_what_they_measured(in_folder, monkeypatch):
    from minitx.core.doctor import diagnosis
    from minitx.core.doctor.code_checks import skipped

    # Three checks are exported mid-run: the overfit check's seconds would only hold the close up.
    monkeypatch.setattr(diagnosis, "check_overfit_one_batch", lambda model, task: skipped(
        "overfit-one-batch", "a fresh model fits one batch", "< 0.01", "left out by this test"))
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("P")
        dialog = app.screen
        assert isinstance(dialog, PatchScreen)
        await pilot.press("E")  # in the corrupted source's box E is a letter, not the key
        assert dialog.query_one(Input).value.endswith("E") and not in_folder.exists()
        dialog.query_one(Input).value = "2 7 1 8 2"
        await pilot.press("enter")
        await wait_for(pilot, lambda: dialog.result is not None, "the patching sweep")
        patching = json.loads((await export(pilot))[".json"])
        assert patching["corrupted"] == [2, 7, 1, 8, 2] and patching["heads"] == dialog.result.heads
        assert set(patching["attribution"]["heads"]) == set(patching["heads"]) and "agreement" in patching
        await pilot.press("escape", "d")
        doctor = app.screen
        assert isinstance(doctor, DoctorScreen)
        await wait_for(pilot, lambda: len(doctor.order) >= 3, "three checks")
        checks = list(csv.DictReader(io.StringIO((await export(pilot))[".csv"])))
        assert len(checks) >= 3 and checks[0]["model"] == doctor.record.name
        first = doctor.results[0][checks[0]["check"]]
        assert (checks[0]["result"], checks[0]["threshold"]) == (first.status, first.threshold)


@pytest.mark.slow  # tier 2: Train's curves saved is tier 1's below
@pytest.mark.asyncio
async def test_a_finished_run_on_train_saves_its_curves(in_folder):
    from tests.tui.tui_helpers import fill_form

    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        files = await export(pilot)  # before any run: the picture alone, and the note says so
        assert set(files) == {".svg"} and "no numbers shown here yet" in notifications(app)[-1]
        fill_form(screen, steps="12")
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run", timeout=120)
        points = list(csv.DictReader(io.StringIO((await export(pilot))[".csv"])))
        assert [int(r["step"]) for r in points if r["series"] == "loss"] == list(range(1, 13))
        await pilot.press("v")  # the attention view: after the run, its timeline's snapshot
        header, rows, weights = matrix((await export(pilot))[".csv"])
        assert header[0] == "output\\source"
        assert all(sum(row) == pytest.approx(1, abs=1e-3) for row in weights)


@pytest.mark.asyncio
async def test_an_export_folder_that_cannot_be_made_is_a_message_and_the_app_goes_on(in_folder):
    in_folder.parent.joinpath("minitx-exports").write_text("a file where the folder would go")
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("E")
        await pilot.pause()
        assert notifications(app)[-1].startswith("cannot save the export in ")
        await pilot.press("right")  # still answering keys
        assert app.is_running


def test_two_exports_in_the_same_second_never_overwrite_each_other(tmp_path):
    first = save([("minitx-x-1.svg", "a"), ("minitx-x-1.csv", "1")], tmp_path)
    second = save([("minitx-x-1.svg", "b"), ("minitx-x-1.csv", "2")], tmp_path)
    assert [p.name for p in second] == ["minitx-x-1-2.svg", "minitx-x-1-2.csv"]
    assert [p.read_text() for p in first + second] == ["a", "1", "b", "2"]


@pytest.mark.asyncio
async def test_the_help_lists_the_export_key_with_the_keys_that_work_anywhere():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        lines = help_text(app.screen).plain.splitlines()
        anywhere = next(line for line in lines if line.startswith("Anywhere"))
        assert "E export" in anywhere and len(anywhere) <= 76


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_the_circuit_view_saves_the_found_circuit_and_the_one_on_screen(in_folder, monkeypatch):
    from minitx.tui.app.screens import circuit as circuit_screen

    for name, value in (("CIRCUIT_PAIRS", 8), ("FOUND_SEQUENCES", 20), ("ACCURACY_SEQUENCES", 20)):
        monkeypatch.setattr(circuit_screen, name, value)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("C")
        view = app.screen
        await wait_for(pilot, lambda: view.result is not None, "the circuit")
        while view.selected() not in view.result.circuit.heads:
            await pilot.press("right")
        await pilot.press("k")  # one head out: the export says what is on screen, and what was found
        circuit = json.loads((await export(pilot))[".json"])
    assert circuit["heads"] == sorted(str(h) for h in view.result.circuit.heads)
    assert circuit["shown"]["heads"] == sorted(str(h) for h in view.circuit.heads)
    assert len(circuit["shown"]["heads"]) == len(circuit["heads"]) - 1
