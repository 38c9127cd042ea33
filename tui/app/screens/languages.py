"""The language picker (L on Explore): a multilingual model's source and target languages
(mBART-50, NLLB-200), each typed or chosen from its codes, checked as the command line's
--src-lang and --tgt-lang are (core/data/languages.py): the dialog, and the app's side of it
(LanguageKeys, a mixin of the app), which applies them to the model on screen."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from minitx.tui.app.loaded import LoadedModel, describe_again
from minitx.tui.app.messages import ModelLoaded


class LanguageScreen(ModalScreen[tuple[str, str] | None]):
    """Two fields, the source's code and the target's, and the model's codes to choose from:
    a code chosen in the list goes into the field that had the focus last."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, model_name: str, codes: tuple[str, ...], source: str, target: str | None) -> None:
        super().__init__()
        self.model_name, self.codes = model_name, codes
        self.source, self.target = source, target or ""
        self.field = "#language-target"  # where a code chosen in the list goes

    def compose(self) -> ComposeResult:
        with Vertical(id="language-box", classes="dialog"):
            yield Label("source language:")
            yield Input(self.source, id="language-source", compact=True)
            yield Label("target language (forced as the first output token):")
            yield Input(self.target, placeholder="blank: as it is", id="language-target", compact=True)
            yield OptionList(*(Option(code, id=f"code-{i}") for i, code in enumerate(self.codes)),
                             id="language-list")
            yield Static("", id="language-error", markup=False)
            yield Label("[dim]Tab next · Enter translates or picks · esc cancels[/dim]")

    def on_mount(self) -> None:
        self.query_one("#language-box").border_title = f"languages of {self.model_name}"
        self.query_one("#language-target").focus()

    def on_descendant_focus(self, event) -> None:
        if isinstance(event.widget, Input):
            self.field = f"#{event.widget.id}"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one(self.field, Input).value = str(event.option.prompt)
        self.query_one(self.field, Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        source = self.query_one("#language-source", Input).value.strip()
        target = self.query_one("#language-target", Input).value.strip()
        unknown = [code for code in (source, target) if code and code not in self.codes]
        if not source or unknown:
            error = (f"✗ {unknown[0]!r} is not one of the {len(self.codes)} codes" if unknown
                     else "✗ the source needs a language")
            self.query_one("#language-error", Static).update(error)
            return
        self.dismiss((source, target))


class LanguageKeys:
    """The app's L: the picker for the model on screen, and the model reading and answering in
    the languages chosen there (a worker: the head scores are measured again)."""

    def languages_why_not(self) -> str | None:
        """Why L does nothing now (off the footer and the help, and said when pressed), or None."""
        from minitx.core.data.languages import languages

        if not self.model_ready:
            return "no model loaded yet: languages are a multilingual model's"
        if not languages(self.current.task):
            return f"{self.current.name} has no language codes (mBART-50 and NLLB-200 have them)"
        return None

    def action_languages(self) -> None:
        from minitx.core.data.languages import current, languages

        why = self.languages_why_not()
        if why:
            self.notify(why)
            return
        codes = languages(self.current.task)

        def chosen(answer: tuple[str, str] | None) -> None:
            if answer:
                self.speak(self.current, *answer)

        if not isinstance(self.screen, LanguageScreen):
            source, _ = current(self.current.task)
            target = self.current.model.generation.forced_bos
            target = self.current.task.vocab.tokens[target] if target is not None else None
            target = target if target in codes else None
            self.push_screen(LanguageScreen(self.current.name, codes, source, target), chosen)

    @work(thread=True, exclusive=True, group="pairs", exit_on_error=False)
    def speak(self, record: LoadedModel, source: str, target: str) -> None:
        """The same model reading sources in `source` and forced to answer in `target` (blank:
        as it was), as --src-lang and --tgt-lang set them."""
        from minitx.core.data.languages import with_languages

        task, generation = with_languages(record.task, record.model.generation, source, target or None)
        record.model.generation = generation
        where = f"{source} → {target}" if target else f"from {source}"
        self.post_message(ModelLoaded(describe_again(record, task), announce=False,
                                      note=f"{record.name} translates {where}"))

