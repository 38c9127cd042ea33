"""A monkey at the keyboard: seeded random keys on every screen of the app (every key bound
anywhere, esc, Enter, Tab, the arrows, digits, letters, and resizes), on the bundled model, on a
Hugging Face folder and during a run. No key may end the app with a traceback (run_test raises
if one did), none may fail with an exception nobody expected (one_line_errors would turn it into
"unexpected error: ..."), and no file may be lost: the files in the app's folder stay as they
were, and what the app wrote there (a saved run, an export) is whole.

Tier 1 holds the keys that used to end the app (a screen asked about its keys before it had
composed: `s c`, `r c`, `n c`, a sentence typed without `i`) and a short monkey; tier 2 the long
ones, from every screen, on each model.
"""

from __future__ import annotations

import hashlib
import random
import string
from collections import Counter
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList

from minitx.tui.app.help import HelpScreen
from minitx.tui.app.key_reasons import bound_keys, refusal
from minitx.tui.app.main import KEYS_ELSEWHERE, MinitxApp, create_app
from minitx.tui.app.screens import compare as compare_screen
from minitx.tui.app.screens.beam import BeamScreen
from minitx.tui.app.screens.circuit import CircuitScreen
from minitx.tui.app.screens.compare import CompareScreen
from minitx.tui.app.screens.dialogs import (
    ChoiceDialog,
    FailuresScreen,
    ForceTokenScreen,
    OpenCheckpointScreen,
    PairsFileScreen,
)
from minitx.tui.app.screens.doctor import DoctorScreen
from minitx.tui.app.screens.explore import ExploreScreen
from minitx.tui.app.screens.patch import PatchScreen
from minitx.tui.app.screens.train import TrainScreen
from minitx.tui.app.widgets.choice import ChoiceField
from minitx.tui.app.widgets.train_form import TrainForm
from tests.huggingface.tiny_folders import save_model
from tests.reliability.test_tui_robustness import press, record_notifications, resize
from tests.tui.tui_helpers import fill_form, model_ready, on_train_screen, wait_for

MONKEY_SEED = 43
SCREENS = (MinitxApp, ExploreScreen, TrainScreen, CompareScreen, BeamScreen, CircuitScreen, DoctorScreen,
           PatchScreen, HelpScreen, ChoiceDialog, OpenCheckpointScreen, PairsFileScreen, ForceTokenScreen,
           FailuresScreen, ChoiceField)
QUITTING = {"q", "ctrl+c"}  # only where the screen itself closes on it (help, beam, circuit, doctor)
MOVING = ["escape", "enter", "tab", "shift+tab", "up", "down", "left", "right", "home", "end", "backspace"]
PAIRS = "3 1 4\t4 1 3\n2 7 1 8\t8 1 7 2\n"  # a pairs file in the app's folder, for O to find


def every_key() -> list[str]:
    """Every key bound on a screen or dialog of the app, and the keys a person reaches for."""
    bound = {key for node in SCREENS for b in node.BINDINGS if isinstance(b, Binding)
             for key in bound_keys(b)}
    typed = set(string.ascii_letters) | set(string.digits) | {"space", "minus", "plus"}
    return sorted(bound | typed | set(MOVING))


KEYS = every_key()


def next_key(app, rng: random.Random) -> str:
    """A random key, save two kinds: q where it would end the app rather than close the screen
    on top (the end would end the monkey), and characters typed into the train form's fields
    (digits there can ask, rightly, for a model too large to train in a test; the form's own
    tests type into it)."""
    key = rng.choice(KEYS)
    if key in QUITTING and not any(key in bound_keys(b) for b in app.screen.BINDINGS):
        return "escape"
    focused = app.focused
    in_form = focused is not None and any(isinstance(n, TrainForm) for n in focused.ancestors)
    if in_form and isinstance(focused, Input) and key not in MOVING:
        return "tab"
    return key


async def monkey(pilot, rng: random.Random, count: int) -> Counter:
    """`count` random keys, one resize in about twenty; what it did, and on which screens."""
    done: Counter = Counter()
    for _ in range(count):
        if rng.random() < 0.05:
            await resize(pilot, rng.choice((60, 80, 100, 120)), rng.choice((20, 24, 32)))
            done["resize"] += 1
        else:
            await press(pilot, next_key(pilot.app, rng))
            done["key"] += 1
        done[type(pilot.app.screen).__name__] += 1
        if rng.random() < 0.1:
            await pilot.pause(0.01)  # now and then a worker's answer comes in between keys
    return done


