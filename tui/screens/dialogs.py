"""Modal screens: help, a question with a key per answer, and opening a checkpoint."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from minitx.tui.format import percent
from minitx.tui.messages import ListingReady

HELP = """\
[b]minitx[/b]: a small encoder-decoder Transformer to train and watch think.
[b]Explore[/b]  i or / edit the source: Enter decodes it, esc leaves it
  → n step   ← b back   ⏎ r run to the end   x reset   < > columns (if cut)
  \\[ ] previous / next layer   , . previous / next head   # numbers in cells
  a every head with its alignment score   s decoder self-attention
  h how the probe's attention formed in training: ← → step, p play
  Rows: tokens generated; columns: source tokens; ◂ marks this step. A
  reverse model draws an [b]anti-diagonal[/b]: output i looks at source n-1-i.
[b]Train[/b]    Tab moves into the form (← → change a choice), esc leaves it
  space start / pause   x stop   w save (the path is shown)   u explore run
  from: a recipe, or the open checkpoint's configs (like) or run (resume)
  until: stop at this exact match (0.99)   probe: the source it snapshots
  v curves / attention   g next chart   l log / linear   m smooth   k x axis
  After a run the attention view replays its snapshots: ← → step, p play.
[b]Compare[/b]  minitx-tui A B, or c: two models on one source, in step
  the Explore keys drive both   1 / 2  choose model A / B   d checks both
  |A−B|: how differently they attend (red: very); ≠ rows differ in tokens
  v A's and B's training curves overlaid (g l m k as in Train)
[b]Anywhere[/b] o open   d doctor   e / t / c explore / train / compare   q quit
  Quitting with an unsaved run asks first: save it, drop it, or go on.
Reference: docs/ (model.md, training.md, curves.md, checks.md: the doctor)
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="dialog"):
            yield Static(HELP.rstrip(), id="help-text")  # no blank line: at 80x24 every line counts
            yield Label("[dim]esc, ? or q closes this help[/dim]")

    def on_mount(self) -> None:
        self.query_one("#help-box").border_title = "help"


class ChoiceDialog(ModalScreen[str | None]):
    """A question with a key per answer: dismisses with the answer's value (esc: None)."""

    def __init__(self, question: str, choices: list[tuple[str, str, str | None]]) -> None:
        super().__init__()
        self.question = question
        self.choices = choices  # (key, what it does, the value it answers)

    def compose(self) -> ComposeResult:
        from rich.markup import escape

        with Vertical(id="choice-box", classes="dialog"):
            yield Static(escape(self.question), id="choice-question")
            for key, label, _ in self.choices:
                shown = "esc" if key == "escape" else key
                yield Static(f"[reverse b] {shown} [/]  {escape(label)}")  # wraps: a long path stays whole

    def on_mount(self) -> None:
        self.query_one("#choice-box").border_title = "minitx asks"

    def on_key(self, event) -> None:
        answers = {key: value for key, _, value in self.choices}
        event.stop()
        if event.key in answers:
            self.dismiss(answers[event.key])
        elif event.key == "escape":
            self.dismiss(None)


class OpenCheckpointScreen(ModalScreen[str | None]):
    """Pick a bundled model or a *.safetensors file in a folder, or type a path.
    Dismisses with the chosen name or path; the app loads it (and keeps the old model if
    it cannot)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, title: str = "open a checkpoint", folder: str | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.folder = folder or str(Path.cwd())
        self.paths: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="open-box", classes="dialog"):
            yield Label("", id="open-folder")
            yield OptionList(id="open-list")
            yield Label("or type a .safetensors path, or a folder to list (Enter):")
            yield Input(placeholder="path/to/model.safetensors", id="open-path", compact=True)
            yield Static("", id="open-error", markup=False)
            yield Label("[dim]↑↓ choose · Enter opens · Tab to the path · esc cancels[/dim]")

    def on_mount(self) -> None:
        self.query_one("#open-box").border_title = self.title_text
        self.list_folder(self.folder)
        self.query_one("#open-list").focus()

    @work(thread=True, exclusive=True, group="list", exit_on_error=False)
    def list_folder(self, folder: str) -> None:
        from minitx import checkpoints
        from minitx.core.checkpoint import CheckpointError

        try:
            self.post_message(ListingReady(folder, checkpoints.list_checkpoints(folder)))
        except CheckpointError as e:  # the bundled models at least
            self.post_message(ListingReady(folder, checkpoints.list_checkpoints(None), str(e)))

    def on_listing_ready(self, message: ListingReady) -> None:
        folder, found = message.folder, message.listings
        if message.error:
            self._show_error(message.error)
        self.folder = folder
        label = self.query_one("#open-folder", Label)
        label.update(f"bundled models and *.safetensors in {folder}")
        options, self.paths = [], {}
        for i, listing in enumerate(found):
            key = f"ckpt-{i}"
            self.paths[key] = str(listing.path)
            if listing.error:
                detail = f"unreadable: {listing.error}"
            else:
                acc = "" if listing.accuracy is None else f"  acc {percent(listing.accuracy)}"
                steps = "" if listing.steps is None else f"  {listing.steps} steps"
                detail = f"{listing.task}{steps}{acc}"
            options.append(Option(f"{listing.name}  ·  {detail}", id=key))
        option_list = self.query_one("#open-list", OptionList)
        option_list.clear_options()
        option_list.add_options(options or [Option("no checkpoints here", disabled=True)])

    def _show_error(self, message: str) -> None:
        self.query_one("#open-error", Static).update(f"✗ {message}" if message else "")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id in self.paths:
            self.dismiss(self.paths[event.option.id])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self._show_error("type a path first")
        elif Path(text).expanduser().is_dir():
            self._show_error("")
            self.list_folder(str(Path(text).expanduser()))
        else:
            self.dismiss(text)
