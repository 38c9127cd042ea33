"""The app's interventions: knock heads out, rank them, the logit lens, teacher forcing, forcing
a token, failures, positions, the encoder's attention, and B as A without some heads."""

from __future__ import annotations

import pytest
from textual.widgets import Input, OptionList

from minitx.core.interp.interventions import Head
from minitx.tui.app import head_ranking
from minitx.tui.app.main import create_app
from minitx.tui.app.screens import compare as compare_screen
from minitx.tui.app.screens.dialogs import FailuresScreen, ForceTokenScreen
from minitx.tui.app.screens.patch import PatchScreen
from tests.tui.test_tui_curves import footer, two_runs  # noqa: F401 - two_runs: two tiny runs with history
from tests.tui.tui_helpers import model_ready, reverse_checkpoint, wait_for

REVERSED = [5, 1, 4, 1, 3, 12]  # "3 1 4 1 5" reversed, then <eos>


async def explore(pilot):
    await model_ready(pilot)
    return pilot.app.screen.panel


async def select(pilot, panel, layer: int, head: int) -> None:
    """Move the selection to (layer, head), 0-based, with the layer and head keys."""
    while panel.session.layer_index != layer:
        await pilot.press("right_square_bracket")
    while panel.session.head_index != head:
        await pilot.press("full_stop")


async def knock_out_layer_2(pilot, panel) -> None:
    """k on each of layer 2's cross-attention heads: the reverse model can no longer copy."""
    await select(pilot, panel, 1, 0)
    for _ in range(4):
        await pilot.press("k", "full_stop")


@pytest.mark.asyncio
async def test_k_knocks_the_selected_head_out_and_the_decode_follows_at_once():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        assert panel.session.stepper.tokens == REVERSED
        for head in range(4):
            await select(pilot, panel, 1, head)
            await pilot.press("k")
        assert panel.session.ablated == {Head("cross", 1, h) for h in range(4)}
        assert panel.session.stepper.interventions.zero == panel.session.ablated
        stepper = panel.session.stepper
        assert stepper.finished and stepper.tokens != REVERSED  # re-decoded to its end
        assert "✗ wrong" in str(panel.output.render())
        title = str(app.screen.query_one("#title-info").render())
        assert "without cross:L2" in title
        scores = panel.query_one(".scores").render().plain
        assert scores.count("off") == 4
        assert "✗" in str(panel.grid_box.border_title) and "4 heads off" in str(panel.grid_box.border_title)
        await pilot.press("k")  # the selected head comes back
        assert len(panel.session.ablated) == 3
        await pilot.press("K")
        assert not panel.session.ablated and panel.session.stepper.tokens == REVERSED
        assert "without" not in str(app.screen.query_one("#title-info").render())


@pytest.mark.asyncio
async def test_k_knocks_out_a_head_of_the_attention_kind_shown_and_the_overview_marks_it():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        await pilot.press("s", "s")  # encoder self-attention
        assert panel.session.kind == "enc"
        await pilot.press("k", "a")
        assert panel.session.ablated == {Head("enc", panel.session.layer_index, panel.session.head_index)}
        assert panel.heads.display and "✗" in panel.heads.render().plain
        assert "encoder self-attention" in str(panel.grid_box.border_title)
        assert len(panel.heads.grids) == len(app.current.model.encoder)


@pytest.mark.asyncio
async def test_m_ranks_every_head_in_a_worker_with_progress(monkeypatch):
    monkeypatch.setattr(head_ranking, "IMPORTANCE_SEQUENCES", 16)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        await pilot.press("m")
        assert panel.session.view_mode == "importance"
        table = panel.query_one(".importance")
        assert "ablating each head alone" in table.render().plain or panel.session.importance is not None
        await wait_for(pilot, lambda: panel.session.importance is not None, "the importance table")
        assert panel.session.importance_progress[0] >= 1 and panel.session.importance_progress[1] == 24
        text = table.render().plain
        assert len(panel.session.importance.heads) == 24 and "cross:L2.H1" in text and "exact" in text
        await pilot.press("m")
        assert panel.session.view_mode == "grid"


