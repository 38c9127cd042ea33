"""Source attribution in the app: y puts the step's attribution row under its attention row (the
method named, y again the next one), Y the whole matrix beside the head's cross-attention, E
exports it, a head knocked out is attributed without it, and Compare shows both models'."""

from __future__ import annotations

import json

import pytest
import torch

from minitx.core.interp.source_attribution import Decode, attribute, attribute_step
from minitx.tui.app.decode_session import ATTRIBUTION_METHODS, DecodeSession
from minitx.tui.app.main import create_app
from minitx.tui.app.messages import AttributionReady
from minitx.tui.app.screens.explore import ExploreScreen
from minitx.tui.app.widgets.attention import AttentionGrid
from tests.tui.test_exports import export, in_folder  # noqa: F401 - the export folder fixture
from tests.tui.tui_helpers import (
    key_while_busy,
    model_ready,
    notifications,
    reverse_checkpoint,
    screen_lines,
    wait_for,
)


def attributed(session) -> bool:
    return session.attribution is not None


def test_y_cycles_the_methods_then_turns_the_row_off_and_the_matrix_keeps_a_method():
    session = DecodeSession()
    seen = []
    for _ in range(len(ATTRIBUTION_METHODS) + 1):
        session.next_method(with_off=True)
        seen.append(session.attribution_method)
    assert seen == [*ATTRIBUTION_METHODS, None]
    session.attribution_method = ATTRIBUTION_METHODS[-1]
    session.next_method(with_off=False)
    assert session.attribution_method == ATTRIBUTION_METHODS[0]


@pytest.mark.asyncio
async def test_y_draws_the_steps_attribution_row_under_its_attention_row_for_the_model_on_screen():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        session = app.screen.session
        await pilot.press("left", "left")  # step 4 of 6: the current row is not the last
        await pilot.press("y")
        await wait_for(pilot, lambda: attributed(session), "the attribution")
        await pilot.pause()
        lines = screen_lines(app)
        current = next(i for i, line in enumerate(lines) if "◂ step" in line)
        assert lines[current + 1].split("│")[1].split()[0] == "ig" and "◂ ig" in lines[current + 1]
        assert "ig: what '1' depends on" in lines[current + 2]
        grid = app.screen.panel.grid
        label, values, _ = grid.under
        expected = attribute(session.record.model, Decode.of_stepper(session.stepper, 6), "ig").shares()
        assert torch.allclose(torch.tensor(values), expected[3], atol=1e-6)
        assert max(range(5), key=values.__getitem__) == 1  # the 4th output copies the 2nd source token
        await pilot.press("y")  # the next method, named where the row is
        await wait_for(pilot, lambda: attributed(session) and session.attribution.method == "ixg", "ixg")
        await pilot.pause()
        assert any("◂ ixg" in line for line in screen_lines(app))
        for _ in ATTRIBUTION_METHODS[1:]:
            await pilot.press("y")
        await pilot.pause()
        assert session.attribution_method is None and grid.under is None
        assert not any("◂ ig" in line for line in screen_lines(app))
        await pilot.press("y", "k")  # a head knocked out: the model on screen is attributed
        await wait_for(pilot, lambda: attributed(session), "the attribution without the head")
        assert session.attribution_key()[3] == session.ablated and session.ablated
        without = session.attribution.shares()  # the decode again, to step 4
        assert not torch.allclose(without, expected[: len(without)], atol=1e-3)


@pytest.mark.slow  # tier 2: y's row is tier 1's
@pytest.mark.asyncio
async def test_igs_row_comes_from_its_step_alone_in_a_worker_before_every_steps_matrix(monkeypatch):
    held = []  # the workers' jobs, kept until the test runs them
    monkeypatch.setattr(ExploreScreen, "_attribute", lambda self, job: held.append(job))
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        session, grid = app.screen.session, app.screen.panel.grid
        model = session.record.model
        decode = Decode.of_stepper(session.stepper, 6)
        whole = attribute(model, decode, "ig").shares()

        async def finished(job, what: str) -> None:
            app.screen.post_message(AttributionReady(job, job.run()))
            await wait_for(pilot, lambda: grid.under is not None and grid.under[2] == "◂ ig", what)
            await pilot.pause()

        def alone(step: int) -> torch.Tensor:
            tokens = decode.tokens
            return attribute_step(model, decode.src, tokens[:step], tokens[step], "ig").shares()[0]

        await pilot.press("left", "left", "y")  # step 4 of 6
        assert [(job.key[0], job.step) for job in held] == [("ig", 3)]  # its row alone, first
        assert grid.under is None  # nothing of ig on the screen's thread
        await finished(held[0], "step 4's row")
        assert torch.allclose(torch.tensor(grid.under[1]), alone(3), atol=1e-6)
        assert torch.allclose(alone(3), whole[3], atol=1e-5)  # the matrix's row too
        assert any("◂ ig" in line for line in screen_lines(app))
        assert [job.step for job in held] == [3, None]  # every step's once the row was there

        await pilot.press("left")  # step 3, every step's still being computed: its own row
        assert [job.step for job in held] == [3, None, 2] and grid.under is None
        await finished(held[2], "step 3's row")
        assert torch.allclose(torch.tensor(grid.under[1]), alone(2), atol=1e-6)
        await pilot.press("left")
        app.screen.post_message(AttributionReady(held[1], held[1].run()))
        await wait_for(pilot, lambda: attributed(session), "every step's")
        await pilot.pause()
        assert torch.allclose(torch.tensor(grid.under[1]), whole[1], atol=1e-6)
        await pilot.press("left", "right", "right")  # every step is there now: no more jobs
        assert len(held) == 4 and grid.under is not None


