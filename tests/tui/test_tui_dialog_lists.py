"""The list dialogs (o, Compare's 1 and 2, O, w) open on their first item, so Enter takes it and ↓
goes to the second; a list with nothing to choose takes no focus, so Tab keeps to the path
field and nothing typed is lost. The open dialog opens a Hugging Face model folder given as the
folder or as any file of it (its config.json, its weights), as the command line opens it."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, OptionList

from minitx import checkpoints
from minitx.tui.app.main import create_app
from minitx.tui.app.screens.dialogs import OpenCheckpointScreen, PairsFileScreen
from tests.tui.tui_helpers import wait_for


def model_folder(root: Path) -> Path:
    """A folder laid out as a Hugging Face model's (the dialog reads none of it: config.json is
    what makes it one, as for the command line)."""
    folder = root / "hf-tiny" / "marian"
    folder.mkdir(parents=True)
    for name in ("config.json", "generation_config.json", "model.safetensors", "source.spm", "vocab.json",
                 "model-00001-of-00002.safetensors"):
        (folder / name).write_text("{}")
    (folder / "mine.safetensors").write_text("")  # a checkpoint of its own kept beside them
    return folder


def test_a_model_folder_is_what_the_folder_or_any_file_of_it_opens(tmp_path):
    folder = model_folder(tmp_path)
    for path in (folder, folder / "config.json", folder / "model.safetensors", folder / "vocab.json",
                 folder / "model-00001-of-00002.safetensors"):
        assert checkpoints.model_folder_of(path) == folder, path
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("")
    for path in (folder / "mine.safetensors", plain, plain / "notes.txt", tmp_path / "missing", tmp_path):
        assert checkpoints.model_folder_of(path) is None, path
    assert checkpoints.model_folders(tmp_path / "hf-tiny") == [folder]


async def chosen_from(pilot, dialog, keys: list[str], typed: str = "") -> list:
    """Push `dialog`, press `keys` (typing `typed` where "TYPE" stands), return what it answered."""
    answers: list = []
    pilot.app.push_screen(dialog, answers.append)
    await wait_for(pilot, lambda: pilot.app.screen is dialog and dialog.query(OptionList), "the dialog")
    await pilot.pause()
    for key in keys:
        if key == "TYPE":
            await pilot.press(*typed)
        else:
            await pilot.press(key)
    return answers


@pytest.mark.slow  # tier 2: the open dialog's list is tier 1's
@pytest.mark.asyncio
async def test_list_dialogs_open_on_their_first_item_and_an_empty_one_keeps_tab_in_the_path(
        tmp_path, monkeypatch):
    folder = model_folder(tmp_path)
    (tmp_path / "pairs.tsv").write_text("3 1 4\t4 1 3\n")
    (tmp_path / "more.tsv").write_text("2 7\t7 2\n")
    monkeypatch.chdir(tmp_path)
    app = create_app(["reverse"])
    async with app.run_test(size=(80, 24)) as pilot:
        # o: the first bundled model is highlighted: Enter opens it, ↓ Enter the second
        dialog = OpenCheckpointScreen()
        answers = await chosen_from(pilot, dialog, [])
        await wait_for(pilot, lambda: dialog.paths, "the listing")
        await pilot.pause()
        listing = dialog.query_one("#open-list", OptionList)
        assert listing.highlighted == 0 and app.focused is listing
        names = checkpoints.bundled_names()
        await pilot.press("down", "enter")
        assert answers == [str(checkpoints.resolve(names[1]))]
        # O, with files: the first is highlighted and Enter takes it
        answers = await chosen_from(pilot, PairsFileScreen("reverse", str(tmp_path)), ["enter"])
        assert answers == [str(tmp_path / "more.tsv")]
        # O, with none: the list is not a stop of Tab; what is typed after Tab stays in the path
        empty = tmp_path / "empty"
        empty.mkdir()
        dialog = PairsFileScreen("reverse", str(empty))
        answers = await chosen_from(pilot, dialog, ["tab", "TYPE"], typed="pairs.tsv")
        assert dialog.query_one("#pairs-path", Input).value == "pairs.tsv"
        assert dialog.query_one("#pairs-list", OptionList).disabled
        await pilot.press("enter")
        assert answers == [str(Path("pairs.tsv"))]
        # o on a folder that holds model folders lists them; typing one, or a file of it, opens it
        for typed in ("hf-tiny/marian", "hf-tiny/marian/config.json", "hf-tiny/marian/model.safetensors"):
            dialog = OpenCheckpointScreen(folder=str(folder.parent))
            answers = await chosen_from(pilot, dialog, [])
            await wait_for(pilot, lambda d=dialog: any(p == str(folder) for p in d.paths.values()), "listing")
            dialog.query_one("#open-path", Input).value = typed
            dialog.query_one("#open-path", Input).focus()
            await pilot.press("enter")
            assert [Path(a).resolve() for a in answers] == [folder.resolve()], typed
        # started inside the folder, o lists its weights: choosing them opens the folder too
        dialog = OpenCheckpointScreen(folder=str(folder))
        answers = await chosen_from(pilot, dialog, [])
        await wait_for(pilot, lambda: any(p.endswith("/model.safetensors") for p in dialog.paths.values()),
                       "the folder's files")
        listing = dialog.query_one("#open-list", OptionList)
        weights = [p.endswith("/model.safetensors") for p in dialog.paths.values()]  # in the list's order
        listing.highlighted = weights.index(True)
        await pilot.press("enter")
        assert answers == [str(folder)]
