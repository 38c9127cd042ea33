"""Modal screens: a question with a key per answer, opening a checkpoint, forcing a token and
the failures list (the help is tui/app/help.py, made from the bindings)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from minitx.core.wording import counted
from minitx.tui.app.errors import error_text
from minitx.tui.app.messages import FailuresReady, ListingReady
from minitx.tui.app.widgets.decode_panel import middle_cut
from minitx.tui.render.numbers import percent


class ChoiceDialog(ModalScreen[str | None]):
    """A question with a key per answer: dismisses with the answer's value (esc: None). A question
    given as a function is asked again twice a second: what it counts (a run's unsaved steps)
    may go on changing behind the dialog."""

    LIVE_INTERVAL = 0.5

    def __init__(self, question: str | Callable[[], str], choices: list[tuple[str, str, str | None]]) -> None:
        super().__init__()
        self.question = question
        self.choices = choices  # (key, what it does, the value it answers)

    def question_text(self) -> str:
        return self.question() if callable(self.question) else self.question

    def compose(self) -> ComposeResult:
        with Vertical(id="choice-box", classes="dialog"):
            yield Static(self.question_text(), id="choice-question", markup=False)
            for key, label, _ in self.choices:
                shown = "esc" if key == "escape" else key
                # The key, then the label in a column of its own: a long label (a path) wraps
                # under itself, never under the key.
                with Horizontal(classes="choice"):
                    yield Static(f" {shown} ", classes="choice-key", markup=False)
                    yield Static(label, classes="choice-label", markup=False)

    def on_mount(self) -> None:
        self.query_one("#choice-box").border_title = "minitx asks"
        if callable(self.question):
            self.set_interval(self.LIVE_INTERVAL, self._ask_again)

    def _ask_again(self) -> None:
        self.query_one("#choice-question", Static).update(self.question_text())

    def on_key(self, event) -> None:
        answers = {key: value for key, _, value in self.choices}
        event.stop()
        if event.key in answers:
            self.dismiss(answers[event.key])
        elif event.key == "escape":
            self.dismiss(None)


def show_options(option_list: OptionList, options: list[Option], empty: str) -> None:
    """A dialog's list: its options with the first highlighted (Enter takes it, ↓ goes to the
    second); a list with nothing to choose says `empty` and takes no focus, so Tab stays in
    the dialog's path field and nothing typed there goes to the list."""
    option_list.clear_options()
    option_list.add_options(options or [Option(empty, disabled=True)])
    option_list.disabled = not options
    if options:
        option_list.highlighted = 0


