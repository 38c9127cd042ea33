"""A timeline of a run's probe snapshots: one head's cross-attention on the probe source at one
moment of training, a scrub bar, and play. On a reverse model you watch the anti-diagonal form.

The head shown first is the one that aligns best in the last snapshot (the head that ends up
doing the task's work); every frame shows the same head until another is chosen (move_head). The
screen binds the keys: back, forward, first/last, play/pause, the head (step_by, go_to,
toggle_play, move_head). A compact timeline (Train's, under a form at 80x24) draws
only the grid: its owner shows position_line() in a border. Nothing here imports torch at
module level.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from minitx.tui.app.messages import TimelineMoved
from minitx.tui.app.widgets.attention import AttentionGrid

PLAY_INTERVAL = 0.15  # seconds a frame stays on screen while playing
BAR_WIDTH = 20
COMPACT_BAR_WIDTH = 12  # one line, in a border beside the step and snapshot numbers


class Timeline(Vertical):
    DEFAULT_CSS = """
    Timeline { height: 1fr; }
    Timeline #timeline-bar { height: 2; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None,
                 compact: bool = False) -> None:
        super().__init__(id=id, classes=classes)
        self.compact = compact
        self.steps: list[int] = []
        self.frames: list[list[list[list[list[float]]]]] = []  # [snapshot][layer][head] -> rows
        self.scores: list[list[list[float]]] = []  # [snapshot][layer][head]
        self.source: list[str] = []
        self.source_text = ""  # the probe source as the task writes it ("dcebe", "3 1 4")
        self.target: list[str] = []
        self.head = (0, 0)
        self.index = 0
        self.last_step = 0
        self._player = None

    def compose(self) -> ComposeResult:
        bar = Static("", id="timeline-bar", markup=False)
        bar.display = not self.compact
        yield bar
        yield AttentionGrid(id="timeline-grid", compact=self.compact)

    def on_mount(self) -> None:
        self._draw()

    @property
    def playing(self) -> bool:
        return self._player is not None

    @property
    def step(self) -> int | None:
        return self.steps[self.index] if self.steps else None

    def show_history(self, history, task=None) -> None:
        """The snapshots of a core History (None or none recorded: a note says so). With the
        task, the head shown is the best aligned one at the end; without, layer 1 head 1."""
        self.pause()
        snaps = history.snapshots if history is not None else None
        if snaps is None or not snaps.steps:
            self.steps, self.frames, self.scores = [], [], []
            self._draw()
            return
        self.steps = list(snaps.steps)
        self.frames = [a.tolist() for a in snaps.attention]  # (L, h, T, S) each
        self.scores = _scores(snaps, task) if task is not None else []
        label = task.vocab.label if task is not None else str  # ids, when no task says more
        self.source = task.source_labels(snaps.source) if task is not None else [str(i) for i in snaps.source]
        self.target = [label(i) for i in snaps.target]
        self.source_text = task.format_source(snaps.source) if task is not None else " ".join(self.source)
        self.last_step = history.last_step or self.steps[-1]
        if self.scores:
            final = self.scores[-1]
            self.head = max(((lay, h) for lay in range(len(final)) for h in range(len(final[lay]))),
                            key=lambda lh: final[lh[0]][lh[1]])
        else:
            self.head = (0, 0)
        self.index = len(self.steps) - 1  # the trained model first; scrub back to watch it form
        self._draw()

    def step_by(self, delta: int) -> bool:
        """A snapshot back or on; False where there is none that way."""
        if not self.steps or not 0 <= self.index + delta < len(self.steps):
            return False
        self.go_to(self.index + delta)
        return True

    def move_head(self, layers: int = 0, heads: int = 0) -> None:
        """Show another head in every frame: `layers` and `heads` on, wrapping around."""
        if self.frames:
            count_layers, count_heads = len(self.frames[0]), len(self.frames[0][0])
            layer, head = self.head
            self.head = ((layer + layers) % count_layers, (head + heads) % count_heads)
            self._draw()

    def go_to(self, index: int) -> None:
        if self.steps:
            self.index = max(0, min(len(self.steps) - 1, index))
            self._draw()

    def toggle_play(self) -> None:
        if self.playing:
            self.pause()
        elif len(self.steps) > 1:
            if self.index == len(self.steps) - 1:
                self.index = 0  # play from the start when at the end
            self._player = self.set_interval(PLAY_INTERVAL, self._advance)
            self._draw()

    def pause(self) -> None:
        if self._player is not None:
            self._player.stop()
            self._player = None
            if self.is_mounted:
                self._draw()

    def _advance(self) -> None:
        if self.index >= len(self.steps) - 1:
            self.pause()
            return
        self.go_to(self.index + 1)

    def scrub_bar(self, width: int = BAR_WIDTH) -> Text:
        """'step 120/1000 ▕━━━━●──────▏': where the frame is in the run."""
        step, total = self.steps[self.index], max(1, self.last_step)
        at = min(width - 1, round(step / total * (width - 1)))
        text = Text(f"step {step}/{self.last_step} ", style="bold")
        text.append("▕" + "━" * at, style="bold")
        text.append("●", style="bold reverse")
        text.append("─" * (width - 1 - at) + "▏", style="dim")
        return text

    def position_line(self) -> str:
        """'step 120/1000 ▕━━●───▏ 12/92 · playing': the compact timeline's one line of bar."""
        if not self.steps:
            return ""
        playing = " · playing" if self.playing else ""
        return f"{self.scrub_bar(COMPACT_BAR_WIDTH).plain} {self.index + 1}/{len(self.steps)}{playing}"

    def bar(self) -> Text:
        """Two lines: 'step 120/1000 ▕━━━━●──────▏' and 'snapshot 12/92 · L1 H2 aligns 0.93 ·
        playing': where the frame is, and the shown head's alignment score in it."""
        if not self.steps:
            return Text("no snapshots: this model was trained before minitx kept them, or exported",
                        style="italic dim")
        text = self.scrub_bar()
        text.append("\n")
        layer, head = self.head
        score = f" aligns {self.scores[self.index][layer][head]:.2f}" if self.scores else ""
        text.append(f"snapshot {self.index + 1}/{len(self.steps)} · L{layer + 1} H{head + 1}{score}")
        if self.playing:
            text.append(" · playing", style="bold")
        return text

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        self.query_one("#timeline-bar", Static).update(self.bar())
        grid = self.query_one("#timeline-grid", AttentionGrid)
        if not self.steps:
            grid.show([], [], [])
            return
        layer, head = self.head
        axes = "" if self.compact else "rows: correct outputs (teacher forced) · columns: the probe source"
        grid.show(self.frames[self.index][layer][head], self.source, self.target, axes=axes)
        self.post_message(TimelineMoved())


def _scores(snaps, task) -> list[list[list[float]]]:
    """Alignment score of every layer and head at every snapshot (core.alignment's measure);
    none when the task expects no pattern it can tell from the probe's tokens alone."""
    import torch

    from minitx.core.data.batch import Batch
    from minitx.core.interp.alignment import scores_from_cross

    src = torch.tensor([snaps.source])
    tgt = torch.tensor([[task.vocab.sos, *snaps.target]])  # SOS, the probe's outputs and EOS
    expected = task.expected_alignment(Batch(src, tgt, torch.tensor([len(snaps.source)])))
    if expected is None:
        return []
    return [scores_from_cross([layer[None] for layer in a], expected).tolist() for a in snaps.attention]
