"""The app on a Hugging Face folder of opus-mt's layout (6+6 layers, 8 heads: 48 heads per kind) at
80x24: the title names the family, a long sentence of subword pieces decodes, its grid keeps the
current step's row and the column labels in view (↑ ↓ scroll the rows), z widens the cells to
read each piece whole, and every head at once fits the screen as each head's row of this step."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.patch import PatchScreen
from tests.huggingface.tiny_folders import save_model
from tests.tui.tui_helpers import model_ready, screen_text, wait_for

SENTENCE = "The European Parliament adopted 3 resolutions in Zürich, Köln and Malmö on 12 March."


@pytest.fixture(scope="module")
def marian48(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("hf") / "opus-mt-like"
    return str(save_model(folder, "marian", layers=6, heads=8, d_model=32, d_ff=48, positions=128))


def grid_lines(app) -> list[str]:
    """The lines inside the grid's box, without its borders."""
    box = app.screen.panel.grid_box.region
    lines = screen_text(app).splitlines()[box.y + 1: box.bottom - 1]
    return [line[box.x + 1: box.right - 1] for line in lines]


@pytest.mark.asyncio
async def test_a_long_sentence_of_pieces_keeps_the_current_step_and_labels_in_view_and_zooms(marian48):
    app = create_app([marian48])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        assert "opus-mt-like · marian: post LN 1e-5" in screen_text(app).splitlines()[0]
        await pilot.press("i")
        app.screen.query_one("#source", Input).value = SENTENCE
        await pilot.press("enter")
        session = app.screen.session
        await wait_for(pilot, lambda: session.stepper is not None and session.stepper.finished, "the decode")
        grid = app.screen.panel.grid
        steps = session.stepper.position
        assert steps > 12 and grid.rows_cropped  # more steps than the box has lines
        lines = grid_lines(app)
        assert "◂" in "\n".join(lines)  # the current (last) step's row is drawn
        assert f"rows {steps - len(grid._shown_rows) + 1}-{steps} of {steps} · ↑ ↓ scroll" in "\n".join(lines)
        header = lines[0]
        await pilot.press("up", "up")
        # the rows moved up two; the column labels stay on top
        assert grid._shown_rows.stop == steps - 2 and grid_lines(app)[0][:30] == header[:30]
        # unzoomed, every piece has a cell of one or two characters; zoomed, each reads whole
        labels = session.record.task.source_labels(session.stepper.src_ids)
        assert grid.cell_layout().cell < 3  # 63 pieces: one-character cells, 42 of them at a time
        await pilot.press("z")
        layout, zoomed = grid.cell_layout(), grid_lines(app)[0]
        assert layout.cell >= 3 and layout.visible < len(labels)
        shown = labels[grid._window(layout.visible).start:][: layout.visible]
        assert zoomed.split() == [label for label in shown if label.strip()], zoomed
        assert "z all" in screen_text(app)
        await pilot.press("z")
        assert "z all" not in screen_text(app)


@pytest.mark.asyncio
async def test_every_head_of_a_48_head_model_fits_80x24_as_its_last_steps_in_bins(marian48):
    app = create_app([marian48])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("enter")  # run the example to its end
        await wait_for(pilot, lambda: app.screen.session.stepper.finished, "the decode")
        await pilot.press("a")
        lines = grid_lines(app)
        assert lines[0].split()[:8] == [f"H{h}" for h in range(1, 9)]
        layers = [line.split()[0].lstrip("▸") for line in lines if line.split() and
                  line.split()[0].lstrip("▸").startswith("L")]
        assert layers == [f"L{layer}" for layer in range(1, 7)]
        assert any("each head: the last" in line for line in lines)
        assert app.screen.panel.grid_box.max_scroll_y == 0  # nothing hidden below
        overview = app.screen.panel.heads  # it counts the lines of the small grids without drawing them
        room = overview.parent.scrollable_content_region.height
        assert overview._grids_height() == len(overview._grids()) > room


