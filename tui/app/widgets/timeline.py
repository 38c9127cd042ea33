"""A timeline of a run's probe snapshots: one head's cross-attention on the probe source at one
moment of training, a scrub bar, and play. On a reverse model you watch the anti-diagonal form.

A fine-tune's history holds more (core.history.Watched): each probe's greedy output at each
evaluation, with the cross-attention paid while writing it. Its timeline replays those instead,
probe after probe, each through its evaluations: the output (the words changed from its base's
output marked) above the grid, whose rows are the output's own tokens.

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
    Timeline #timeline-bar { height: auto; max-height: 3; }
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
        # a fine-tune's probes: each frame's (source, output) labels and its caption
        self.labels: list[tuple[list[str], list[str]]] = []
        self.captions: list[Text] = []
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
        self.labels, self.captions = [], []
        watched = history.watched if history is not None else None
        if watched is not None and watched.probes:
            self._show_probes(watched, history)
            return
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

    def _show_probes(self, watched, history) -> None:
        """A fine-tune's probes: evaluation after evaluation, each probe in turn, so → never goes
        back in the run."""
        records = sorted(watched.probes, key=lambda r: (r.step, r.probe))
        probes = len({r.probe for r in records})
        self.steps = [r.step for r in records]
        self.frames = [r.attention.tolist() for r in records]  # (L, h, output tokens, source tokens) each
        self.scores = []
        self.labels = [(list(r.source_tokens), list(r.output_tokens)) for r in records]
        self.captions = [probe_caption(r, probes) for r in records]
        self.source, self.target = self.labels[-1]
        self.source_text = records[-1].source
        self.last_step = history.last_step or max(self.steps)
        self.head = (len(self.frames[-1]) - 1, 0)  # the last layer's: closest to the words written
        self.index = 0  # the first probe as its base wrote it; → or p watch it change
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

    def title_line(self) -> str:
        """What a compact timeline's border names: the probe source, or a fine-tune's probe and
        what it wrote at this evaluation."""
        if self.captions:
            return f"replay · {self.captions[self.index].plain}"
        return f"timeline · probe {self.source_text}"

    def counted(self) -> tuple[str, int, int]:
        """('snapshot', 12, 92): the frame's place among the snapshots; a fine-tune's probes:
        ('evaluation', 2, 3), its evaluation's among the run's (each holds every probe)."""
        if not self.captions:
            return "snapshot", self.index + 1, len(self.steps)
        evaluations = sorted(set(self.steps))
        return "evaluation", evaluations.index(self.steps[self.index]) + 1, len(evaluations)

    def position_line(self) -> str:
        """'step 120/1000 ▕━━●───▏ 12/92 · playing': the compact timeline's one line of bar."""
        if not self.steps:
            return ""
        playing = " · playing" if self.playing else ""
        _, at, count = self.counted()
        return f"{self.scrub_bar(COMPACT_BAR_WIDTH).plain} {at}/{count}{playing}"

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
        what, at, count = self.counted()
        text.append(f"{what} {at}/{count} · L{layer + 1} H{head + 1}{score}")
        if self.playing:
            text.append(" · playing", style="bold")
        if self.captions:
            text.append("\n")
            text.append_text(self.captions[self.index])
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
        if self.labels:  # a fine-tune's probe: its greedy output's tokens, written by the model
            self.source, self.target = self.labels[self.index]
            axes = "" if self.compact else "rows: the output it wrote (greedy) · columns: the probe"
        else:
            axes = "" if self.compact else \
                "rows: correct outputs (teacher forced) · columns: the probe source"
        grid.show(self.frames[self.index][layer][head], self.source, self.target, axes=axes)
        self.post_message(TimelineMoved())


def probe_caption(record, probes: int) -> Text:
    """'probe 1/3 · the cat → die Katze' with the words changed from its base's output in bold
    reverse (visible without colour)."""
    text = Text(f"probe {record.probe + 1}/{probes} · {record.source} → ", style="dim")
    for i, word in enumerate(record.output.split()):
        text.append(" " if i else "")
        text.append(word, style="bold reverse" if i in record.changed else "")
    return text


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