@pytest.mark.asyncio
async def test_the_matrix_view_beside_the_head_exports_every_steps_attribution(in_folder):  # noqa: F811
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(100, 32)) as pilot:
        await model_ready(pilot)
        session = app.screen.session
        await pilot.press("Y")
        await wait_for(pilot, lambda: attributed(session), "the attribution")
        await pilot.pause()
        head, matrix = app.screen.panel.query(".attribution AttentionGrid").results(AttentionGrid)
        assert head.display and matrix.display and not app.screen.panel.grid.display
        assert head.row_labels == matrix.row_labels == ["5", "1", "4", "1", "3", "<eos>"]
        assert matrix.columns == ["3", "1", "4", "1", "5"] and matrix.signed
        files = await export(pilot)
        data = json.loads(files[".json"])
        core = attribute(session.record.model, Decode.of_stepper(session.stepper), "ig").scores
        assert data["method"] == "ig" and data["model"] == "reverse"
        assert torch.allclose(torch.tensor([s["attribution"] for s in data["steps"]]), core, atol=1e-6)
        assert data["cross_attention"]["layer"] == session.layer_index + 1
        await pilot.press("y")  # in the matrix: the next method, never off
        await wait_for(pilot, lambda: attributed(session) and session.attribution.method == "ixg", "ixg")
        await pilot.press("left")
        await pilot.pause()
        assert len(matrix.rows) == 5  # the steps shown


@pytest.mark.slow  # tier 2: Explore's attribution is tier 1's
@pytest.mark.asyncio
async def test_compare_shows_each_models_own_attribution():
    app = create_app(["reverse", "copy"])
    async with app.run_test(size=(100, 32)) as pilot:
        screen = app.screen
        decoded = lambda: screen.models and all(p.session.stepper for p in screen.panels.values())  # noqa: E731
        await wait_for(pilot, decoded, "both models")
        await pilot.press("left", "y")  # step 5: the last digit
        sessions = [p.session for p in screen.panels.values()]
        await wait_for(pilot, lambda: all(attributed(s) for s in sessions), "both attributions")
        await pilot.pause()
        unders = [p.grid.under for p in screen.panels.values()]
        assert all(u is not None and u[0] == "ig" for u in unders)
        peaks = [max(range(5), key=u[1].__getitem__) for u in unders]
        assert peaks == [0, 4]  # reverse's last digit is the first source token, copy's the last
        data = json.loads(screen.export_numbers().text)
        assert data["A"]["attribution"]["method"] == data["B"]["attribution"]["method"] == "ig"


@pytest.mark.asyncio
async def test_esc_stops_an_attribution_at_its_next_batch_and_nothing_of_it_is_drawn(monkeypatch):
    """A big model's attribution (here the bundled one's, one row a batch) shows how far it is
    while the screen stays live; a step's row whose step is left stops, and Esc stops the one
    being computed: each at its next batch, the row goes and no result comes."""
    import threading

    from minitx.core.interp import source_attribution

    monkeypatch.setattr(source_attribution, "BATCH_FLOATS", 1)  # one row a batch, as a 74M model's
    release, reports = threading.Event(), []
    report = source_attribution._report

    def held(progress, done, total):  # each worker says 0%, then waits for the test
        reports.append((threading.get_ident(), done))
        report(progress, done, total)
        release.wait(timeout=30)

    monkeypatch.setattr(source_attribution, "_report", held)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        session, grid = app.screen.session, app.screen.panel.grid
        rows = lambda: [w for w in app.workers if w.group == "attribution"]  # noqa: E731
        await pilot.press("left", "y")  # step 5's row
        progress = "ig: measuring… 0% (esc stops)"
        await wait_for(pilot, lambda: any(progress in line for line in screen_lines(app)), "its progress")
        (fifth,) = rows()
        key_while_busy(pilot, "left")  # step 4: step 5's row is no longer wanted
        await wait_for(pilot, lambda: len(reports) == 2, "step 4's row")
        (fourth,) = rows()
        assert fifth.is_cancelled and not fourth.is_cancelled
        key_while_busy(pilot, "escape")
        await wait_for(pilot, lambda: session.attribution_method is None, "esc")
        assert fourth.is_cancelled
        release.set()
        await wait_for(pilot, lambda: len(reports) == 4, "the workers' next batches")
        await pilot.pause(0.2)
        # each worker: one batch (a row: its step at one point of the path) after it was stopped
        assert sorted(done for _, done in reports) == [0, 0, 1 / 32, 1 / 32], reports
        assert len({thread for thread, _ in reports}) == 2
        assert not session.attributions and not session.step_attributions and grid.under is None
        assert "attribution stopped (y: again)" in notifications(app)
        assert not any("measuring" in line for line in screen_lines(app))
        assert session.view_mode == "grid"  # esc stopped the work; the view stays
