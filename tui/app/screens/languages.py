"""The language picker (L): a multilingual model's source and target languages (mBART-50,
NLLB-200), each typed or chosen from its codes, checked as the command line's --src-lang and
--tgt-lang are (core/data/languages.py). Dismisses with (source, target); the app applies them."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option


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