@pytest.mark.slow  # tier 2: patching is tier 1's on the bundled model
@pytest.mark.asyncio
async def test_patching_a_sentence_of_pieces_starts_from_a_corruption_cut_into_as_many_pieces(marian48):
    """P's corrupted field starts with text the tokeniser cuts into as many pieces as the source
    (pieces moved one on re-cut differently: then the source's own text, to change a word of);
    Enter on it unchanged says in one line that the model says the same for both."""
    app = create_app([marian48])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        clean = app.screen.session.stepper.src_ids
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, PatchScreen), "the patching dialog")
        model, task = app.screen.decoded
        field = app.screen.query_one("#patch-source", Input)
        corrupted = task.parse(field.value, max_len=model.cfg.max_len - 2)
        assert len(corrupted) == len(clean)
        assert corrupted == clean  # (this folder's pieces moved one on re-cut into other pieces)
        await pilot.press("enter")
        status = app.screen.query_one("#patch-status")
        await wait_for(pilot, lambda: "✗" in str(status.render()), "why not")
        assert str(status.render()).startswith("✗ the model says the same for both sources")


def test_a_pretrained_model_says_it_was_trained_elsewhere_rather_than_blaming_an_old_file():
    from minitx.core.data.origin import Origin
    from minitx.tui.app.loaded import LoadedModel

    def record(task_name: str, origin: dict) -> LoadedModel:
        task = type("Task", (), {"name": task_name, "origin": Origin(origin)})()
        return LoadedModel("m", None, task, "post", 1, "cpu", [], 1, 1)

    folder = record("huggingface", {"family": "marian"})
    assert folder.pretrained
    assert folder.no_history == "a marian model trained outside minitx"
    imported = record("imported", {"layout": "tutorial"})
    assert imported.pretrained and imported.no_history == "a tutorial model trained outside minitx"
    assert not record("reverse", {}).pretrained
    assert record("reverse", {}).no_history == "a file from before minitx kept them, or an export"


@pytest.mark.slow  # tier 2: a folder opened through the dialog, decoded to its cap, at two sizes
@pytest.mark.asyncio
async def test_a_folder_opened_from_its_config_shows_its_forced_end_its_own_pieces_and_what_is_true_of_it(
        marian48):
    from minitx.tui.app.screens.beam import BeamScreen
    from minitx.tui.app.screens.dialogs import ForceTokenScreen, OpenCheckpointScreen
    from tests.tui.tui_helpers import notifications

    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the open dialog")
        await pilot.press("tab", *f"{marian48}/config.json", "enter")
        await wait_for(pilot, lambda: app.model_ready and app.current.name == "opus-mt-like", "the folder",
                       60)
        session = app.screen.session
        await wait_for(pilot, lambda: session.stepper is not None and session.stepper.finished, "the decode")
        last = session.stepper.current
        assert last.settings_forced == "last step"  # its generation_config: EOS at max_length
        panel = app.screen.panel
        own = int(last.log_probs.argmax())
        assert panel.topk.entries[0][0] == session.record.task.vocab.label(own) != "</s>"
        assert panel.topk.entries[0][1] < 1 and "</s> forced (last step)" in panel.topk.footnote
        assert "longer than trained" not in screen_text(app)
        await pilot.press("h")
        assert "(a marian model trained outside minitx)" in notifications(app)[-1]
        # f: a piece as vocab.json spells it ("▁") or as the screen shows it ("·")
        await pilot.press("x", "right", "f")
        dialog = app.screen
        assert isinstance(dialog, ForceTokenScreen)
        vocab = session.record.task.vocab
        piece = next(t for t in vocab.tokens if t.startswith("▁") and len(t) > 2)
        dialog.query_one("#force-token", Input).value = piece
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ForceTokenScreen), "the forced piece")
        assert session.stepper.results[0].token == vocab.tokens.index(piece)
        # 60x20: the beam's sum, score and fate columns stay whole
        await pilot.press("i", "enter")  # decoded afresh: the forced piece goes
        await pilot.resize_terminal(60, 20)
        await pilot.press("B")
        await wait_for(pilot, lambda: isinstance(app.screen, BeamScreen)
                       and app.screen.session.search.finished and not app.screen.playing, "the search", 60)
        await pilot.pause(0.2)
        lines = screen_text(app).splitlines()
        assert any(line.rstrip(" │").endswith("greedy") for line in lines)
        assert any("sum   score  fate" in line for line in lines)
