"""Every key either works or says in one line why not, and the footer and the ? screen list only
the keys that work where they are; the keys of views that used to be stuck (the head ranking,
the replay, a deeper model in Compare) reach everything."""

from __future__ import annotations

import pytest
import torch
from textual.actions import parse
from textual.binding import Binding

from minitx.tui.app import head_ranking
from minitx.tui.app.help import help_text
from minitx.tui.app.key_reasons import bound_keys
from minitx.tui.app.main import create_app
from minitx.tui.app.screens import compare as compare_screen
from minitx.tui.app.widgets.importance import RANKING_FIRST_ROW
from minitx.tui.app.widgets.keybar import KeyBar
from minitx.tui.app.widgets.timeline import Timeline
from tests.tui.tui_helpers import model_ready, notifications, on_train_screen, reverse_checkpoint, wait_for


@pytest.fixture(scope="module")
def deep_and_shallow(tmp_path_factory):
    """Two tiny reverse models with histories: 2 layers of 2 heads, and 1 layer (seconds)."""
    from minitx.core.config import ModelConfig, TrainConfig
    from minitx.core.training.trainer import Trainer

    folder = tmp_path_factory.mktemp("keys")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    paths = []
    for layers in (2, 1):
        model = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=layers, n_decoder_layers=layers,
                            max_len=12, dropout=0.0)
        trainer = Trainer(model, TrainConfig(steps=20, batch_size=16, warmup=5, eval_every=10, eval_size=20,
                                             device="cpu", max_source_len=8))
        trainer.run()
        paths.append(str(trainer.save(folder / f"layers{layers}.safetensors")))
    torch.set_num_threads(threads)
    return paths


def refused(screen) -> list[tuple[str, str]]:
    """(key, action) of every binding of `screen` and the app that does nothing now, where no
    other binding of its key works."""
    active = screen.active_bindings
    out = []
    for node in (screen, screen.app):
        for binding in node.BINDINGS:
            if not isinstance(binding, Binding):
                continue
            namespace, action, parameters = parse(binding.action)
            if namespace or node.check_action(action, parameters):
                continue
            for key in bound_keys(binding):
                if not (key in active and active[key].enabled):
                    out.append((key, action))
    return out


def footer(app) -> str:
    return app.screen.query_one(KeyBar).keys_text()


async def each_refused_key_says_why(pilot) -> list[str]:
    """Press every key that does nothing on the screen now; each must say why in one line (and
    be in neither the footer nor the help). Returns what they said."""
    app, said = pilot.app, []
    for key, action in refused(app.screen):
        before = len(notifications(app))
        await pilot.press(key)
        new = notifications(app)[before:]
        assert len(new) == 1 and "\n" not in new[0], f"{key} ({action}) said {new}"
        said.append(new[0])
    return said


@pytest.mark.asyncio
async def test_every_key_that_does_nothing_on_explore_says_why_and_is_not_listed(without_history):
    app = create_app([without_history])  # no training snapshots in this file
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        explore = app.screen
        keys = dict(refused(explore))
        assert {"h", "less_than_sign", "greater_than_sign"} <= set(keys)
        assert "h replay" not in footer(app) and "replay" not in help_text(explore).plain
        said = await each_refused_key_says_why(pilot)
        assert any("no training snapshots to replay" in line for line in said)
        await pilot.press("a")  # all heads: # has nothing to print there
        assert "number_sign" in dict(refused(explore)) and "# nums" not in footer(app)
        said = await each_refused_key_says_why(pilot)
        assert any("one head's grid" in line for line in said)


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_every_key_that_does_nothing_on_train_and_compare_says_why(monkeypatch, without_history):
    monkeypatch.setattr(compare_screen, "SUMMARY_SEQUENCES", 16)
    app = create_app([without_history])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        assert {"x", "w", "u", "p"} <= set(dict(refused(screen)))  # no run yet: nothing to stop or save
        shown = footer(app)
        assert "x stop" not in shown and "w save" not in shown and "u explore" not in shown
        said = await each_refused_key_says_why(pilot)
        assert any("nothing to save yet" in line for line in said)
        await pilot.press("c")
        await wait_for(pilot, lambda: app.screen.query("#open-list"), "the open dialog")
        app.screen.dismiss(without_history)  # B: the same file; neither has curves
        await wait_for(pilot, lambda: app.screen.models, "both models")
        assert {"v", "o"} <= set(dict(refused(app.screen)))  # (c: base against fine-tuned)
        said = await each_refused_key_says_why(pilot)
        assert any("neither A nor B recorded training curves" in line for line in said)
        assert any("1 and 2 open models A and B" in line for line in said)


@pytest.mark.slow  # end to end: tier 2
@pytest.mark.asyncio
async def test_s_and_a_change_both_panels_of_compare():
    app = create_app(["reverse", "copy"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.screen.steppers, "both decodes")
        sessions = [p.session for p in app.screen.panels.values()]
        await pilot.press("s")
        assert [s.kind for s in sessions] == ["self", "self"]
        await pilot.press("a")
        assert [s.view_mode for s in sessions] == ["heads", "heads"]
        assert all(p.heads.display for p in app.screen.panels.values())


@pytest.mark.slow  # tier 2: Compare's layer keys are tier 1's (test_tui_compare.py)
@pytest.mark.asyncio
async def test_compare_reaches_the_layers_only_the_deeper_model_has(deep_and_shallow, monkeypatch):
    monkeypatch.setattr(compare_screen, "SUMMARY_SEQUENCES", 16)
    deep, shallow = deep_and_shallow
    app = create_app([shallow, deep])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.screen.steppers, "both decodes")
        screen = app.screen
        a, b = (p.session for p in screen.panels.values())
        while a.layer_index != 1:
            await pilot.press("right_square_bracket")
        assert "layer 2/2" in screen.show_selection()
        assert b.has_selected_head and not a.has_selected_head
        assert "no L2: 1 layer only" in screen.panels["A"].grid.hint
        assert screen.panels["B"].grid.rows  # B draws its own layer 2
        assert not screen.query_one("#diff-box").display  # no difference of a head A lacks
        await pilot.press("right_square_bracket")
        assert a.has_selected_head and screen.query_one("#diff-box").display