NAME_COLUMN = 36  # the widest name column of the open dialog: the details keep the rest of 80


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
            yield Label("or type a .safetensors path, a model folder, or a folder to list (Enter):")
            yield Input(placeholder="path/to/model.safetensors", id="open-path", compact=True)
            yield Static("", id="open-error", markup=False)
            yield Label("[dim]↑↓ choose · Enter opens · Tab to the path · esc cancels[/dim]")

    def on_mount(self) -> None:
        self.query_one("#open-box").border_title = self.title_text
        # at once: reading each file's header takes a while in a folder of large checkpoints
        self.query_one("#open-folder", Label).update(f"looking for checkpoints in {self.folder}…")
        self.query_one("#open-list", OptionList).add_option(Option("looking for checkpoints…", disabled=True))
        self.list_folder(self.folder)
        self.query_one("#open-list").focus()

    @work(thread=True, exclusive=True, group="list", exit_on_error=False)
    def list_folder(self, folder: str) -> None:
        from minitx import checkpoints
        from minitx.core.checkpoint import CheckpointError

        try:
            listings = checkpoints.list_checkpoints(folder)
            self.post_message(ListingReady(folder, listings, model_folders=checkpoints.model_folders(folder)))
        except (CheckpointError, OSError) as e:  # the bundled models at least
            self.post_message(ListingReady(folder, checkpoints.list_checkpoints(None), str(e)))

    def on_listing_ready(self, message: ListingReady) -> None:
        from minitx.checkpoints import BUNDLED_DIR

        folder, found = message.folder, message.listings
        if message.error:
            self._show_error(message.error)
        self.folder = folder
        label = self.query_one("#open-folder", Label)
        label.update(f"bundled models, *.safetensors and model folders in {folder}")
        options, self.paths = [], {}
        # One line each, in two columns: the name (a file's own: the folder is said above), cut in
        # its middle where it is long, then what it is; nothing wraps or scrolls sideways.
        rows = [(listing.name if listing.path.parent == BUNDLED_DIR else listing.path.name, listing.path,
                 _detail(listing)) for listing in found]
        rows += [(f"{path.name}/", path, "Hugging Face model folder") for path in message.model_folders]
        width = min(NAME_COLUMN, max((len(name) for name, _, _ in rows), default=0))
        for i, (name, path, detail) in enumerate(rows):
            key = f"ckpt-{i}"
            self.paths[key] = str(path)
            line = Text(f"{middle_cut(name, width):<{width}}  {detail}", no_wrap=True, overflow="ellipsis")
            options.append(Option(line, id=key))
        show_options(self.query_one("#open-list", OptionList), options, "no checkpoints here")

    def _show_error(self, message: str) -> None:
        self.query_one("#open-error", Static).update(f"✗ {message}" if message else "")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A listed file of a model folder (the app started inside one lists its weights) opens
        the folder, as the same file typed does."""
        from minitx.checkpoints import model_folder_of

        if event.option.id in self.paths:
            path = self.paths[event.option.id]
            self.dismiss(str(model_folder_of(path) or path))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """A model folder, or a file of one (its config.json, its weights), opens that model; any
        other folder is listed; anything else is opened as a checkpoint (or says why not)."""
        from minitx.checkpoints import model_folder_of

        text = event.value.strip()
        path = Path(text).expanduser()
        folder = model_folder_of(path) if text else None
        if not text:
            self._show_error("type a path first")
        elif folder is not None:
            self.dismiss(str(folder))
        elif path.is_dir():
            self._show_error("")
            self.list_folder(str(path))
        else:
            self.dismiss(text)


def _detail(listing) -> str:
    """What a listed checkpoint is: its task, steps and accuracy, or why it cannot be read."""
    if listing.error:
        return f"unreadable: {listing.error}"
    acc = "" if listing.accuracy is None else f"  acc {percent(listing.accuracy)}"
    steps = "" if listing.steps is None else f"  {counted(listing.steps, 'step')}"
    return f"{listing.task}{steps}{acc}"


PAIR_SUFFIXES = (".tsv", ".csv", ".jsonl")  # the pair files core reads (docs/data.md)


class PairsFileScreen(ModalScreen[str | None]):
    """Choose a file of source/target pairs in the app's folder, or type a path: what the model
    on screen is measured on (O). Dismisses with the path; the app reads it."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, model_name: str, folder: str | None = None) -> None:
        super().__init__()
        self.model_name, self.folder = model_name, Path(folder or Path.cwd())

    def compose(self) -> ComposeResult:
        found = sorted(p for p in self.folder.iterdir() if p.suffix in PAIR_SUFFIXES and p.is_file()) \
            if self.folder.is_dir() else []
        with Vertical(id="pairs-box", classes="dialog"):
            yield Label(f"pair files in {self.folder}", id="pairs-folder", markup=False)
            yield OptionList(id="pairs-list")
            yield Label("or type a path (.tsv: source<TAB>target a line; .csv; .jsonl):")
            yield Input(placeholder="path/to/pairs.tsv", id="pairs-path", compact=True)
            yield Static("", id="pairs-error", markup=False)
            yield Label("[dim]↑↓ choose · Enter measures on it · Tab to the path · esc cancels[/dim]")
        self.found = found

    def on_mount(self) -> None:
        self.query_one("#pairs-box").border_title = f"pairs to measure {self.model_name} on"
        found = [Option(p.name, id=f"pairs-{i}") for i, p in enumerate(self.found)]
        show_options(self.query_one("#pairs-list", OptionList), found, "none here: type a path")
        self.query_one("#pairs-list" if self.found else "#pairs-path").focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id and event.option.id.startswith("pairs-"):
            self.dismiss(str(self.found[int(event.option.id.split("-")[1])]))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        path = Path(text).expanduser()
        if not text or not path.is_file():
            self.query_one("#pairs-error", Static).update(
                f"✗ no such file: {text}" if text else "✗ type a path first")
        else:
            self.dismiss(str(path))