@pytest.mark.asyncio
async def test_l_shows_the_logit_lens_of_the_current_step_per_layer():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        await pilot.press("x", "right", "right", "l")
        lens = panel.query_one(".lens")
        assert lens.display and len(lens.predictions) == app.current.layers
        assert lens.predictions[-1][0][0] == "1"  # the last layer says what the model said: 5 [1]
        assert "step 2" in lens.render().plain and "L1" in lens.render().plain


@pytest.mark.asyncio
async def test_the_next_token_panel_shows_log_probabilities_and_entropy():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        text = panel.topk.render().plain
        assert "entropy" in text and "nats" in text
        assert "1.00" not in text and "0.00 " not in text  # log p, not rounded probabilities
        log_ps = [e[2] for e in panel.topk.entries]
        assert all(lp <= 0 for lp in log_ps) and log_ps == sorted(log_ps, reverse=True)


@pytest.mark.asyncio
async def test_g_feeds_the_answer_and_shows_what_the_model_would_have_said():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        await knock_out_layer_2(pilot, panel)
        await pilot.press("g")
        assert panel.session.teacher and panel.session.stepper.tokens == REVERSED
        assert panel.session.predictions != REVERSED  # blind to layer 2's cross-attention
        line = str(panel.output.render())
        assert line.startswith("✗ wrong") and "right" in line  # the verdict first, as always
        fed = line.split("fed ")[1].split("  ")[0]  # the answer, * where the model chose otherwise
        assert fed.replace("*", "").split() == ["5", "1", "4", "1", "3", "<eos>"] and "*" in fed
        said = panel.session.record.task.vocab.labels(panel.session.predictions)
        assert "model says " + " ".join(said) in line
        assert "teacher-forced" in str(app.screen.query_one("#title-info").render())
        await pilot.press("g")
        assert not panel.session.teacher and panel.session.stepper.teacher is None


@pytest.mark.asyncio
async def test_f_forces_a_token_at_the_current_step_and_decodes_on_from_it():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        await pilot.press("x", "f")
        assert not isinstance(app.screen, ForceTokenScreen)  # nothing to force before a step
        await pilot.press("right", "right", "f")
        dialog = app.screen
        assert isinstance(dialog, ForceTokenScreen) and dialog.step == 2
        dialog.query_one(Input).value = "x"
        await pilot.press("enter")
        assert "not a token" in str(dialog.query_one("#force-error").render())
        dialog.query_one(Input).value = "7"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ForceTokenScreen), "the dialog")
        assert panel.session.stepper.tokens[:2] == [5, 7] and panel.session.stepper.finished
        assert panel.session.forced == {1: 7} and "7*" in str(panel.output.render())
        await pilot.press("k")  # forced tokens survive a change to the model
        assert panel.session.stepper.tokens[1] == 7


@pytest.mark.asyncio
async def test_w_lists_failures_and_one_opens_at_its_first_wrong_step():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        await knock_out_layer_2(pilot, panel)
        await pilot.press("w")
        dialog = app.screen
        assert isinstance(dialog, FailuresScreen)
        await wait_for(pilot, lambda: bool(dialog.failures), "the failures")
        assert "of 500 fresh sequences wrong" in str(dialog.query_one("#failures-summary").render())
        failure = dialog.failures[0]
        dialog.query_one(OptionList).highlighted = 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FailuresScreen), "Explore")
        assert panel.session.stepper.src_ids == failure.source
        assert panel.session.position == failure.first_wrong + 1  # the current step is the first wrong one
        assert panel.session.stepper.tokens[-1] != failure.expected[failure.first_wrong]
        assert panel.session.ablated  # still the model that made the mistake


