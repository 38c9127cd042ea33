"""Every message the app's workers and widgets send, in one place.

Workers hand results to the UI one way: `post_message`. It is thread-safe and returns at once,
so a worker never waits for the UI thread (`call_from_thread` would block a training step until
the screen had drawn); the handler runs on the UI thread, in order, like any other event.
Messages bubble from the widget that posted them to its screen and then the app, so a handler
lives where the state it changes lives (`on_progress` on the Train screen, `on_model_loaded`
on the app).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message
from textual.widget import Widget

from minitx.core.training.results import Failure

if TYPE_CHECKING:  # the app paints before torch loads: these are only the fields' types
    from minitx.checkpoints import Listing
    from minitx.core.checkpoint import Checkpoint
    from minitx.core.compare import Comparison
    from minitx.core.config import Recipe
    from minitx.core.doctor.code_checks import CheckResult
    from minitx.core.doctor.diagnosis import Diagnosis
    from minitx.core.fine_tune_diff import FineTuneDiff
    from minitx.core.interp.circuit import Circuit, CircuitResult
    from minitx.core.interp.importance import Importance
    from minitx.core.interp.patching import PatchingResult
    from minitx.core.interp.search_check import SearchCheck
    from minitx.tui.app.beam_session import ContrastJob
    from minitx.tui.app.decode_session import AttributionJob
    from minitx.tui.app.loaded import LoadedModel

# -- loading models (the app's worker) --------------------------------------------------------


@dataclass
class ModelLoaded(Message):
    """A model is ready for Explore (loaded from a file, or just trained, or measured on other
    pairs: then `note` says which)."""

    record: LoadedModel
    announce: bool = True
    note: str = ""


@dataclass
class LoadFailed(Message):
    name: str
    error: str
    first: bool = False  # the checkpoint the app was started on


@dataclass
class PairsFailed(Message):
    """A pairs file (O) that cannot be used for the model: why, in one line."""

    error: str


@dataclass
class LoadProgress(Message):
    """What the loading worker is doing ('loading torch…'): the app is usable only after it."""

    text: str


# -- the open dialog ------------------------------------------------------------------------------


@dataclass
class ListingReady(Message):
    """The checkpoints of a folder (and the Hugging Face model folders in it), and why the folder
    could not be read."""

    folder: str
    listings: list[Listing]
    error: str = ""
    model_folders: list = field(default_factory=list)  # Paths


# -- compare ---------------------------------------------------------------------------------------


@dataclass
class PairLoaded(Message):
    """Both models of Compare are loaded, with the core Checkpoints, to measure the pair again."""

    a: LoadedModel
    b: LoadedModel
    checkpoints: tuple[Checkpoint, Checkpoint] | tuple = ()


@dataclass
class PairFailed(Message):
    name: str
    error: str


@dataclass
class SummaryReady(Message):
    comparison: Comparison


@dataclass
class ChangesReady(Message):
    """Compare's c: A against B as base and fine-tune, measured on `checkpoints`."""

    changes: FineTuneDiff
    checkpoints: tuple[Checkpoint, Checkpoint]


# -- interventions (Explore's importance worker, the failures dialog's worker) --------------------


@dataclass
class ImportanceProgress(Message):
    record: LoadedModel
    done: int
    total: int


@dataclass
class ImportanceReady(Message):
    record: LoadedModel
    result: Importance


@dataclass
class RolesReady(Message):
    """Each head's strongest role (core.interp.roles.strongest_roles: {"cross:L2.H1": "anti-diagonal"})."""

    record: LoadedModel
    roles: dict[str, str]


@dataclass
class AttributionReady(Message):
    """A decode's source attribution (tui/app/decode_session.py's AttributionJob, and the core
    SourceAttribution it computed)."""

    job: AttributionJob
    result: object


@dataclass
class AttributionProgress(Message):
    """How far an AttributionJob is: `done` of `total` (a fraction of a step counts)."""

    job: AttributionJob
    done: float
    total: int


@dataclass
class PatchProgress(Message):
    done: int
    total: int


@dataclass
class PatchReady(Message):
    result: PatchingResult | None = None
    error: str = ""


@dataclass
class BeamPreparing(Message):
    """The beam view's work in a worker (its session: greedy's output; a hypothesis's steps) at
    `step` of at most `cap`."""

    step: int
    cap: int
    what: str = "getting ready: greedy's output"


@dataclass
class HypothesisReady(Message):
    """The beam view's chosen hypothesis has its Stepper: its grid or lens can be drawn."""

    node: int
    view: str


@dataclass
class BeamPrepared(Message):
    """The beam view's session (a BeamSession), or why it could not be made."""

    session: object = None
    error: str = ""