def folder_state(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def unexpected(app) -> list[str]:
    return [m for _, m in app.seen if "unexpected error" in m]


@pytest.fixture
def app_folder(tmp_path, monkeypatch):
    """The app's folder, with a checkpoint and a pairs file in it that no key may change."""
    from minitx import checkpoints

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(compare_screen, "SUMMARY_SEQUENCES", 8)  # Compare's summary: a moment
    (tmp_path / "pairs.tsv").write_text(PAIRS)
    (tmp_path / "mine.safetensors").write_bytes(checkpoints.resolve("copy").read_bytes())
    return tmp_path


def make_app(folder: Path, names: list[str]) -> MinitxApp:
    app = create_app(names)
    app.save_dir, app.export_dir = folder, folder / "minitx-exports"
    app.seen = record_notifications(app)  # (severity, message) of every message shown
    return app


async def back_to_explore(pilot) -> None:
    """Out of any dialog and text field, then e: Explore, with a model, as a person gets back."""
    app = pilot.app
    for _ in range(12):
        if isinstance(app.screen, ExploreScreen) and not isinstance(app.focused, Input) and app.model_ready:
            return
        await press(pilot, "escape" if isinstance(app.screen, ModalScreen) or isinstance(app.focused, Input)
                    else "e")
        await pilot.pause(0.05)
    await wait_for(pilot, lambda: isinstance(app.screen, ExploreScreen) and app.model_ready, "Explore", 30)


async def leave_modals(pilot) -> None:
    for _ in range(6):
        if not isinstance(pilot.app.screen, ModalScreen):
            return
        await press(pilot, "escape")
        await pilot.pause(0.01)


def nothing_lost(folder: Path, before: dict[str, str]) -> None:
    """The files that were there are as they were; every checkpoint the app wrote loads."""
    from minitx import checkpoints

    after = folder_state(folder)
    assert {name: after.get(name) for name in before} == before
    for name in after:
        if name.endswith(".safetensors") and name not in before:
            checkpoints.load(folder / name)  # whole, or this raises
    assert not list(folder.rglob(".*.tmp")), "a save left its temporary file"


# Where a monkey starts: the keys that bring the app there from Explore.
STARTS = {"explore": [], "train": ["t"], "compare": ["c", "enter"], "beam": ["B"], "circuit": ["C"],
          "doctor": ["d"], "patch": ["P"], "help": ["question_mark"], "open": ["o"], "pairs": ["O"],
          "force": ["n", "f"], "failures": ["w"], "source": ["i"]}
SHORT_STARTS = ("explore", "compare", "beam", "help", "open")  # tier 1: the cheap ones
LONG, SHORT = 150, 10  # keys from each start


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory) -> str:
    return str(save_model(tmp_path_factory.mktemp("hf") / "tiny-marian", "marian"))


def listed(picker) -> bool:
    """Whether the open dialog has listed its folder (it says it is looking until then)."""
    options = picker.query_one("#open-list", OptionList)
    return options.option_count > 0 and not options.get_option_at_index(0).disabled


async def from_every_screen(pilot, seed: int, starts=tuple(STARTS), keys_each: int = LONG) -> Counter:
    seen: Counter = Counter()
    for i, start in enumerate(starts):
        await back_to_explore(pilot)
        for key in STARTS[start]:
            if key == "enter" and isinstance(pilot.app.screen, OpenCheckpointScreen):
                await wait_for(pilot, lambda: listed(pilot.app.screen), "the picker's checkpoints", 10)
            await press(pilot, key)
            await pilot.pause(0.05)
        seen[f"started on {type(pilot.app.screen).__name__}"] += 1  # where the start's keys led
        seen.update(await monkey(pilot, random.Random(seed + i), keys_each))
    return seen


# -- tier 1 --------------------------------------------------------------------------------------


