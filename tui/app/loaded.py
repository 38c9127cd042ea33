"""The model the app shows: a loaded or trained Seq2Seq with the numbers the screens draw.

Nothing here imports torch at module level: the app must paint before torch is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from minitx.tui.render.numbers import short_count

if TYPE_CHECKING:
    from minitx.core.config import TrainConfig
    from minitx.core.data.task import Task
    from minitx.core.model.transformer import Seq2Seq


@dataclass(frozen=True)
class LoadedModel:
    """A model a decode panel can use, with the numbers the UI shows about it."""

    name: str  # what the title bar says: a file name, or "run 2 · reverse · step 300"
    model: Seq2Seq
    task: Task
    norm: str
    params: int
    device: str
    scores: list[list[float]]  # (layers, heads) alignment (or sharpness) on the task's examples
    layers: int
    heads: int
    path: str | None = None
    train_config: TrainConfig | None = None  # how it was trained, when the file (or run) says
    resumable: bool = False  # the file holds the training state a run can continue from
    steps: int | None = None  # training steps behind it
    history: object = None  # core.history.History of the run (None: the file has none)
    loss: float | None = None  # the training summary's final loss, when the file says (the doctor reads it)
    measure: str = "alignment"  # what `scores` are: "alignment", or "sharpness" (no pattern expected)
    base_scores: dict | None = None  # a fine-tune's base on its held-out pairs, as the file records
    last_scores: dict | None = None  # ... and the fine-tune at its last evaluation

    @property
    def run_summary(self) -> dict:
        """What the file says of the run, as a checkpoint's summary (the doctor and Compare read it)."""
        return {"steps": self.steps, "loss": self.loss,
                **({"base_scores": self.base_scores} if self.base_scores else {}),
                **({"scores": self.last_scores} if self.last_scores else {})}

    @property
    def pretrained(self) -> bool:
        """Trained outside minitx: an imported model or a Hugging Face folder (its task says which
        code it came from; no minitx run, no snapshots, no lengths it was trained on)."""
        return self.task.name in ("imported", "huggingface")

    @property
    def no_history(self) -> str:
        """Why the model has no training curves or snapshots, said of what it is."""
        if self.pretrained:
            origin = self.task.origin.family or self.task.origin.layout or "imported"
            return f"a {origin} model trained outside minitx"
        return "a file from before minitx kept them, or an export"

    @property
    def summary(self) -> str:
        return self.summaries[0]

    @property
    def summaries(self) -> tuple[str, ...]:
        """The model in a title, and the same in fewer words for a narrower one, shortest last:
        the device goes first, then the size (an imported model's options say more), then the
        layout; the name stays."""
        count = f"{short_count(self.params)} params"
        if self.pretrained:  # its layout (family) and the options
            from minitx.core.model.components import short_option_labels

            layout = self.task.origin.layout or self.task.origin.family or "mapping"
            options = f"{self.name} · {layout}: {short_option_labels(self.model.cfg)}"
            return (f"{options} · {count} · {self.device}", f"{options} · {count}", options,
                    f"{self.name} · {layout} · {count}", f"{self.name} · {count}", self.name)
        task = "" if self.task.name in self.name else f" · {self.task.name}"
        return (f"{self.name}{task} · {self.norm}-norm · {count} · {self.device}",
                f"{self.name}{task} · {self.norm}-norm · {count}", f"{self.name}{task} · {count}",
                f"{self.name} · {count}", self.name)


def describe_model(model: Seq2Seq, task: Task, name: str, path: str | None = None, progress=None,
                   **facts) -> LoadedModel:
    """Build the record (call from a worker thread: it runs the model on random sources);
    `facts` are LoadedModel's training fields (train_config, resumable, steps, history).
    progress(what, fraction) while a model without examples decodes its example source (a big
    model's runs to hundreds of steps); a True answer stops it (the load was left)."""
    from minitx.core.interp.alignment import shown_head_scores
    from minitx.core.model.transformer import eval_mode, parameter_breakdown

    def steps(done: int, cap: int):
        return progress(f"decoding its example, step {done} of at most {cap}", done / cap)

    with eval_mode(model):  # the model may be a live run's: leave its mode as it was
        measure, scores = shown_head_scores(model, task, progress=steps if progress is not None else None)
    cfg = model.cfg
    return LoadedModel(name, model, task, cfg.norm, parameter_breakdown(model)["total"],
                       model.device.type, scores.tolist(), cfg.n_decoder_layers, cfg.n_heads, path,
                       measure=measure, **facts)


