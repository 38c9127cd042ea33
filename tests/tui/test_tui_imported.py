"""The app on an imported model (docs/import.md): the title bar shows its layout and the options
its shapes do not, a typed source is wrapped as the model's code fed it and the grid labels the
start and end positions, and comparing it with a minitx model lines their sources up."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from textual.widgets import Input

from minitx.tui.app.main import create_app
from minitx.tui.cli.main import main
from tests.reference_models import toy
from tests.reference_models.fixtures import tutorial_files, tutorial_reverse  # noqa: F401
from tests.tui.tui_helpers import model_ready, screen_text, wait_for


@pytest.fixture(scope="module")
def tut(tutorial_files, tmp_path_factory) -> str:  # noqa: F811
    out = tmp_path_factory.mktemp("app") / "tut.safetensors"
    result = CliRunner().invoke(main, [
        "import", str(tutorial_files.safetensors), "--layout", toy.TUTORIAL, "--heads", "2", "--tokens",
        "word", "--src-vocab", str(tutorial_files.src_vocab), "--tgt-vocab", str(tutorial_files.tgt_vocab),
        "--pairs", str(tutorial_files.pairs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return str(out)


async def decode(pilot, text: str) -> None:
    await pilot.press("i")
    pilot.app.screen.query_one("#source", Input).value = text
    await pilot.press("enter")
    await wait_for(pilot, lambda: "<eos>" in screen_text(pilot.app), "the decode to finish")


@pytest.mark.asyncio
async def test_the_header_shows_the_imported_options_and_the_grid_labels_the_wrapping(tut):
    app = create_app([tut])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await decode(pilot, "3 1 4 1")
        lines = screen_text(app).splitlines()
        assert "tut.safetensors · nn-transformer: post+final LN 1e-5" in lines[0]
        assert "1 4 1 3 <eos>" in lines[2]
        header = lines[4].split()  # the cross-attention grid's column labels
        assert header[1:7] == ["bos", "3", "1", "4", "1", "eos"]
        assert app.screen.session.stepper.src_ids == app.current.task.parse("3 1 4 1")
        await pilot.press("Y")  # the attribution over the wrapped source, in its own vocabulary
        session = app.screen.session
        await wait_for(pilot, lambda: session.attribution is not None, "the attribution")
        await pilot.pause()
        matrix = app.screen.panel.query_one(".attribution-matrix")
        assert matrix.columns == ["<bos>", "3", "1", "4", "1", "<eos>"]
        peaks = [max(range(6), key=row.__getitem__) for row in matrix.rows[:4]]
        assert peaks == [4, 3, 2, 1]  # each output digit on the source token it reverses


@pytest.mark.asyncio
async def test_comparing_an_imported_model_with_a_minitx_one_decodes_the_source_in_each_vocabulary(tut):
    app = create_app([tut, "reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.sessions()) == 2 and all(
            s.stepper is not None for s in app.screen.sessions()), "both models")
        await decode(pilot, "3 1 4 1 5")
        await wait_for(pilot, lambda: "✓ correct" in screen_text(app), "both decodes")
        text = screen_text(app)
        assert "A tut.safetensors" in text and "5 1 4 1 3 <eos>" in text
        sessions = app.screen.sessions()
        assert [len(s.stepper.src_ids) for s in sessions] == [7, 5]  # wrapped, and as typed
        await wait_for(pilot, lambda: app.screen.comparison is not None, "the summary")
        assert app.screen.comparison.agreement > 0.5


@pytest.mark.asyncio
async def test_an_imported_model_without_example_pairs_opens_on_its_example_source(tutorial_files,  # noqa: F811
                                                                                   tmp_path):
    out = tmp_path / "bare.safetensors"
    result = CliRunner().invoke(main, [
        "import", str(tutorial_files.pt), "--layout", toy.TUTORIAL, "--heads", "2", "--tokens", "word",
        "--src-vocab", str(tutorial_files.src_vocab), "--tgt-vocab", str(tutorial_files.tgt_vocab),
        "--out", str(out)])
    assert result.exit_code == 0, result.output
    app = create_app([str(out)])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await wait_for(pilot, lambda: "<eos>" in screen_text(app), "the example's decode")
        assert app.current.measure == "sharpness" and len(app.current.scores[0]) == 2
        assert "all heads · sharpness" in screen_text(app)
