"""The language picker (L) on a tiny NLLB folder at 80x24: it offers the model's codes, refuses a
code the model lacks in one line and stays open, and a source and target chosen there are what
the next decode uses (the source's code first, the target's forced as the first output), as
--src-lang and --tgt-lang set them. An app flow: tier 2."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Static

from minitx.tui.app.main import create_app
from minitx.tui.app.screens.languages import LanguageScreen
from tests.huggingface.tiny_folders import save_model
from tests.tui.tui_helpers import model_ready, screen_text, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.asyncio
async def test_languages_chosen_in_the_picker_are_what_the_decode_uses(tmp_path):
    folder = str(save_model(tmp_path / "nllb", "nllb"))
    app = create_app([folder])
    async with app.run_test(size=(80, 24)) as pilot:
        await model_ready(pilot)
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, LanguageScreen), "the picker")
        text = screen_text(app)
        assert "languages of nllb" in text and "deu_Latn" in text
        app.screen.query_one("#language-source", Input).value = "deu_Latn"
        app.screen.query_one("#language-target", Input).value = "fra"
        await pilot.press("enter")
        assert isinstance(app.screen, LanguageScreen)
        error = str(app.screen.query_one("#language-error", Static).render())
        assert "'fra' is not one of the 4 codes" in error
        app.screen.query_one("#language-target", Input).value = "fra_Latn"
        task = app.current.task
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current.task is not task, "the languages applied")
        fra = app.current.task.vocab.tokeniser.token_id("fra_Latn")
        assert app.current.model.generation.forced_bos == fra
        await pilot.press("enter")  # decode the example to its end
        session = app.screen.session
        await wait_for(pilot, lambda: session.stepper is not None and session.stepper.finished, "the decode")
        assert session.stepper.src_ids[0] == app.current.task.src_vocab.tokeniser.token_id("deu_Latn")
        assert session.stepper.tokens[0] == fra
