"""The minitx Textual app and the factory the CLI and the tests share.

Importing this module must not import torch: the first screen paints at once, and torch and
the model load in a thread worker behind a loading indicator.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.signal import Signal
from textual.worker import Worker, WorkerState, get_current_worker

from minitx.tui.loaded import LoadedModel, load_named
from minitx.tui.messages import LoadFailed, ModelLoaded
from minitx.tui.screens.compare import CompareScreen
from minitx.tui.screens.dialogs import FailuresScreen, ForceTokenScreen, HelpScreen, OpenCheckpointScreen
from minitx.tui.screens.explore import ExploreScreen
from minitx.tui.screens.patch import PatchScreen
from minitx.tui.screens.train import TrainScreen


class MinitxApp(App):
    CSS_PATH = "minitx.tcss"
    TITLE = "minitx"
    MODES = {"explore": ExploreScreen, "train": TrainScreen, "compare": CompareScreen}
    BINDINGS = [
        Binding("o", "open", "open"),
        Binding("d", "doctor", "doctor"),
        Binding("c", "compare", "compare"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, checkpoints: list[str] | None = None) -> None:
        super().__init__()
        names = list(checkpoints or [])
        self.initial = names[0] if names else "reverse"
        self.compare_with = names[1] if len(names) > 1 else None  # A B: open on Compare
        self.current: LoadedModel | None = None
        self.loading = True
        self.status = f"loading {self.initial}…"
        self.loading_name = self.initial
        self.save_dir = Path.cwd()  # where the train screen saves checkpoints
        # Published whenever current, loading or status change; screens redraw from the app.
        self.model_changed: Signal[MinitxApp] = Signal(self, "model-changed")

    @property
    def model_ready(self) -> bool:
        return self.current is not None and not self.loading

    def on_mount(self) -> None:
        self.switch_mode("compare" if self.compare_with else "explore")
        # Start importing torch only after the first frame is out: the import holds the GIL
        # for seconds and would otherwise delay the first paint.
        self.call_after_refresh(self.load_model, self.initial, True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Compare has its own open keys (1 and 2), and c there would go nowhere.
        return not (self.current_mode == "compare" and action in ("open", "compare"))

    def action_compare(self) -> None:
        self.switch_mode("compare")

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_model(self, name: str, first: bool = False) -> None:
        from minitx.core.checkpoint import CheckpointError

        try:
            record = load_named(name)
        except CheckpointError as e:
            record, error = None, str(e)
        if get_current_worker().is_cancelled:
            return  # a newer open superseded this one: its result must not replace that one
        self.post_message(ModelLoaded(record, announce=not first) if record
                          else LoadFailed(name, error))

    def start_loading(self, name: str) -> None:
        self.loading, self.loading_name = True, name
        self.status = f"loading {name}…"
        self.model_changed.publish(self)
        self.load_model(name)

    def on_model_loaded(self, message: ModelLoaded) -> None:
        if self.current is None:
            # torch, the app and the first model are here for good: move them out of the
            # collector's reach. Otherwise every full collection walks them all, a pause of
            # 70-220 ms that froze keys and training alike.
            gc.freeze()
        self.current, self.loading = message.record, False
        self.status = message.record.summary
        self.model_changed.publish(self)
        if message.announce:
            self.notify(f"now exploring {message.record.name}", markup=False)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.loading = False
        if self.current is None:
            self.status = f"no model: {message.error} — press o to open one or t to train one"
        else:
            self.status = self.current.summary
        self.model_changed.publish(self)
        kept = f"; still using {self.current.name}" if self.current else ""
        self.notify(f"cannot open {message.name}: {message.error}{kept}", severity="error",
                    markup=False, timeout=10)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and not event.worker.is_cancelled:  # not a traceback
            error = event.worker.error
            self.on_load_failed(LoadFailed(self.loading_name, f"{type(error).__name__}: {error}"))

    def action_open(self) -> None:
        def chosen(name: str | None) -> None:
            if name:
                self.start_loading(name)

        self.choose_checkpoint("open a checkpoint", chosen)

    def choose_checkpoint(self, title: str, chosen: Callable[[str | None], None]) -> None:
        """The open dialog (one at a time); `chosen` gets a name or path, or None on esc."""
        if not isinstance(self.screen, OpenCheckpointScreen):
            self.push_screen(OpenCheckpointScreen(title), chosen)

    def ask_token(self, step: int, vocabulary: list[str], predicted: str, offered: list[int],
                  chosen: Callable[[int | None], None]) -> None:
        """The force-a-token dialog (step 1-based); `chosen` gets a token id, or None on esc."""
        if not isinstance(self.screen, ForceTokenScreen):
            self.push_screen(ForceTokenScreen(step, vocabulary, predicted, offered), chosen)

    def show_failures(self, model, task, interventions, chosen: Callable[[object], None]) -> None:
        """The failures dialog (it decodes in its own worker); `chosen` gets a core Failure or None."""
        if not isinstance(self.screen, FailuresScreen):
            self.push_screen(FailuresScreen(model, task, interventions), chosen)

    def show_patching(self, model, task, clean: list[int]) -> None:
        """The activation-patching dialog, with `clean` as the clean source."""
        if not isinstance(self.screen, PatchScreen):
            self.push_screen(PatchScreen(model, task, clean))

    def action_doctor(self) -> None:
        from minitx.tui.screens.doctor import DoctorScreen

        if isinstance(self.screen, DoctorScreen):
            return
        if not self.model_ready:
            self.notify("no model loaded yet: the doctor checks the model being explored")
            return
        self.push_screen(DoctorScreen(self.current))

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
        else:
            self.push_screen(HelpScreen())


def create_app(checkpoints: list[str] | None = None) -> MinitxApp:
    """The app for `minitx-tui [CKPT ...]`: opens the first checkpoint (default: the bundled
    `reverse`); with a second one it opens on Compare (A against B)."""
    return MinitxApp(checkpoints)
