"""The app on an imported model (docs/import.md): the title bar shows its layout and the options
its shapes do not, a typed source is wrapped as the model's code fed it and the grid labels the
start and end positions, and comparing it with a minitx model lines their sources up."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from textual.widgets import Input

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.patch import PatchScreen
from minitx.tui.cli.main import main
from tests.reference_models import toy
from tests.reference_models.fixtures import tutorial_files, tutorial_reverse  # noqa: F401
from tests.tui.tui_helpers import key_while_busy, model_ready, screen_text, wait_for


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


@pytest.fixture(scope="module")
def bare(tutorial_files, tmp_path_factory) -> str:  # noqa: F811
    """The tutorial's model imported without --pairs: it keeps no examples."""
    out = tmp_path_factory.mktemp("app") / "bare.safetensors"
    result = CliRunner().invoke(main, [
        "import", str(tutorial_files.pt), "--layout", toy.TUTORIAL, "--heads", "2", "--tokens", "word",
        "--src-vocab", str(tutorial_files.src_vocab), "--tgt-vocab", str(tutorial_files.tgt_vocab),
        "--out", str(out)])
    assert result.exit_code == 0, result.output
    return str(out)


@pytest.mark.asyncio
async def test_an_imported_model_without_example_pairs_opens_on_its_example_source(bare):
    app = create_app([bare])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await wait_for(pilot, lambda: "<eos>" in screen_text(app), "the example's decode")
        assert app.current.measure == "sharpness" and len(app.current.scores[0]) == 2
        assert "all heads · sharpness" in screen_text(app)


@pytest.mark.asyncio
async def test_without_pairs_each_measuring_key_says_once_how_to_choose_them_and_o_gives_them(
        bare, tutorial_files, monkeypatch):  # noqa: F811
    """m, w, g, C and a say, in one line each and no exception's name, that the model keeps
    no pairs and that O chooses a file (P patches without them, the model's outputs answering);
    the doctor runs its code checks and says it once; O with a pairs file makes every one of
    them measure."""
    monkeypatch.chdir(tutorial_files.pairs.parent)  # the dialog lists the pair files found here
    app = create_app([bare])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await wait_for(pilot, lambda: "<eos>" in screen_text(app), "the example's decode")
        for key in ("m", "w", "g", "C"):
            before = len(app.said)
            await pilot.press(key)
            await pilot.pause()
            said = [s.text for s in app.said[before:]]
            assert len(said) == 1 and "keeps no example pairs" in said[0], (key, said)
            assert "O chooses" in said[0], key
            assert "Error" not in said[0] and app.screen.HELP_TITLE == "Explore", key  # no dialog opened
            assert app.screen.session.view_mode == "grid", key  # no view left waiting for ever
        await pilot.press("P")  # patching a typed source needs no pairs: the model's outputs answer
        await wait_for(pilot, lambda: isinstance(app.screen, PatchScreen), "the patching dialog")
        await pilot.press("enter")  # its suggested corruption
        await wait_for(pilot, lambda: app.screen.result is not None, "the patching")
        assert app.screen.result.by_model
        assert "answers: the model's own outputs" in " ".join(screen_text(app).split())
        await pilot.press("escape")
        await pilot.press("a")
        await wait_for(pilot, lambda: "each head's role: needs example pairs (O" in screen_text(app), "roles")
        await pilot.press("a")
        key_while_busy(pilot, "d")  # its worker starts at once
        await wait_for(pilot, lambda: getattr(app.screen, "finished", False), "the doctor")
        report = app.screen
        assert report.results[0]["future-leakage-values"].status == "pass"
        assert report.results[0]["accuracy"].status == "skip" and not report.error
        assert " ".join(screen_text(app).split()).count("O chooses") <= 1
        await pilot.press("end")

        def unwrapped() -> str:  # the dialog's lines as one
            return " ".join(screen_text(app).replace("│", " ").split())

        need = "need examples: this model keeps no example pairs to measure on; O chooses"
        await wait_for(pilot, lambda: need in unwrapped(), "the report's end to say it", 10)
        await pilot.press("escape", "O")
        await wait_for(pilot, lambda: "pair files in" in screen_text(app), "the pairs dialog")
        name = tutorial_files.pairs.name
        assert name in screen_text(app)
        await pilot.press("enter")  # the first (only) pair file listed
        await wait_for(pilot, lambda: app.current.task.has_examples, "the pairs")
        assert any(f"measured on {name}: 200 pairs" in s.text for s in app.said)
        await pilot.press("m")
        await wait_for(pilot, lambda: app.screen.session.importance is not None, "the ranking")
        assert app.screen.session.importance.baseline.accuracy >= 0.9