@pytest.mark.asyncio
async def test_the_replay_shows_any_head_and_home_end_go_to_the_first_and_last_snapshot(deep_and_shallow):
    app = create_app([deep_and_shallow[0]])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("h")
        timeline = app.screen.query_one(Timeline)
        first = timeline.head
        await pilot.press("right_square_bracket")
        assert timeline.head == ((first[0] + 1) % 2, first[1])
        await pilot.press("full_stop")
        assert timeline.head == ((first[0] + 1) % 2, (first[1] + 1) % 2)
        assert f"L{timeline.head[0] + 1} H{timeline.head[1] + 1}" in timeline.bar().plain
        await pilot.press("home")
        assert timeline.index == 0
        before = len(notifications(app))
        await pilot.press("left")  # nothing before the first snapshot: it says so
        assert timeline.index == 0 and "the first snapshot" in notifications(app)[before]
        await pilot.press("end")
        assert timeline.index == len(timeline.steps) - 1


@pytest.mark.slow  # tier 2: the timeline is tier 1's in tests/tui/test_curve_widgets.py
@pytest.mark.asyncio
async def test_train_s_timeline_shows_any_head_after_a_run(deep_and_shallow):
    app = create_app([deep_and_shallow[0]])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        await pilot.press("tab", "left")  # from: the open file's run, resumed
        while "resume" not in screen.form.start.label:
            await pilot.press("left")
        screen.query_one("#steps").value = "25"
        await pilot.press("escape", "space")
        await wait_for(pilot, lambda: screen.state == "finished", "the run")
        await pilot.press("v")
        timeline = screen.timeline()
        first = timeline.head
        await pilot.press("comma", "home")
        assert timeline.head == (first[0], (first[1] - 1) % 2) and timeline.index == 0
        assert "[/] layer" in footer(app) and ",/. head" in footer(app)


@pytest.mark.slow  # tier 2: m's ranking is tier 1's in tests/tui/test_tui_interventions.py
@pytest.mark.asyncio
async def test_the_head_ranking_is_walked_with_the_arrow_keys_and_scrolls(monkeypatch):
    monkeypatch.setattr(head_ranking, "IMPORTANCE_SEQUENCES", 16)
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        await pilot.press("m")
        await wait_for(pilot, lambda: screen.session.importance is not None, "the ranking")
        names = [e.head for e in screen.session.importance.heads]
        box = screen.panel.grid_box
        assert box.max_scroll_y > 0  # 24 heads do not fit at 80x24
        start = names.index(str(screen.session.selected_head))  # the best head, somewhere in it
        for _ in range(len(names) - 1 - start):
            await pilot.press("down")
        assert str(screen.session.selected_head) == names[-1]

        def in_view(row: int) -> bool:
            line = RANKING_FIRST_ROW + row
            return box.scroll_y <= line < box.scroll_y + box.scrollable_content_region.height

        assert box.scroll_y > 0 and in_view(len(names) - 1)
        await pilot.press("k")  # the head on the row is the one knocked out
        assert screen.session.ablated == {screen.session.selected_head}
        await pilot.press("down")  # round to the first
        assert str(screen.session.selected_head) == names[0] and in_view(0)


@pytest.mark.asyncio
async def test_the_all_heads_view_names_each_heads_strongest_role():
    from minitx.core.interp.roles import strongest_roles

    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        screen = app.screen
        await pilot.press("a")
        await wait_for(pilot, lambda: screen.session.roles is not None, "the roles")
        await pilot.pause()
        expected = strongest_roles(app.current.model, app.current.task)
        assert screen.session.roles == expected
        lines = screen.panel.heads.render().plain.splitlines()
        under_layer_2 = next(line for i, line in enumerate(lines) if i and "H1 0.8" in lines[i - 1])
        assert under_layer_2.split() == ["anti-diag"] * 4  # reverse's layer 2 reads the mirror position
        assert [expected[f"cross:L2.H{h}"] for h in range(1, 5)] == ["anti-diagonal"] * 4


def test_keys_of_other_screens_say_where_they_work_instead_of_nothing():
    """- + S (the beam view's), u (Train's), 1 2 (Compare's) pressed on Explore: a line each."""
    from minitx.tui.app.key_reasons import works_elsewhere
    from minitx.tui.app.main import KEYS_ELSEWHERE
    from minitx.tui.app.screens.explore import ExploreScreen
    from minitx.tui.app.screens.train import TrainScreen

    said = {key: works_elsewhere(ExploreScreen(), key, KEYS_ELSEWHERE)
            for key in ("minus", "plus", "S", "u", "1", "2")}
    assert said["minus"] == "- is the beam view's key, not this screen's: B in Explore opens it"
    assert said["plus"].startswith("+ is the beam view's key") and said["S"].startswith("S is the beam")
    assert said["u"] == "u is Train's key, not this screen's: t goes there"
    assert said["1"].endswith("c goes there") and said["2"].startswith("2 is Compare's key")
    assert works_elsewhere(TrainScreen(), "n", KEYS_ELSEWHERE) == \
        "n is Explore's key, not this screen's: e goes there"
    assert works_elsewhere(ExploreScreen(), "j", KEYS_ELSEWHERE) is None  # nobody's key: ignored