@dataclass
class BeamChecked(Message):
    """The beam view's search check (core/interp/search_check.py) has run, or failed."""

    check: SearchCheck | None = None
    error: str = ""


@dataclass
class BeamContrasted(Message):
    """The beam view's contrastive attribution of a hypothesis (tui/app/beam_session.py's
    ContrastJob, and the core SourceAttribution of its one step, None when it failed: `error`)."""

    job: ContrastJob
    result: object = None
    error: str = ""


@dataclass
class CircuitProgress(Message):
    stage: str
    done: int
    total: int


@dataclass
class CircuitFound(Message):
    result: CircuitResult | None = None
    error: str = ""


@dataclass
class AlignmentScored(Message):
    """Every head's Score on the alignment view's gold (core word_alignment's, every_head order),
    read with `method`; or the error that stopped it."""

    scores: list | None = None
    method: str = ""
    error: str = ""


@dataclass
class CircuitMeasured(Message):
    """A circuit's faithfulness, then (a second message) its exact match too."""

    circuit: Circuit
    faithfulness: float
    accuracy: float | None = None


@dataclass
class FailuresReady(Message):
    failures: list[Failure]
    wrong: int
    n: int
    error: str = ""


# -- training (the Train screen's worker) ---------------------------------------------------------


@dataclass
class FormDefaults(Message):
    """What the Train form offers, once core is imported: the recipes and each choice field's values."""

    recipes: dict[str, Recipe]
    choices: dict[str, list[str]]


@dataclass
class RunChecked(Message):
    """Whether the form's configs can start a run (tui/app/run_check.py): the model's parameters,
    or the error ('data: f.tsv, line 1: no tab …') that stops it before anything is asked."""

    configs: tuple  # (ModelConfig, TrainConfig) that were checked
    params: int | None = None
    error: str = ""  # "option: message"
    notes: list[str] = field(default_factory=list)  # how a data file was read (pairs skipped...)
    slow: str = ""  # why the run will be slow here, said when it starts (bf16 emulated on this CPU)


@dataclass(frozen=True)
class LiveProbe:
    """The probe's picture during a run: the best head's grid and every head's score."""

    rows: list[list[float]]  # (targets, source) attention of the best head
    targets: list[str]  # row labels: the task's output and EOS
    source: list[str]  # column labels
    source_text: str
    scores: list[list[float]]  # (layers, heads)
    best: tuple[int, int]  # (layer, head), 0-based
    measure: str  # "alignment", or "sharpness" where no pattern is expected


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
    accuracy: str | None  # the last evaluation as the progress says it: 'acc 97.3%', 'acc <99.9% (…)'
    probe: LiveProbe | None = None
    scores: str | None = None  # a fine-tune's last evaluation: 'BLEU 3.1→25.4 · chrF 20.1→48.2'
    heldout_loss: str | None = None  # ... and its loss per held-out target token: 'loss 5.2100→1.0300'


@dataclass(frozen=True)
class ProbeLine:
    """One probe's greedy output at an evaluation of a fine-tune (core.history.ProbeRecord's)."""

    source: str
    output: str
    base_output: str
    changed: list[int]  # indices of output.split() words its base's output does not have there


@dataclass
class Watching(Message):
    """Posted by the training worker after each evaluation of a watched fine-tune: the probes'
    outputs, the KL to the base (on general pairs, else on the probes) and the general-domain
    loss, and the forgetting alarm's line once it has gone off (core's Forgetting.line())."""

    step: int
    probes: list[ProbeLine]
    kl_to_base: float | None
    kl_on: str  # "general" or "probes"
    general_loss: tuple[float, float] | None = None  # (the base's, now)
    alarm: str | None = None


@dataclass
class RunStarted(Message):
    summary: str


@dataclass
class RunEnded(Message):
    step: int
    stopped: bool
    record: LoadedModel | None = None  # the trained model, ready for Explore


@dataclass
class Saved(Message):
    path: str = ""
    error: str = ""


# -- the doctor ------------------------------------------------------------------------------------


@dataclass
class CheckDone(Message):
    result: CheckResult
    index: int = 0  # which of the dialog's models (Compare checks two)


@dataclass
class DoctorFinished(Message):
    diagnoses: list[Diagnosis] = field(default_factory=list)  # per model
    error: str = ""


# -- widgets ---------------------------------------------------------------------------------------


@dataclass
class ChoiceChanged(Message):
    """A ChoiceField (tui/app/widgets/choice.py, which posts this) moved to another value:
    `field.value`. Typed as any widget, so this module imports no widget of the app."""

    field: Widget

    @property
    def control(self) -> Widget:
        return self.field


class TimelineMoved(Message):
    """A Timeline shows another snapshot (a key, or play)."""
