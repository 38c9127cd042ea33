"""Curves and timelines in the app: Train draws its run and then replays its probe snapshots,
Explore shows a checkpoint's timeline, Compare overlays A's and B's curves, and files without
history show none."""

from __future__ import annotations

import pytest
import torch
from textual.widgets import Input

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.training.trainer import Trainer
from minitx.tui.app.main import create_app
from minitx.tui.app.screens.compare import CompareScreen
from minitx.tui.app.screens.dialogs import ChoiceDialog
from minitx.tui.app.widgets.curve_chart import CurveChart
from minitx.tui.app.widgets.decode_panel import DecodePanel
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.app.widgets.timeline import Timeline
from tests.tui.tui_helpers import (
    fill_form,
    model_ready,
    on_train_screen,
    reverse_checkpoint,
    screen_text,
    wait_for,
)

TINY_MODEL = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                         dropout=0.0, max_len=12)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two small trained checkpoints with histories (a few seconds on two busy cores)."""
    folder = tmp_path_factory.mktemp("runs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    paths = []
    for seed in (0, 1):
        trainer = Trainer(TINY_MODEL, TrainConfig(steps=30, batch_size=16, warmup=5, eval_every=10,
                                                   eval_size=20, device="cpu", seed=seed))
        trainer.run()
        paths.append(str(trainer.save(folder / f"run{seed}.safetensors")))
    torch.set_num_threads(threads)
    return paths


def footer(app) -> str:
    return app.screen.query_one(KeyBar).keys_text()


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_train_draws_the_run_then_its_timeline_steps_through_the_snapshots_in_order():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fill_form(screen, steps="20")  # a snapshot every step: 21 to walk through
        screen.query_one("#probe_source", Input).value = "3 1 4"
        await pilot.pause()
        assert "g next chart" in footer(app) and "p play" not in footer(app)
        await pilot.press("space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run to finish", timeout=120)
        chart = screen.query_one(CurveChart)
        assert list(chart.runs[0][1].steps) == list(range(1, 21))
        assert "┤" in chart.render().plain  # an axis: the curve is drawn
        await pilot.press("g")
        assert chart.chart == "accuracy"
        assert "exact match" in str(screen.query_one("#curves-panel").border_title)
        # The footer offers only the keys that change this chart: accuracy has no log scale and
        # is never smoothed; the learning rate is smoothed but linear.
        assert "l log/linear" not in footer(app) and "m smooth" not in footer(app)
        await pilot.press("g")
        assert chart.chart == "lr" and "m smooth" in footer(app) and "l log/linear" not in footer(app)
        await pilot.press("g", "g")
        assert chart.chart == "loss" and "l log/linear" in footer(app)

        await pilot.press("v")
        timeline = screen.query_one(Timeline)
        assert timeline.display and timeline.source == ["3", "1", "4"]
        assert timeline.steps == screen.trainer.history.snapshot_steps and timeline.step == 20
        assert "←/→ snapshot" in footer(app) and "p play" in footer(app)
        assert "g next chart" not in footer(app)
        shown = screen_text(app)  # whole at 80x24 under the form: position, every row, the legend
        assert "step 20/20" in shown and f"{len(timeline.steps)}/{len(timeline.steps)}" in shown
        assert "<eos>" in shown and "1.0 weight" in shown
        seen = [timeline.step]
        for _ in range(len(timeline.steps) - 1):
            await pilot.press("left")
            seen.append(timeline.step)
        assert seen == sorted(timeline.steps, reverse=True)
        await pilot.press("right")
        assert timeline.step == timeline.steps[1]

        fill_form(screen, steps="5000")
        await pilot.press("space")  # a new run (after dropping the unsaved one) brings the live probe back
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog), "the question")
        await pilot.press("d")
        await wait_for(pilot, lambda: screen.state == "running" and not timeline.display, "the live probe")
        assert screen.query_one("#probe").display
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.state == "stopped", "the run to stop")


@pytest.mark.asyncio
async def test_explore_shows_the_timeline_of_a_checkpoint_with_history(two_runs):
    app = create_app([two_runs[0]])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        assert "h replay" in footer(app) and "p play" not in footer(app)
        assert app.screen.query_one(KeyBar).size.height <= 3  # h too: every key in three lines
        await pilot.press("h")
        timeline = app.screen.query_one(Timeline)
        panel = app.screen.query_one(DecodePanel)
        assert timeline.display and not panel.display
        assert timeline.steps[0] == 0 and timeline.steps[-1] == 30 and timeline.step == 30
        await pilot.press("left", "left")
        assert timeline.step == timeline.steps[-3]
        shown = footer(app)
        assert "p play" in shown and "[/] layer" in shown and "k ablate" not in shown
        await pilot.press("h")
        assert panel.display and not timeline.display
        await pilot.press("right")  # the step key steps the decode again
        assert app.screen.stepper.position >= 1


@pytest.mark.asyncio
async def test_explore_timeline_of_a_file_without_history_says_it_has_none(without_history):
    app = create_app([without_history])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        assert "h replay" not in footer(app)  # nothing to show: the key is not offered
        await pilot.press("h", "p")
        timeline = app.screen.query_one(Timeline)
        assert not timeline.display and timeline.steps == [] and not timeline.playing
        timeline.show_history(None)
        assert "no snapshots" in timeline.bar().plain


@pytest.mark.asyncio
async def test_compare_overlays_a_and_b_curves_with_a_legend(two_runs):
    app = create_app(two_runs)
    async with app.run_test(size=(100, 32)) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_for(pilot, lambda: bool(screen.steppers), "both models")
        await pilot.press("v")  # v: curves, as in Train (u there hands a finished run to Explore)
        await pilot.pause()  # the shown chart laid out at its width, as the screen's next refresh does
        chart = screen.query_one(CurveChart)
        assert [label for label, _ in chart.runs] == ["A run0.safetensors", "B run1.safetensors"]
        heading = chart.render().plain.splitlines()[0]
        assert "A run0" in heading and "B run1" in heading
        assert "g next chart" in footer(app) and "x reset" not in footer(app)
        await pilot.press("g")
        assert chart.chart == "accuracy"
        await pilot.press("v")
        assert not screen.query_one("#pair-curves").display


@pytest.mark.asyncio
async def test_compare_with_a_file_without_history_keeps_b_in_its_own_colour(two_runs, without_history):
    app = create_app([without_history, two_runs[1]])
    async with app.run_test(size=(100, 32)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: bool(screen.steppers), "both models")
        await pilot.press("v")
        heading = screen.query_one(CurveChart).render().plain.splitlines()[0]
        assert "A reverse.safetensors (none)" in heading and "▀ B run1" in heading  # B keeps its marker
