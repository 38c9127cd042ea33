"""The alignment view (A in Explore, tui/app/screens/alignment.py) at 80x24, keyboard only: a
pair's word grid through a head, a gold file read with G (its sure and possible links drawn over
the grid, every head's AER in a table), the keys in the footer and the help."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.alignment import POSSIBLE, SURE, AlignmentScreen, GoldFileScreen
from tests.core.test_guided_training import made_up_language
from tests.tui.tui_helpers import (
    model_ready,
    notifications,
    on_train_screen,
    screen_lines,
    screen_text,
    wait_for,
)


@pytest.fixture(scope="module")
def aligned_model(tmp_path_factory):
    """A tiny word-level model trained a few steps on the made-up language, its pairs file and
    gold (the neighbour swaps, with the first pair's first link made possible)."""
    from minitx.core.config import ModelConfig, TrainConfig
    from minitx.core.training.trainer import Trainer

    folder = tmp_path_factory.mktemp("aligned")
    data, links = made_up_language(folder, pairs=220)
    lines = open(links).read().splitlines()
    first = lines[0].split()
    lines[0] = " ".join([first[0].replace("-", "p"), *first[1:]])
    gold = folder / "gold.talp"
    gold.write_text("\n".join(lines) + "\n", encoding="utf-8")
    trainer = Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2,
                                  dropout=0.0),
                      TrainConfig(task="data", data=data, tokens="word", steps=5, batch_size=16,
                                  eval_every=0, device="cpu"))
    trainer.run()
    path = folder / "aligned.safetensors"
    trainer.save(path)
    return str(path), data, str(gold)


async def open_alignment(pilot):
    await model_ready(pilot)
    await wait_for(pilot, lambda: pilot.app.screen.stepper is not None, "a decode")
    await pilot.press("A")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, AlignmentScreen), "the alignment view")
    return pilot.app.screen


@pytest.mark.asyncio
async def test_the_alignment_view_draws_a_pair_and_moves_through_pairs_heads_and_methods(aligned_model):
    path, data, _ = aligned_model
    app = create_app([path])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_alignment(pilot)
        session = screen.session
        status = screen.query_one("#align-status").render().plain
        assert "pair 1/" in status and "L2.H1" in status and "output rows" in status
        first = session.pairs.pairs[session.items[0][0]]
        assert f"source: 0 {first.source.split()[0]}" in screen_text(app)
        for key, expect in (("right", "pair 2/"), ("left_square_bracket", "L1.H1"), ("full_stop", "L1.H2"),
                            ("full_stop", "L1 mean"), ("m", "input rows")):
            await pilot.press(key)
            assert expect in screen.query_one("#align-status").render().plain, key
        footer = screen_lines(app)[-1]
        for key in ("→ pair", "] layer", ". head", "m method", "G gold", "? help"):
            assert key in footer, (key, footer)
        await pilot.press("question_mark")
        help_text = screen_text(app)
        assert "the next pair" in help_text and "read a gold file" in help_text
        await pilot.press("escape")
        await pilot.press("escape")
        assert not isinstance(app.screen, AlignmentScreen)


@pytest.mark.asyncio
async def test_a_gold_file_marks_sure_and_possible_links_and_scores_every_head(aligned_model, tmp_path):
    path, data, gold = aligned_model
    app = create_app([path])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_alignment(pilot)
        await pilot.press("G")
        await wait_for(pilot, lambda: isinstance(app.screen, GoldFileScreen), "the gold dialog")
        app.screen.query_one("#gold-path", Input).value = gold
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.session.scores is not None, "every head's AER")
        await pilot.pause()
        session = screen.session
        session.at = next(n for n, item in enumerate(session.items) if item[0] == 0)  # the first pair
        screen.redraw()
        grid = screen.query_one("#align-pair").render().plain.split("\nsource:")[0]  # the rows
        assert SURE in grid and POSSIBLE in grid
        assert grid.count(POSSIBLE) == 1  # the one link the file marks possible
        table = screen.query_one("#align-scores").render().plain
        assert "AER on gold (output rows)" in table and "L1" in table and "L2" in table and "mean" in table
        assert len(session.scores) == 2 * 3  # two layers of two heads and their means
        from minitx.core.interp.word_alignment import best

        assert f"best: {session.head_list()[best(session.scores)].name}" in table
        app.save_screenshot(filename="alignment.svg", path=str(tmp_path))
        assert (tmp_path / "alignment.svg").stat().st_size > 0


@pytest.mark.asyncio
async def test_a_gold_file_that_does_not_fit_the_pairs_is_refused_naming_its_line(aligned_model, tmp_path):
    path, data, _ = aligned_model
    short = tmp_path / "short.talp"
    short.write_text("0-0\n", encoding="utf-8")
    app = create_app([path])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_alignment(pilot)
        await pilot.press("G")
        await wait_for(pilot, lambda: isinstance(app.screen, GoldFileScreen), "the gold dialog")
        app.screen.query_one("#gold-path", Input).value = str(short)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("short.talp, line 2" in n for n in notifications(app)),
                       "the refusal")
        assert screen.session.gold is None and app.screen is screen


@pytest.mark.asyncio
async def test_a_guided_run_continued_in_the_app_draws_its_heads_aer_live(tmp_path):
    from minitx.core.config import ModelConfig, TrainConfig
    from minitx.core.training.trainer import Trainer

    data, links = made_up_language(tmp_path, pairs=220)
    saved = Trainer(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                                dropout=0.0),
                    TrainConfig(task="data", data=data, tokens="word", steps=4, batch_size=16, eval_every=2,
                                device="cpu", alignments=links, guided_head="1:2"))
    saved.run()
    path = tmp_path / "guided.safetensors"
    saved.save(path)
    app = create_app([str(path)])
    app.save_dir = tmp_path
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        form = screen.form
        form.query_one("#from").value = "resume"
        form.fill()
        form.query_one("#steps").value = "8"
        await pilot.pause()
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the continued run")
        assert screen.trainer.history.series("aer")[0] == [0, 2, 4, 6, 8]  # the run's, and its own
        chart = screen.curve_chart()
        assert "aer" in chart.charts()
        for _ in chart.charts():
            if chart.chart == "aer":
                break
            await pilot.press("g")
        assert chart.chart == "aer" and "guided head's AER" in screen_text(app)
