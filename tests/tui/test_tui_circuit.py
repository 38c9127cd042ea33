"""The app's circuit view (C in Explore): found in a worker, drawn at 80x24 with its heads and
kept edges, and a head knocked in or out is re-measured in a worker while the keys still act."""

from __future__ import annotations

import pytest

from minitx.tui.app.main import create_app
from minitx.tui.app.screens import circuit as circuit_screen
from minitx.tui.app.screens.circuit import CircuitScreen
from tests.tui.tui_helpers import key_while_busy, model_ready, reverse_checkpoint, screen_lines, wait_for


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(circuit_screen, "CIRCUIT_PAIRS", 8)
    monkeypatch.setattr(circuit_screen, "FOUND_SEQUENCES", 20)
    monkeypatch.setattr(circuit_screen, "ACCURACY_SEQUENCES", 20)


async def opened(pilot) -> CircuitScreen:
    await model_ready(pilot)
    key_while_busy(pilot, "C")  # its worker starts at once
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CircuitScreen), "the circuit view")
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.result is not None, "the circuit")
    await pilot.pause()
    return screen


def text_of(screen, widget: str) -> str:
    return str(screen.query_one(widget).render())


@pytest.mark.asyncio
async def test_shift_c_finds_the_circuit_and_draws_heads_edges_and_faithfulness_at_80x24(quick):
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        result = screen.result
        assert screen.circuit == result.circuit and result.faithfulness >= 0.9
        lines = screen_lines(app)
        assert max(len(line) for line in lines) <= 80 and len(lines) <= 24
        shown = "\n".join(lines)
        for words in ("encoder", "cross", "self", f"faithfulness {result.faithfulness:.3f}",
                      f"{len(result.circuit.heads)} of 24 heads", "a head · k or space"):
            assert words in shown, words
        assert any(0x2800 < ord(ch) <= 0x28FF for ch in shown)  # the edges, in braille
        await pilot.press("escape")
        assert not isinstance(app.screen, CircuitScreen)


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_knocking_a_head_out_remeasures_faithfulness_in_a_worker_and_r_brings_the_found_one(quick):
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        found = screen.result.circuit
        while screen.selected() not in found.heads:  # the cross-attention row: a kept head
            await pilot.press("right")
        head = screen.selected()
        await pilot.press("k")
        assert screen.circuit == found.without_head(head)  # redrawn at once, measured after
        await pilot.press("right")  # keys act while the worker measures
        assert screen.selected() != head
        await wait_for(pilot, lambda: screen.figures.get(screen.circuit, (None, None))[1] is not None,
                       "the re-measured circuit")
        faithfulness = screen.figures[screen.circuit][0]
        assert faithfulness == pytest.approx(screen.result.measure(screen.circuit), abs=1e-9)
        assert faithfulness != pytest.approx(screen.result.faithfulness, abs=1e-6)
        assert f"faithfulness {faithfulness:.3f}" in text_of(screen, "#circuit-figures")
        assert "changed" in text_of(screen, "#circuit-figures")
        await pilot.press("left", "k")  # back in, with its edges
        assert head in screen.circuit.heads
        await pilot.press("r")
        assert screen.circuit == found and "found" in text_of(screen, "#circuit-figures")


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_closing_the_view_while_it_searches_cancels_the_search(quick, monkeypatch):
    import time

    from minitx.core.interp import circuit

    def endless_search(model, task, pairs, accuracy_n, progress):  # a search that outlasts any test
        while True:
            progress("patching heads", 0, 1)  # where a real search would stop, once cancelled
            time.sleep(0.01)

    monkeypatch.setattr(circuit, "find_circuit", endless_search)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("C")
        screen = app.screen
        workers = [w for w in screen.workers if w.group == "circuit-find"]
        assert workers and not workers[0].is_finished
        await pilot.press("escape")
        await wait_for(pilot, lambda: workers[0].is_finished, "the search to stop")
        assert workers[0].is_cancelled and screen.result is None
        assert not isinstance(app.screen, CircuitScreen)