class ForceTokenScreen(ModalScreen[int | None]):
    """Ask which token to output at the current step; dismisses with its id, or None on esc. A
    token is typed as the screen shows it or as its vocabulary spells it (a subword piece's
    "▁house" is "·house" on screen): both, as `minitx attribute --target` reads one."""

    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]

    def __init__(self, step: int, vocab, predicted: str) -> None:
        """step: 1-based, as the app counts; vocab: the model's output vocabulary (core Vocab)."""
        super().__init__()
        self.step, self.vocab, self.predicted = step, vocab, predicted

    def compose(self) -> ComposeResult:
        from rich.markup import escape

        vocab = self.vocab
        tokens = " ".join(vocab.label(i) for i in range(vocab.size) if i not in (vocab.pad, vocab.sos))
        with Vertical(id="force-box", classes="dialog"):
            yield Label(f"At step {self.step} the model chose {escape(self.predicted)}. Output instead:")
            yield Input(placeholder="a token, e.g. 7 or <eos>", id="force-token", compact=True)
            yield Static("", id="force-error", markup=False)
            yield Label(f"[dim]tokens: {escape(tokens)}[/dim]")
            yield Label("[dim]Enter forces it and decodes on from there · esc cancels[/dim]")

    def on_mount(self) -> None:
        self.query_one("#force-box").border_title = f"force a token at step {self.step}"
        self.query_one("#force-token").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        from minitx.core.interp.source_attribution import target_id

        text = event.value.strip()
        try:
            self.dismiss(target_id(self.vocab, text))
            return
        except ValueError:
            pass
        shown = text if len(text) <= 12 else text[:12] + "…"
        self.query_one("#force-error", Static).update(
            f"✗ {shown!r} is not a token of this model" if text else "✗ type a token first")


class FailuresScreen(ModalScreen[object]):
    """The sequences the model on screen gets wrong (with its heads knocked out, if any), each
    with the step where it first goes wrong; Enter opens one in Explore at that step."""

    BINDINGS = [Binding("escape", "dismiss(None)", "close")]
    SEQUENCES = 500

    def __init__(self, model, task, interventions) -> None:
        super().__init__()
        self.decoded = (model, task, interventions)  # (Screen has a `task` of its own)
        self.failures: list = []

    @property
    def count(self) -> int:
        """What is decoded: SEQUENCES fresh ones, or every held-out pair of a data file up to it."""
        return self.decoded[1].evaluation_count(self.SEQUENCES)

    def compose(self) -> ComposeResult:
        with Vertical(id="failures-box", classes="dialog"):
            yield Label(f"decoding {self.count} {self.decoded[1].evaluated_on}…", id="failures-summary")
            yield OptionList(id="failures-list")
            yield Label("[dim]↑↓ choose · Enter opens it in Explore at its first wrong step · "
                        "esc closes[/dim]")

    def on_mount(self) -> None:
        self.query_one("#failures-box").border_title = "failures"
        self.query_one("#failures-list").loading = True
        self.find()

    @work(thread=True, exclusive=True, group="failures", exit_on_error=False)
    def find(self) -> None:
        from minitx.core.training.evaluation import find_failures

        model, task, interventions = self.decoded
        try:
            with interventions.applied(model):  # this thread only
                failures, wrong = find_failures(model, task, n=self.SEQUENCES, limit=100)
        except Exception as e:  # noqa: BLE001 - shown in the dialog, never a traceback
            self.post_message(FailuresReady([], 0, self.count, error_text(e)))
            return
        self.post_message(FailuresReady(failures, wrong, self.count))

    def on_failures_ready(self, message: FailuresReady) -> None:
        task = self.decoded[1]
        self.failures = message.failures
        listing = self.query_one("#failures-list", OptionList)
        listing.loading = False
        summary = self.query_one("#failures-summary", Label)
        if message.error:
            summary.update(f"✗ {message.error}")
            return
        shown = f" (the first {len(message.failures)})" if message.wrong > len(message.failures) else ""
        summary.update(f"{message.wrong} of {task.evaluation_count(message.n)} {task.evaluated_on} "
                       f"wrong{shown}")
        options = [Option(f"{task.format_source(f.source):<20} → {task.format(f.output):<20} "
                          f"wrong from step {f.first_wrong + 1}", id=f"failure-{i}")
                   for i, f in enumerate(message.failures)]
        show_options(listing, options, "none: every sequence is right")
        listing.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id and event.option.id.startswith("failure-"):
            self.dismiss(self.failures[int(event.option.id.split("-")[1])])
