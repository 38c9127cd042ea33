"""Typing in the app: a focused text field takes every printable character, on every screen and
in every dialog, and no key of the screen or the app fires meanwhile (`w` does not save, `x`
does not stop, `q` does not quit, `?` opens no help)."""

from __future__ import annotations

import string

import pytest
from textual import events
from textual.keys import _character_to_key
from textual.widgets import Input

from minitx.tui.app.main import create_app
from tests.tui.tui_helpers import model_ready, notifications, on_train_screen, reverse_checkpoint, wait_for

PRINTABLE = "".join(c for c in string.printable if c.isprintable())  # the 95 of ASCII, space too


async def type_everything(pilot, field: Input) -> None:
    """Type every printable character into `field` and check that all of them landed there and
    nothing else happened: the same screen on top, no message."""
    screen, said = pilot.app.screen, len(notifications(pilot.app))
    field.value = ""
    field.focus()
    await pilot.pause()
    # What a terminal sends for each character, all at once (Pilot's press waits after every key:
    # 95 keys in each of 20 fields took minutes); the app handles them in order.
    for character in PRINTABLE:
        pilot.app.post_message(events.Key(_character_to_key(character), character))
    try:
        await wait_for(pilot, lambda: field.value == PRINTABLE or pilot.app.screen is not screen,
                       f"the keys typed in #{field.id}", timeout=10)
    except AssertionError:
        pass  # said below: which keys were lost
    assert field.value == PRINTABLE, f"#{field.id} lost keys: {field.value!r}"
    assert pilot.app.screen is screen, f"a key typed in #{field.id} opened {pilot.app.screen!r}"
    assert len(notifications(pilot.app)) == said, notifications(pilot.app)[said:]


async def type_into_the_train_form(chosen=None) -> None:
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await on_train_screen(pilot)
        fields = list(screen.query(Input))
        assert {"steps", "lr", "data", "probe_source", "until"} <= {f.id for f in fields}
        for field in fields:  # (a field off for this run takes no keys: a fine-tune's general pairs)
            if (chosen is None and not field.disabled) or (chosen and field.id in chosen):
                await type_everything(pilot, field)
                assert screen.state == "idle" and screen.current_run is None  # space, x, w, u did nothing
        await pilot.press("enter")  # Enter starts a run from a field: this form cannot start
        assert screen.state == "idle" and screen.form_error


@pytest.mark.slow  # tier 2: every one of some twenty fields (~20 s); tier 1 types into one
@pytest.mark.asyncio
async def test_every_text_field_of_the_train_form_takes_every_printable_character():
    await type_into_the_train_form()


@pytest.mark.slow  # tier 2: Explore's fields are tier 1's
@pytest.mark.asyncio
async def test_a_text_field_of_the_train_form_takes_every_printable_character():
    await type_into_the_train_form({"probe_source"})


@pytest.mark.asyncio
async def test_explore_and_its_dialogs_take_every_printable_character():
    app = create_app([reverse_checkpoint()])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        explore = app.screen
        await type_everything(pilot, explore.query_one("#source", Input))
        await pilot.press("escape")
        for key, field in (("f", "#force-token"), ("P", "#patch-source"), ("o", "#open-path")):
            await pilot.press(key)
            await wait_for(pilot, lambda: app.screen is not explore, f"the dialog of {key}")
            await type_everything(pilot, app.screen.query_one(field, Input))
            app.screen.dismiss(None)
            await pilot.pause()


@pytest.mark.slow  # tier 2: Explore's fields are tier 1's
@pytest.mark.asyncio
async def test_compare_takes_every_printable_character_in_its_source_and_its_open_dialog():
    app = create_app([reverse_checkpoint(), "copy"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: bool(app.screen.models), "both models")
        compare = app.screen
        await type_everything(pilot, compare.query_one("#source", Input))
        await pilot.press("escape", "2")
        await wait_for(pilot, lambda: app.screen is not compare, "the open dialog")
        await type_everything(pilot, app.screen.query_one("#open-path", Input))