@pytest.mark.slow  # tier 2: the short monkey; the long ones below; each key's refusal: test_tui_keys.py
@pytest.mark.asyncio
async def test_early_and_foreign_keys_are_explained_and_a_short_monkey_ends_nothing_and_loses_nothing(
        app_folder):
    """s, r, n then c at once (and a sentence typed without i: its t, e and c switch screens):
    Compare is asked about its keys before it has composed its widgets, and must answer, not end
    the app. Another screen's key says where it works, unless a field has the focus (its keys
    are its own). Then a short monkey from five screens."""
    before = folder_state(app_folder)
    app = make_app(app_folder, ["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        for first in ("s", "r", "n", "the cat sat"):
            for key in first.replace(" ", ""):
                app.simulate_key(key)
            app.simulate_key("c")
            app.simulate_key("x")  # a key of Compare's, while it opens
            await wait_for(pilot, lambda: isinstance(app.screen, OpenCheckpointScreen), "the B picker", 10)
            assert app.current_mode == "compare"
            await back_to_explore(pilot)
        said = len(app.seen)
        await press(pilot, "u")
        assert app.seen[said:] == [("information", "u is Train's key, not this screen's: t goes there")]
        await press(pilot, "i")  # a field has the focus: its keys are its own, nobody else's
        await wait_for(pilot, lambda: isinstance(app.focused, Input), "the source field's focus", 10)
        assert isinstance(app.focused, Input) and refusal(app.screen, "u", KEYS_ELSEWHERE) is None
        app.screen.set_focus(None)
        assert refusal(app.screen, "u", KEYS_ELSEWHERE) == app.seen[said][1]
        await back_to_explore(pilot)
        seen = await from_every_screen(pilot, MONKEY_SEED, SHORT_STARTS, SHORT)
        # each start's keys reached its screen: the monkey typed where it was meant to, not on one screen
        started = {name.removeprefix("started on ") for name in seen if name.startswith("started on ")}
        assert started == {"ExploreScreen", "CompareScreen", "BeamScreen", "HelpScreen",
                           "OpenCheckpointScreen"}, seen
        assert app.is_running and not unexpected(app), unexpected(app)
        await leave_modals(pilot)
    nothing_lost(app_folder, before)


# -- tier 2 --------------------------------------------------------------------------------------

@pytest.mark.slow  # tier 2: thousands of keys
@pytest.mark.asyncio
@pytest.mark.parametrize("model", ["reverse", "huggingface"])
async def test_a_long_monkey_from_every_screen_ends_nothing_and_loses_nothing(
        app_folder, marian_folder, model):
    before = folder_state(app_folder)
    app = make_app(app_folder, [marian_folder if model == "huggingface" else "reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        seen = await from_every_screen(pilot, MONKEY_SEED)
        reached = {name for name in seen if name.endswith(("Screen", "Dialog"))}
        assert {"ExploreScreen", "TrainScreen", "CompareScreen", "BeamScreen", "HelpScreen",
                "OpenCheckpointScreen"} <= reached, reached
        assert app.is_running and not unexpected(app), unexpected(app)
        await leave_modals(pilot)
    nothing_lost(app_folder, before)


@pytest.mark.slow  # tier 2: a run trains while the monkey types
@pytest.mark.asyncio
async def test_a_long_monkey_during_a_run_ends_nothing_and_the_run_still_saves(app_folder):
    from minitx import checkpoints

    before = folder_state(app_folder)
    app = make_app(app_folder, ["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        train = await on_train_screen(pilot)
        fill_form(train, steps="100000")
        await press(pilot, "space")
        await wait_for(pilot, lambda: len(train.losses) >= 3, "training")
        await monkey(pilot, random.Random(MONKEY_SEED + 100), 4 * LONG)
        assert app.is_running and not unexpected(app), unexpected(app)
        await leave_modals(pilot)
        await press(pilot, "t")
        await wait_for(pilot, lambda: isinstance(app.screen, TrainScreen), "Train", 5)
        if isinstance(app.focused, Input):
            await press(pilot, "escape")
        if train.state in ("running", "paused"):
            await press(pilot, "x")
        await wait_for(pilot, lambda: train.state not in ("running", "paused", "stopping"),
                       "the run to end", 30)
        if train.trainer is not None and train.current_run is not None and train.current_run.unsaved_steps:
            await press(pilot, "w")
            await wait_for(pilot, lambda: train.current_run.unsaved_steps == 0, "the save", 30)
    nothing_lost(app_folder, before)
    saved = [p for p in app_folder.glob("*.safetensors") if p.name not in before]
    assert saved, "the run was never saved"  # all() of nothing would pass
    assert all(checkpoints.load(p).summary["steps"] > 0 for p in saved)