@pytest.mark.asyncio
async def test_shift_p_patches_the_source_on_screen_into_a_corrupted_one():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await explore(pilot)
        await pilot.press("P")
        dialog = app.screen
        assert isinstance(dialog, PatchScreen) and dialog.clean == [3, 1, 4, 1, 5]
        source = dialog.query_one(Input)
        assert source.value == "4 2 5 2 6"  # suggested: every digit one on
        source.value = "2 7 1"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "same length" in str(dialog.query_one("#patch-status").render()),
                       "the refusal")
        source.value = "2 7 1 8 2"
        await pilot.press("enter")
        await wait_for(pilot, lambda: dialog.result is not None, "the patching sweep")
        assert dialog.result.corrupted == [2, 7, 1, 8, 2]
        assert max(dialog.result.heads, key=dialog.result.heads.get).startswith("cross:L2")
        assert dialog.query_one("#patch-report").render()  # the report is drawn
        await pilot.press("escape")
        assert not isinstance(app.screen, PatchScreen)


@pytest.mark.asyncio
async def test_p_draws_the_positional_encoding_and_the_similarity_of_positions():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        await pilot.press("p")
        view = panel.query_one(".positions")
        assert view.display and len(view.table) >= 7
        assert all(v == 0 for v in view.table[0][0::2]) and all(v == 1 for v in view.table[0][1::2])
        assert all(abs(view.similarity[i][i] - 1) < 1e-5 for i in range(len(view.similarity)))
        assert "similarity" in view.render().plain and "sin" in view.render().plain
        await pilot.press("number_sign")  # without colour, the numbers
        text = view.render().plain
        assert "  0   0.00  1.00  0.00  1.00" in text and " 1.00 0.97" in text


@pytest.mark.asyncio
async def test_compare_knocks_heads_out_of_b_only_and_measures_b_again(monkeypatch):
    monkeypatch.setattr(compare_screen, "SUMMARY_SEQUENCES", 16)
    app = create_app(["reverse", "reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.comparison is not None, "the summary")
        a, b = screen.panels["A"], screen.panels["B"]
        await select(pilot, a, 0, 0)
        await pilot.press("k")
        assert b.session.ablated == {Head("cross", 0, 0)} and not a.session.ablated
        assert b.session.stepper.interventions.zero and not a.session.stepper.interventions.zero
        await wait_for(pilot, lambda: screen.comparison is not None, "the summary of B again")
        assert screen.comparison.b.name == "reverse without cross:L1.H1"
        await pilot.press("right_square_bracket")  # layer 2 reads what layer 1's heads wrote
        assert any(v > 1e-4 for row in screen.query_one("#diff").rows if row for v in row)
        assert "without cross:L1.H1" in str(screen.query_one("#title-info").render())
        await pilot.press("K")
        assert not b.session.ablated


# -- with the curves and the timeline of a checkpoint that recorded its run ------------------------


@pytest.mark.asyncio
async def test_while_the_timeline_shows_p_plays_it_and_the_intervention_keys_wait(two_runs):  # noqa: F811
    app = create_app([two_runs[0]])
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await explore(pilot)
        assert "p pos " in footer(app) and "k ablate" in footer(app)
        await pilot.press("h")
        shown = footer(app)
        assert "p play" in shown and "p pos " not in shown and "k ablate" not in shown
        await pilot.press("k", "p")
        assert not panel.session.ablated and panel.session.view_mode == "grid"
        assert app.screen.timeline().playing
        await pilot.press("p", "h")
        await pilot.press("p")
        assert panel.session.view_mode == "positions"


@pytest.mark.slow  # tier 2: k on B is tier 1's
@pytest.mark.asyncio
async def test_in_compare_k_is_the_charts_while_the_curves_show_and_b_s_otherwise(two_runs):  # noqa: F811
    app = create_app(two_runs)
    async with app.run_test(size=(100, 32)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: bool(screen.steppers), "both models")
        await pilot.press("v")  # the curves
        chart = screen.curve_chart()
        await pilot.press("k")
        assert chart.x_axis == "time" and not screen.panels["B"].session.ablated
        assert "k x: step/time" in footer(app) and "k ablate" not in footer(app)
        await pilot.press("v", "k")
        assert screen.panels["B"].session.ablated and chart.x_axis == "time"
        assert "k ablate" in footer(app) and "K restore" in footer(app)
