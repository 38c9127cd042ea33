"""The beam view (B in Explore): its session stepped and re-ranked without the app, and the view at
80x24 with the tree, greedy's row, the parting step and the what-if line. The bundled sort model on
"0 8 0" (shorter than it was trained on) is the case: greedy says "0 0 8", the beam under the
default length penalty "0 0 0 8", and a length penalty of 0 gives the beam greedy's answer."""

from __future__ import annotations

import pytest

from minitx import checkpoints
from minitx.tui.app.beam_session import BeamSession
from minitx.tui.app.main import create_app
from minitx.tui.app.screens.beam import BeamScreen
from tests.tui.tui_helpers import model_ready, screen_lines, wait_for

EOS = 12


class Record:
    def __init__(self, name: str) -> None:
        ckpt = checkpoints.load(name)
        self.name, self.model, self.task = name, ckpt.model, ckpt.task


def test_the_session_steps_back_by_replay_and_reranks_the_finished_under_another_length_penalty():
    session = BeamSession(Record("sort"), [0, 8, 0], beams=4)
    session.step()
    session.step()
    first_two = list(session.search.steps)
    session.back()
    assert session.position == 1 and session.step() and session.search.steps == first_two  # replayed
    session.run()
    assert session.search.tokens(session.best()) == [0, 0, 0, 8, EOS] and session.greedy == [0, 0, 8, EOS]
    assert session.parting() == 2
    contrast = session.contrast(session.best())  # what contrastive attribution would explain
    assert (contrast.step, contrast.prefix, contrast.token, contrast.greedy) == (2, (0, 0), 0, 8)
    assert not session.winner_changes()
    session.change_penalty(-4)  # 1 - 4 x 0.25: no reward for length
    assert session.what_if == 0 and session.winner_changes()
    assert list(session.reranked()[0].tokens) == session.greedy
    session.toggle_pruned()
    shown = session.rows()
    assert all(n.state != "pruned" for n in shown) and session.selected in {n.id for n in shown}


def test_the_tree_keeps_its_sum_score_and_fate_columns_whole_in_a_narrow_box():
    """At 60 columns (the box holds 54): the latest steps that fit, then every row's sum, score
    and fate, greedy's whole ("greed" was what was left of it)."""
    from minitx.tui.render.beam_tree import beam_tree

    session = BeamSession(Record("sort"), [0, 8, 0, 3, 5, 9, 1, 2], beams=4)
    session.run()
    for width in (54, 40):
        tree = beam_tree(session.search, session.rows(), vocab=session.record.task.vocab, eos=(EOS,),
                         greedy=session.greedy, width=width, selected=session.best())
        lines = tree.plain.splitlines()
        assert max(len(line) for line in lines) <= width, width
        assert lines[0].rstrip().endswith("sum   score  fate") and lines[1].rstrip().endswith("greedy")
        assert all(len(line.split()) >= 2 for line in lines[2:])  # a sum and a score on every row


async def searched(pilot) -> BeamScreen:
    """The sort model's beam view of "0 8 0", its search run to the end."""
    app = pilot.app
    await model_ready(pilot)
    await pilot.press("i", *["backspace"] * 30, *"0 8 0", "enter")
    await wait_for(pilot, lambda: app.screen.session.stepper.src_ids == [0, 8, 0], "the source")
    await pilot.press("B")
    await wait_for(pilot, lambda: isinstance(app.screen, BeamScreen), "the beam view")
    screen = app.screen
    await wait_for(pilot, lambda: screen.session is not None and screen.session.search.finished
                   and not screen.playing, "the search")
    await pilot.pause()
    return screen


@pytest.mark.asyncio
async def test_shift_b_shows_the_search_as_a_tree_at_80x24_and_the_keys_step_and_rerank_it():
    app = create_app(["sort"])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await searched(pilot)
        lines = screen_lines(app)
        assert len(lines) <= 24 and max(len(line) for line in lines) <= 80
        shown = "\n".join(lines)
        assert "sort · beam 4 · length penalty 1 · early stopping false" in shown
        assert "greedy parts from the beam's best at step 3: 8 rather than 0" in shown
        rows = [line.strip("│ ") for line in lines]
        assert any(row.startswith("0 0 8 ■") and row.endswith("greedy") for row in rows)
        ranked = {row.split()[-1]: row for row in rows if row.split() and row.split()[-1].startswith("✓")}
        assert ranked["✓2"].startswith("0 0 8 ■")  # greedy's output, second in the pool
        assert ranked["✓1"].startswith("▸     └0 8 ■")  # the winner branches off it at step 3
        await pilot.press("x", "right")
        assert screen.session.position == 1 and "step 1 · searching" in "\n".join(screen_lines(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.session.search.finished, "the search")
        await pilot.press(*["minus"] * 4)
        shown = "\n".join(screen_lines(app))
        assert "length penalty 0 (the search ran with 1): '0 0 8' would win" in shown
        await pilot.press("g")
        assert screen.query_one("#beam-grid").display and screen.query_one("#beam-grid").rows
        await pilot.press("escape")  # one level back: the tree, then out of the view
        assert app.screen is screen and screen.session.view == "tree"
        assert screen.query_one("#beam-tree").display
        await pilot.press("escape")
        assert not isinstance(app.screen, BeamScreen)


@pytest.mark.asyncio
async def test_a_model_whose_own_settings_search_says_so_over_greedy_and_teacher_forcing_refuses_the_beam(
        tmp_path):
    import dataclasses

    from minitx.core.checkpoint import save_checkpoint
    from tests.tui.tui_helpers import notifications

    ckpt = checkpoints.load("reverse")
    ckpt.model.generation = dataclasses.replace(ckpt.model.generation, num_beams=3)
    path = save_checkpoint(tmp_path / "searching.safetensors", ckpt.model, ckpt.task)
    app = create_app([str(path)])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.pause()
        assert "this is greedy: the model's own generate() uses a beam of 3 (B shows it)" in \
            "\n".join(screen_lines(app))
        await pilot.press("g", "B")
        assert not isinstance(app.screen, BeamScreen)
        assert "teacher forcing cannot apply to it (g turns it off)" in notifications(app)[-1]
        await pilot.press("g", "B")
        await wait_for(pilot, lambda: isinstance(app.screen, BeamScreen) and app.screen.session is not None,
                       "the beam view")
        await pilot.pause()
        assert "searching.safetensors · beam 3 ·" in "\n".join(screen_lines(app))
