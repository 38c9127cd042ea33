"""A translation fine-tune's charts in the app: runs whose evaluations scored text open on the
held-out BLEU, g goes on to chrF right after it, BLEU's axis starts at step 0 (the base the
fine-tune started from), and runs without scores never offer either chart."""

from __future__ import annotations

import pytest

from minitx.tui.app.widgets.curve_chart import CurveChart
from tests.tui.test_curve_widgets import ChartApp, made_history


def scored_history():
    history = made_history(steps=200)
    for step, bleu in ((0, 4.5), (50, 12.0), (100, 21.5), (150, 27.0), (200, 28.25)):
        history.record_scores(step, 3.0 - step / 100, bleu, bleu + 20)
    return history


@pytest.mark.asyncio
async def test_a_scored_run_opens_on_bleu_from_step_0_and_g_goes_on_to_chrf():
    app = ChartApp([("ft", scored_history())])
    async with app.run_test(size=(80, 24)) as pilot:
        chart = app.query_one(CurveChart)
        assert chart.chart == "bleu" and chart.describe() == "held-out BLEU · by step"
        lines = chart.render().plain.splitlines()
        assert lines[-1].startswith("step 0") and "●" in "\n".join(lines)  # a marked point an evaluation
        seen = []
        for _ in range(6):
            await pilot.press("g")
            seen.append(chart.chart)
        assert seen == ["chrf", "accuracy", "lr", "grad_norm", "loss", "bleu"]


@pytest.mark.asyncio
async def test_a_run_without_scores_opens_on_the_loss_and_never_offers_bleu():
    app = ChartApp([("scratch", made_history())])
    async with app.run_test(size=(80, 24)):
        chart = app.query_one(CurveChart)
        assert chart.chart == "loss" and "bleu" not in chart.charts() and "chrf" not in chart.charts()
