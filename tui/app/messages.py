"""Every message the app's workers and widgets send, in one place.

Workers hand results to the UI one way: `post_message`. It is thread-safe and returns at once,
so a worker never waits for the UI thread (`call_from_thread` would block a training step until
the screen had drawn); the handler runs on the UI thread, in order, like any other event.
Messages bubble from the widget that posted them to its screen and then the app, so a handler
lives where the state it changes lives (`on_progress` on the Train screen, `on_model_loaded`
on the app).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

# -- loading models (the app's worker) --------------------------------------------------------


class ModelLoaded(Message):
    """A model is ready for Explore (loaded from a file, or just trained)."""

    def __init__(self, record, announce: bool = True) -> None:
        super().__init__()
        self.record, self.announce = record, announce  # record: tui.loaded.LoadedModel


class LoadFailed(Message):
    def __init__(self, name: str, error: str, first: bool = False) -> None:
        super().__init__()
        self.name, self.error = name, error
        self.first = first  # the checkpoint the app was started on


class LoadProgress(Message):
    """What the loading worker is doing ('loading torch…'): the app is usable only after it."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


# -- the open dialog ------------------------------------------------------------------------------


class ListingReady(Message):
    """The checkpoints of a folder (core's listings), and why the folder could not be read."""

    def __init__(self, folder: str, listings: list, error: str = "") -> None:
        super().__init__()
        self.folder, self.listings, self.error = folder, listings, error


# -- compare ---------------------------------------------------------------------------------------


class PairLoaded(Message):
    """Both models of Compare are loaded (records: tui.loaded.LoadedModel; checkpoints: the
    core Checkpoints, for measuring the pair again)."""

    def __init__(self, a, b, checkpoints: tuple = ()) -> None:
        super().__init__()
        self.a, self.b, self.checkpoints = a, b, checkpoints


class PairFailed(Message):
    def __init__(self, name: str, error: str) -> None:
        super().__init__()
        self.name, self.error = name, error


class SummaryReady(Message):
    def __init__(self, comparison) -> None:
        super().__init__()
        self.comparison = comparison  # core.compare.Comparison


# -- interventions (Explore's importance worker, the failures dialog's worker) --------------------


class ImportanceProgress(Message):
    def __init__(self, record, done: int, total: int) -> None:
        super().__init__()
        self.record, self.done, self.total = record, done, total  # record: tui.loaded.LoadedModel


class ImportanceReady(Message):
    def __init__(self, record, result) -> None:
        super().__init__()
        self.record, self.result = record, result  # result: core.importance.Importance


class PatchProgress(Message):
    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done, self.total = done, total


class PatchReady(Message):
    def __init__(self, result=None, error: str = "") -> None:
        super().__init__()
        self.result, self.error = result, error  # result: core.patching.PatchingResult


class CircuitProgress(Message):
    def __init__(self, stage: str, done: int, total: int) -> None:
        super().__init__()
        self.stage, self.done, self.total = stage, done, total


class CircuitFound(Message):
    def __init__(self, result=None, error: str = "") -> None:
        super().__init__()
        self.result, self.error = result, error  # result: core.circuit.CircuitResult


class CircuitMeasured(Message):
    """A circuit's faithfulness, then (a second message) its exact match too."""

    def __init__(self, circuit, faithfulness: float, accuracy: float | None = None) -> None:
        super().__init__()
        self.circuit, self.faithfulness, self.accuracy = circuit, faithfulness, accuracy


class FailuresReady(Message):
    def __init__(self, failures: list, wrong: int, n: int, error: str = "") -> None:
        super().__init__()
        self.failures, self.wrong, self.n, self.error = failures, wrong, n, error  # core Failures


# -- training (the Train screen's worker) ---------------------------------------------------------


class FormDefaults(Message):
    """What the Train form offers, once core is imported: the recipes (name -> core.config.Recipe)
    and the values of each choice field."""

    def __init__(self, recipes: dict, choices: dict[str, list[str]]) -> None:
        super().__init__()
        self.recipes, self.choices = recipes, choices


@dataclass
class Progress(Message):
    """Posted by the training worker: every loss since the last message and the latest numbers."""

    step: int
    total: int
    losses: list[float]
    loss: float
    grad_norm: float
    lr: float
    steps_per_s: float
    eta_s: float
    accuracy: float | None
    probe: dict | None = None  # rows, targets, source, scores, best (layer, head)


@dataclass
class RunStarted(Message):
    summary: str


@dataclass
class RunEnded(Message):
    step: int
    stopped: bool
    record: Any = None  # tui.loaded.LoadedModel of the trained model


@dataclass
class Saved(Message):
    path: str = ""
    error: str = ""


# -- the doctor ------------------------------------------------------------------------------------


class CheckDone(Message):
    def __init__(self, result, index: int = 0) -> None:
        super().__init__()
        self.result = result  # core.diagnostics.CheckResult
        self.index = index  # which of the dialog's models (Compare checks two)


class DoctorFinished(Message):
    def __init__(self, causes: list[list[str]], error: str = "") -> None:
        super().__init__()
        self.causes, self.error = causes, error  # per model, the likely causes of its failures


# -- widgets ---------------------------------------------------------------------------------------


class ChoiceChanged(Message):
    """A ChoiceField moved to another value."""

    def __init__(self, field) -> None:
        super().__init__()
        self.field = field  # tui.widgets.choice.ChoiceField

    @property
    def control(self):
        return self.field


class TimelineMoved(Message):
    """A Timeline shows another snapshot (a key, or play)."""
