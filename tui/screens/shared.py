"""What the screens share: the loaded model record and the title bar.

Nothing here imports torch at module level: the app must paint before torch is loaded.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Label


@dataclass(frozen=True)
class LoadedModel:
    """A model the explore screen can use, with the numbers the UI shows about it."""

    name: str  # what the title bar says: a file name, or "trained · step 3000"
    model: Any  # core.model.Seq2Seq, in eval mode
    task: Any  # core.tasks.Task
    norm: str
    params: int
    device: str
    scores: list[list[float]]  # (layers, heads) alignment on fresh random sources
    layers: int
    heads: int
    path: str | None = None

    @property
    def summary(self) -> str:
        task = "" if self.task.name in self.name else f" · {self.task.name}"
        size = short_count(self.params)
        return f"{self.name}{task} · {self.norm}-norm · {size} params · {self.device}"


# The decoding keys Explore and Compare share, so one source of truth keeps them the same.
STEP_BINDINGS = [
    Binding("right,n", "step", "step"),
    Binding("left,b", "back", "back"),
    Binding("enter,r", "run", "run"),
    Binding("x", "reset", "reset"),
    Binding("left_square_bracket", "layer(-1)", "layer"),
    Binding("right_square_bracket", "layer(1)", "layer"),
    Binding("comma", "head(-1)", "head"),
    Binding("full_stop", "head(1)", "head"),
]
SOURCE_BINDINGS = [
    Binding("number_sign", "numbers", "numbers", key_display="#"),
    Binding("i", "edit_source", "source"),
    Binding("slash", "edit_source", "source", show=False),
]


class ModelLoaded(Message):
    """A model is ready for Explore (loaded from a file, or just trained)."""

    def __init__(self, record: LoadedModel, announce: bool = True) -> None:
        super().__init__()
        self.record, self.announce = record, announce


def best_head(scores: list[list[float]]) -> tuple[int, int]:
    """(layer, head) with the highest alignment score: the head that does the work."""
    cells = [(layer, head) for layer, row in enumerate(scores) for head in range(len(row))]
    return max(cells, key=lambda lh: scores[lh[0]][lh[1]])


def short_count(n: int) -> str:
    return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def describe_model(model, task, name: str, path: str | None = None) -> LoadedModel:
    """Build the record (call from a worker thread: it runs the model on random sources)."""
    from minitx.core.alignment import random_alignment_scores
    from minitx.core.model import parameter_breakdown

    model.eval()
    cfg = model.cfg
    device = next(model.parameters()).device.type
    scores = random_alignment_scores(model, task, n=128).tolist()
    return LoadedModel(name, model, task, cfg.norm, parameter_breakdown(model)["total"], device,
                       scores, cfg.n_decoder_layers, cfg.n_heads, path)


def load_named(name_or_path: str) -> LoadedModel:
    """resolve + load + describe; raises core.checkpoint.CheckpointError with one sentence."""
    from minitx import checkpoints
    path = checkpoints.resolve(name_or_path)
    ckpt = checkpoints.load(path)
    shown = path.stem if str(path).startswith(str(checkpoints.BUNDLED_DIR)) else path.name
    return describe_model(ckpt.model, ckpt.task, shown, str(path))


def one_line_errors(method):
    """Turn an unexpected exception in a key action or a redraw into a one-line notification:
    a person at a terminal never gets a traceback, and the app keeps running."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every failure becomes a message
            self.notify(f"{type(e).__name__}: {e}", severity="error", markup=False, timeout=10)
            return None

    return guarded


class TitleBar(Horizontal):
    """' minitx  reverse · post-norm · 236k params · cpu        [Explore] Train'."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $primary-background; }
    TitleBar #title-info { width: 1fr; }
    TitleBar #title-tabs { width: auto; }
    """

    def __init__(self, active: str) -> None:
        super().__init__()
        self.active = active

    def compose(self) -> ComposeResult:
        yield Label(" [b]minitx[/b]  loading…", id="title-info")
        # A click on a tab switches to it (mouse is a bonus: e and t do the same).
        tabs = "  ".join(
            f"[reverse b] {name} [/]" if name == self.active
            else f"[@click=app.switch_mode('{name.lower()}')]{name}[/]"
            for name in ("Explore", "Train"))
        yield Label(tabs + " ", id="title-tabs")

    def set_info(self, text: str) -> None:
        from rich.markup import escape

        self.query_one("#title-info", Label).update(f" [b]minitx[/b]  {escape(text)}")