def describe_again(record: LoadedModel, task: Task) -> LoadedModel:
    """The same model with another task (its examples: a pairs file's), its head scores measured
    on that task (call from a worker thread)."""
    import dataclasses

    fresh = describe_model(record.model, task, record.name, record.path)
    return dataclasses.replace(record, task=task, scores=fresh.scores, measure=fresh.measure)


def as_checkpoint(record: LoadedModel):
    """The model on screen as a core Checkpoint (what core.compare measures), whether it came from
    a file or from a run of the Train screen that was never saved."""
    from minitx.core.checkpoint import Checkpoint

    return Checkpoint(record.model, record.model.cfg, record.task, record.run_summary, {},
                      Path(record.path) if record.path else None, history=record.history)


def load_either(model: str | LoadedModel):
    """(Checkpoint, LoadedModel) of a name or path (loaded), or of a model already on screen."""
    if isinstance(model, LoadedModel):
        return as_checkpoint(model), model
    return load_checkpoint_record(model)


def shown_name(path: Path) -> str:
    """What a checkpoint is called on screen: a bundled model by its name, a file by its file name."""
    from minitx import checkpoints

    return path.stem if path.resolve().parent == checkpoints.BUNDLED_DIR else path.name


def load_named(name_or_path: str, progress=None) -> LoadedModel:
    """resolve + load + describe; raises core.checkpoint.CheckpointError with one sentence.
    progress(what, fraction): how the reading of a large folder goes."""
    return load_checkpoint_record(name_or_path, progress)[1]


def load_checkpoint_record(name_or_path: str, progress=None):
    """(Checkpoint, LoadedModel) for a bundled name, a path, a Hugging Face folder or model id;
    CheckpointError with one sentence."""
    from minitx import checkpoints
    from minitx.core.importing.hf_cache import looks_like_model_id

    path = checkpoints.resolve(name_or_path)
    ckpt = checkpoints.load(name_or_path, progress=progress)
    name = str(name_or_path) if looks_like_model_id(str(name_or_path)) else shown_name(path)
    steps, loss = ckpt.summary.get("steps"), ckpt.summary.get("loss")
    base, last = ckpt.summary.get("base_scores"), ckpt.summary.get("scores")
    return ckpt, describe_model(ckpt.model, ckpt.task, name, str(path), progress,
                                base_scores=base if isinstance(base, dict) else None,
                                last_scores=last if isinstance(last, dict) else None,
                                train_config=saved_train_config(ckpt), resumable=ckpt.resumable,
                                steps=steps if isinstance(steps, int) else None,
                                history=ckpt.history,
                                loss=float(loss) if isinstance(loss, (int, float)) else None)


def saved_train_config(ckpt) -> TrainConfig | None:
    """How the file's run was trained, or None (an exported file, or metadata that does not read
    as a TrainConfig: the file is untrusted, and the app offers no `like`/`resume` then)."""
    from minitx.core.checkpoint import CheckpointError

    try:
        return ckpt.train_config
    except CheckpointError:
        return None


def open_error(name: str, error: str) -> str:
    """'cannot open NAME: WHY', without naming the file twice when the reason already does."""
    return f"cannot open: {error}" if name and name in error else f"cannot open {name}: {error}"


def no_history_of(models: dict) -> str:
    """Why the models (side -> record) have no curves: one reason, or each side's where they differ."""
    reasons = {side: m.no_history for side, m in models.items()}
    if len(set(reasons.values())) == 1:
        return next(iter(reasons.values()))
    return "; ".join(f"{side}: {reason}" for side, reason in reasons.items())
