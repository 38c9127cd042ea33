"""The minitx Textual app and the factory the CLI and the tests share.

Importing this module must not import torch: the first screen paints at once, and torch and
the model load in a thread worker while the screen says what it is loading.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.filter import Monochrome, NoColor
from textual.signal import Signal
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.app.errors import error_text
from minitx.tui.app.exports import EXPORT_BINDING, EXPORT_FOLDER, export_view
from minitx.tui.app.help import HELP_BINDING, HelpScreen
from minitx.tui.app.key_reasons import refusal
from minitx.tui.app.loaded import LoadedModel, describe_again, load_named, open_error
from minitx.tui.app.messages import LoadFailed, LoadProgress, ModelLoaded, PairsFailed
from minitx.tui.app.screens.alignment import AlignmentViews
from minitx.tui.app.screens.beam import DEFAULT_BEAMS, BeamScreen
from minitx.tui.app.screens.circuit import CircuitScreen
from minitx.tui.app.screens.compare import CompareScreen
from minitx.tui.app.screens.dialogs import (
    ChoiceDialog,
    FailuresScreen,
    ForceTokenScreen,
    OpenCheckpointScreen,
    PairsFileScreen,
)
from minitx.tui.app.screens.explore import ExploreScreen
from minitx.tui.app.screens.languages import LanguageKeys
from minitx.tui.app.screens.patch import PatchScreen
from minitx.tui.app.screens.train import TrainScreen
from minitx.tui.app.widgets.keybar import KEYBAR_SCREEN, Said
from minitx.tui.render.colors import colour_depth
from minitx.tui.render.numbers import short_path

CLOSING_SIGNALS = ("SIGHUP", "SIGTERM")  # the terminal closed, or someone asked us to end
# Where a key that does nothing on the screen shown works instead, and how to get there: the
# line such a key says (key_reasons.works_elsewhere). In this order: a screen before a view.
KEYS_ELSEWHERE = (("Explore", "e goes there", ExploreScreen), ("Train", "t goes there", TrainScreen),
                  ("Compare", "c goes there", CompareScreen),
                  ("the beam view", "B in Explore opens it", BeamScreen),
                  ("the circuit view", "C in Explore opens it", CircuitScreen))


class MinitxApp(LanguageKeys, AlignmentViews, App):
    CSS_PATH = "minitx.tcss"
    TITLE = "minitx"
    MODES = {"explore": ExploreScreen, "train": TrainScreen, "compare": CompareScreen}
    BINDINGS = [
        Binding("o", "open", "open", tooltip="open a checkpoint: a bundled name, a folder's files, a path"),
        Binding("d", "doctor", "doctor", tooltip="the doctor: check the model for the classic bugs"),
        # In the help; the footer is full at 80x24. Messages that need pairs name it.
        Binding("O", "pairs", "pairs", show=False,
                tooltip="measure the model on a file of source/target pairs (.tsv, .csv, .jsonl)"),
        Binding("c", "compare", "compare", tooltip="Compare: two models side by side"),
        HELP_BINDING,
        EXPORT_BINDING,
        Binding("q", "quit", "quit", tooltip="quit (a run not saved: asks first)"),
        # Textual only hints at ctrl+q on ctrl+c; here it quits like q (asking if a run would be
        # lost). In the source box ctrl+c still copies.
        Binding("ctrl+c", "quit", "quit", show=False),
    ]

    def __init__(self, checkpoints: list[str] | None = None, exit_on_start_error: bool = False) -> None:
        super().__init__()
        names = list(checkpoints or [])
        self.initial = names[0] if names else "reverse"
        self.compare_with = names[1] if len(names) > 1 else None  # A B: open on Compare
        self.compare_a: LoadedModel | None = None  # what c hands Compare as A (the model explored)
        self.circuits: dict = {}  # the circuits found so far (screens/circuit.py): C again is instant
        # The command line's checkpoints must open, or the program says why and exits 1.
        self.exit_on_start_error = exit_on_start_error
        self.current: LoadedModel | None = None
        self.loading = True
        self.status = f"loading {self.initial}…"
        self.loading_name = self.initial
        self.save_dir = Path.cwd()  # where the train screen saves checkpoints
        self.export_dir = Path.cwd() / EXPORT_FOLDER  # where E saves a screen and its numbers
        self.train_screen: TrainScreen | None = None  # set once Train is shown: it may hold a run
        self.run_status = ""  # '● run 2 · 34%': what the other screens' title bars say of a run
        # Published whenever current, loading or status change; screens redraw from the app.
        self.model_changed: Signal[MinitxApp] = Signal(self, "model-changed")
        self.run_changed: Signal[MinitxApp] = Signal(self, "run-changed")
        # The messages shown, and a signal when one is added or they are cleared: the footers
        # show them (tui/app/widgets/keybar.py).
        self.said: list[Said] = []
        self.messages_changed: Signal[MinitxApp] = Signal(self, "messages-changed")
        # With 16 colours or none the pictures draw shade characters instead of colour.
        self.colour_depth = colour_depth(self.no_color, self.console.color_system)
        # What the app says on stderr as it exits stays on one line: Rich would break a path in
        # two (it could not be copied); the terminal wraps it where it must.
        self.error_console.soft_wrap = True
        if self.no_color:  # Textual's NO_COLOR filter still paints greys; NO_COLOR means none
            self._filters = [NoColor() if isinstance(f, Monochrome) else f for f in self._filters]

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """A message, shown once: the footer's first lines on a screen with one (KeyBar), else a
        toast at the top of the dialog on screen, above its own lines and clear of its keys."""
        if not self._shows_footer():
            super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
            return
        seconds = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        self.said.append(Said(str(message), severity, markup, time.monotonic() + seconds))
        self.messages_changed.publish(self)

    def _shows_footer(self) -> bool:
        try:
            return self.screen.has_class(KEYBAR_SCREEN)
        except Exception:  # noqa: BLE001 - no screen yet (starting, closing): the footer will show it
            return True

    def push_screen(self, screen, *args, **kwargs):
        """A dialog opens on its own: no toast of an earlier one stays over it."""
        super().clear_notifications()
        return super().push_screen(screen, *args, **kwargs)

    def clear_notifications(self) -> None:
        super().clear_notifications()
        self.said.clear()
        self.messages_changed.publish(self)

    @property
    def model_ready(self) -> bool:
        return self.current is not None and not self.loading

    def on_mount(self) -> None:
        self.switch_mode("compare" if self.compare_with else "explore")
        # Start importing torch only after the first frame is out: the import holds the GIL
        # for seconds and would otherwise delay the first paint.
        self.call_after_refresh(self.load_model, self.initial, True)
        self._closing_signals(install=True)

    def on_unmount(self) -> None:
        self._closing_signals(install=False)

    def _closing_signals(self, install: bool) -> None:
        try:
            loop = asyncio.get_running_loop()
            for name in CLOSING_SIGNALS:
                number = getattr(signal, name, None)
                if number is None:
                    continue
                if install:
                    loop.add_signal_handler(number, self.close_saving)
                else:
                    loop.remove_signal_handler(number)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
            pass

    def why_not(self, action: str, parameters: tuple[object, ...]) -> str | None:
        # Compare has its own open keys (1 and 2), and c there would go nowhere.
        if self.current_mode == "compare" and action == "open":
            return "in Compare, 1 and 2 open models A and B"
        if self.current_mode == "compare" and action == "compare":
            return "this is Compare: 1 and 2 choose models A and B"
        return self.languages_why_not() if action == "languages" else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.why_not(action, parameters) is None

    def on_key(self, event: events.Key) -> None:
        """Before the bindings: a key bound here that does nothing now says why, and a key of
        another screen where it works (key_reasons.py)."""
        reason = refusal(self.screen, event.key, KEYS_ELSEWHERE)
        if reason:
            self.notify(reason, timeout=4, markup=False)

    def action_compare(self) -> None:
        # A is the model being looked at: Compare takes it when it is shown (compare_a)
        self.compare_a = self.current if self.current_mode != "compare" else None
        self.switch_mode("compare")

    # -- loading -----------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_model(self, name: str, first: bool = False) -> None:
        if "torch" not in sys.modules:
            self.post_message(LoadProgress("loading torch…"))
        from minitx.core.checkpoint import CheckpointError
        from minitx.core.training.threads import set_threads

        set_threads()  # before the app's first torch work: threads started later take it
        self.post_message(LoadProgress(f"loading {name}…"))

        worker = get_current_worker()

        def progress(what: str, fraction: float) -> bool:  # a large folder's reading, step by step
            self.post_message(LoadProgress(f"loading {name}: {what} {fraction:.0%}…"))
            return worker.is_cancelled  # another open, or the app's end: its decode stops here

        try:
            record = load_named(name, progress)
        except CheckpointError as e:
            record, error = None, str(e)
        if get_current_worker().is_cancelled:
            return  # a newer open superseded this one: its result must not replace that one
        self.post_message(ModelLoaded(record, announce=not first) if record
                          else LoadFailed(name, error, first=first))

    def start_loading(self, name: str) -> None:
        self.loading, self.loading_name = True, name
        self.status = f"loading {name}…"
        self.model_changed.publish(self)
        self.load_model(name)

    def on_load_progress(self, message: LoadProgress) -> None:
        if self.loading:
            self.status = message.text
            self.model_changed.publish(self)

    def on_model_loaded(self, message: ModelLoaded) -> None:
        if self.current is None:
            from minitx.core.training.threads import set_threads

            set_threads()  # the UI thread's own count: explore and compare run torch here
            # torch, the app and the first model are here for good: out of the collector's
            # reach, so a full collection does not walk them all (a pause of keys and training).
            gc.freeze()
        self.current, self.loading = message.record, False
        self.status = message.record.summary
        self.model_changed.publish(self)
        if message.announce or message.note:
            self.notify(message.note or f"now exploring {message.record.name}", markup=False)

    def exit_unopened(self, name: str, error: str) -> None:
        """End the app: a checkpoint named on the command line did not open. Exit 2, as every
        command exits for a checkpoint it cannot find or read (a usage error)."""
        self.exit(return_code=2, message=f"minitx-tui: {open_error(name, error)}")

    def on_load_failed(self, message: LoadFailed) -> None:
        if message.first and self.exit_on_start_error:
            self.exit_unopened(message.name, message.error)
            return
        self.loading = False
        if self.current is None:
            self.status = f"no model: {message.error} — press o to open one or t to train one"
        else:
            self.status = self.current.summary
        self.model_changed.publish(self)
        kept = f"; still using {self.current.name}" if self.current else ""
        self.notify(open_error(message.name, message.error) + kept, severity="error",
                    markup=False, timeout=10)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.group == "load" \
                and not event.worker.is_cancelled:  # a message, not a traceback
            error = event.worker.error
            self.on_load_failed(LoadFailed(self.loading_name, error_text(error)))

    # -- dialogs -----------------------------------------------------------------------------
    def action_open(self) -> None:
        def chosen(name: str | None) -> None:
            if name:
                self.start_loading(name)

        self.choose_checkpoint("open a checkpoint", chosen)

    def action_pairs(self) -> None:
        if not self.model_ready:
            self.notify("no model loaded yet: pairs are measured on the model being explored")
            return

        def chosen(path: str | None) -> None:
            if path:
                self.measure_on_pairs(self.current, path)

        if not isinstance(self.screen, PairsFileScreen):
            self.push_screen(PairsFileScreen(self.current.name), chosen)

    @work(thread=True, exclusive=True, group="pairs", exit_on_error=False)
    def measure_on_pairs(self, record: LoadedModel, path: str) -> None:
        """The same model, its task measuring on the pairs of `path` (core/data/given_pairs.py):
        every measurement of the app (m, w, d, P, C, Compare) uses them from now on."""
        from minitx.core.data.given_pairs import with_pairs
        from minitx.core.data.pair_files import DataError

        try:
            task = with_pairs(record.task, path, record.model.cfg.max_len)
        except DataError as e:
            self.post_message(PairsFailed(str(e)))
            return
        self.post_message(ModelLoaded(describe_again(record, task), announce=False,
                                      note=f"{record.name} is measured on {Path(path).name}: "
                                           f"{len(task.heldout):,} pairs"))

    def on_pairs_failed(self, message: PairsFailed) -> None:
        self.notify(f"cannot use those pairs: {message.error}", severity="error", markup=False, timeout=10)

    def choose_checkpoint(self, title: str, chosen: Callable[[str | None], None]) -> None:
        """The open dialog (one at a time); `chosen` gets a name or path, or None on esc."""
        if not isinstance(self.screen, OpenCheckpointScreen):
            self.push_screen(OpenCheckpointScreen(title), chosen)

    def ask(self, question: str | Callable[[], str], choices: list[tuple[str, str, str | None]],
            answered: Callable[[str | None], None]) -> None:
        """A question with a key per answer: (key, what it does, value); esc answers None. A
        question given as a function is asked again while the dialog is up (ChoiceDialog)."""
        if not isinstance(self.screen, ChoiceDialog):
            self.push_screen(ChoiceDialog(question, choices), answered)

    def ask_token(self, step: int, vocab, predicted: str, chosen: Callable[[int | None], None]) -> None:
        """The force-a-token dialog (step 1-based, a token of `vocab`, the output vocabulary);
        `chosen` gets a token id, or None on esc."""
        if not isinstance(self.screen, ForceTokenScreen):
            self.push_screen(ForceTokenScreen(step, vocab, predicted), chosen)

    def show_failures(self, model, task, interventions, chosen: Callable[[object], None]) -> None:
        """The failures dialog (it decodes in its own worker); `chosen` gets a core Failure or None."""
        if not isinstance(self.screen, FailuresScreen):
            self.push_screen(FailuresScreen(model, task, interventions), chosen)

    def show_patching(self, model, task, clean: list[int]) -> None:
        """The activation-patching dialog, with `clean` as the clean source."""
        if not isinstance(self.screen, PatchScreen):
            self.push_screen(PatchScreen(model, task, clean))

    def show_beam(self, record, src_ids: list[int], ablated, head: tuple[int, int]) -> None:
        """The beam view of a LoadedModel on one source: its own beam when its settings search,
        else 4 (the view runs it to its end at first sight); `head` the grid's (layer, head)."""
        from minitx.tui.app.beam_session import BeamSession

        if not isinstance(self.screen, BeamScreen):
            own = record.model.generation.num_beams
            beams = own if own > 1 else DEFAULT_BEAMS

            def prepare(progress):  # in the view's worker: greedy's output takes a big model seconds
                return BeamSession(record, src_ids, beams=beams, ablated=ablated, progress=progress)

            self.push_screen(BeamScreen(layer=head[0], head=head[1], prepare=prepare))

    def show_circuit(self, record) -> None:
        """The circuit view of a LoadedModel."""
        if not isinstance(self.screen, CircuitScreen):
            self.push_screen(CircuitScreen(record.model, record.task, record.name, self.circuits))

    def action_doctor(self) -> None:
        if not self.model_ready:
            self.notify("no model loaded yet: the doctor checks the model being explored")
            return
        self.open_doctor([self.current])

    def open_doctor(self, records: list, labels: list[str] | None = None) -> None:
        from minitx.tui.app.screens.doctor import DoctorScreen

        if not isinstance(self.screen, DoctorScreen):
            self.push_screen(DoctorScreen(records, labels))

    def action_export_view(self) -> None:
        export_view(self)

    def on_delivery_failed(self, event) -> None:
        """A browser's download of an export (tui/app/exports.py) that did not go through."""
        self.notify(f"the download failed: {event.exception}", severity="error", markup=False, timeout=10)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
        else:
            self.push_screen(HelpScreen(self.screen))

    # -- quitting: never with a run's unsaved steps, unless asked to -------------------------
    def unsaved_run(self):
        train = self.train_screen
        run = train.current_run if train is not None else None
        return run if run is not None and run.unsaved_steps > 0 else None

    async def action_quit(self) -> None:
        run = self.unsaved_run()
        if run is None:
            self.exit()
            return

        def answered(answer: str | None) -> None:
            if answer == "save":
                self.close_saving()
            elif answer == "drop":
                run.stop.set()
                self.exit()

        # Asked again as it trains on behind the dialog: the count stays the run's own.
        self.ask(lambda: f"quit? {run.unsaved}", [
            ("s", f"save it (resumable) and quit: {short_path(run.path)}", "save"),
            ("d", "quit without it", "drop"),
            ("escape", "cancel: keep it", None)], answered)

    def close_saving(self) -> None:
        """Quit, saving the run first if it has unsaved steps (the quit dialog's s, and what a
        closed terminal or a SIGTERM gets: the CLI's Ctrl-C does the same); says where on exit."""
        run = self.unsaved_run()
        if run is None:
            self.exit()
            return
        saved = self.train_screen.save_for_exit()
        if saved.error:
            self.notify(f"{saved.error}; not quitting, so the run is not lost", severity="error",
                        markup=False, timeout=10)
            return
        self.exit(message=f"minitx-tui: {run.name} saved at step {run.saved_step} to {saved.path} "
                          f"(resumable: open it and pick resume on Train, or minitx train --resume "
                          f"{saved.path})")


def create_app(checkpoints: list[str] | None = None, exit_on_start_error: bool = False) -> MinitxApp:
    """The app for `minitx-tui [CKPT ...]`: opens the first checkpoint (default: the bundled
    `reverse`); with a second one it opens on Compare (A against B). exit_on_start_error: a
    checkpoint that cannot be opened ends the app with return code 1 and the reason on stderr."""
    return MinitxApp(checkpoints, exit_on_start_error)
