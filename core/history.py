"""A run's history: every step's numbers, every evaluation's accuracy, and snapshots of one probe
source's cross-attention, recorded by the Trainer and kept in the checkpoint as tensors.

In memory every step is kept (up to IN_MEMORY_POINTS, then thinned). In a file each series holds
at most MAX_POINTS points and the probe at most MAX_SNAPSHOTS snapshots: thinning keeps real
(step, value) pairs, spread evenly over the steps, always with the first and the last, so a
resumed run appends to a history whose every point is exact.

Tensors of a file (all optional; the checkpoint prefixes each name with "history."):
  steps (N,) int64, and loss, lr, grad_norm, examples_per_s, seconds (N,) float32 on those steps
  eval_steps (E,) int64, accuracy (E,) float32, and (together, optional) eval_n (E,) int64: how
  many examples each evaluation measured, eval_complete (E,) bool: False where it stopped early
  (once --until was out of reach), so its accuracy is rough
  probe_steps (K,) int64, probe_source (S,) int64, probe_target (T,) int64,
  probe_attention (K, layers, heads, T, S) float32
  A fine-tune's watching (core/training/watching.py), one entry per evaluation, all optional:
  watch_steps (W,) int64, watch_general_loss and watch_kl_to_base (W,) float32,
  watch_activation_max (W, points) float32 (inf where fp32 itself overflowed), watch_grad_norm
  (W, layers of both stacks) float32, watch_info (N,) uint8: UTF-8 JSON of what has no number
  (which pairs the KL was measured on, the points' and layers' names, each probe's texts), and
  watch_probe_attention (M,) float32: every kept probe record's cross-attention
  (layers, heads, output tokens, source tokens), flattened one after another in watch_info's order;
  a LoRA fine-tune's watch_update_size (W, adapted layers) float32: each adapted layer's
  ||scale B A|| / ||W|| (core/model/lora.py), the layers named in watch_info's "adapters".

A file is untrusted: from_tensors() checks names, dtypes, shapes, sizes, values and step numbers
and raises HistoryError (one sentence) for anything a recorder could not have written.
"""

from __future__ import annotations

import bisect
import copy
import json
import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from minitx.core.number_formats import FORMATS

if TYPE_CHECKING:  # torch is imported where tensors are made or read: the app draws histories
    import torch  # (from files, or a live run's) before torch has been loaded

STEP_SERIES = ("loss", "lr", "grad_norm", "examples_per_s", "seconds")  # one value per step
SERIES = (*STEP_SERIES, "accuracy")  # accuracy: one value per evaluation
MAX_POINTS = 2000  # per series, in a file
MAX_SNAPSHOTS = 100
# A shared file (`minitx export --history`, the bundled models) keeps at most this many bytes of
# snapshots: all 100 of a long probe would outweigh the model (the dates model's: 880 KB).
SHARED_SNAPSHOT_BYTES = 256 * 1024
IN_MEMORY_POINTS = 200_000  # beyond this a long run thins its in-memory history to a quarter
EVAL_SIZES = ("eval_n", "eval_complete")  # optional, with eval_steps
PROBE_KEYS = ("probe_steps", "probe_source", "probe_target", "probe_attention")
NON_NEGATIVE = ("loss", "lr", "grad_norm", "examples_per_s", "seconds")
# A fine-tune's probes' cross-attention in a file: at most MAX_SNAPSHOTS evaluations and this
# many bytes (an opus-mt model's three probes of 30 tokens take 520 KB an evaluation).
PROBE_ATTENTION_BYTES = 8 * 2**20
WATCH_SERIES = ("general_loss", "kl_to_base")  # one value per watched evaluation (curves' series)
WATCH_KEYS = ("watch_steps", "watch_info", "watch_general_loss", "watch_kl_to_base",
              "watch_activation_max", "watch_grad_norm", "watch_probe_attention", "watch_update_size")
MAX_WATCH_INFO_BYTES = 64 * 2**20
MAX_METRICS_BYTES = 256 * 1024 * 1024  # a metrics file of a million steps is about 150 MB


class HistoryError(ValueError):
    """A history that cannot be read; str(e) is one sentence."""


def keep_indices(steps, limit: int) -> list[int]:
    """Indices of at most `limit` of `steps` (increasing), spread evenly over the step range: for
    each of `limit` evenly spaced step targets the nearest real step. First and last always stay."""
    n = len(steps)
    if n <= limit:
        return list(range(n))
    if limit < 2:
        return [n - 1][:limit]
    first, last = steps[0], steps[-1]
    chosen = {0, n - 1}
    for i in range(1, limit - 1):
        target = first + (last - first) * i / (limit - 1)
        j = bisect.bisect_left(steps, target)
        if j > 0 and (j == n or target - steps[j - 1] <= steps[j] - target):
            j -= 1
        chosen.add(j)
    return sorted(chosen)


def snapshot_due(step: int, total_steps: int) -> bool:
    """Whether the Trainer snapshots the probe after `step` of a run planned for `total_steps`:
    about MAX_SNAPSHOTS - 2 evenly spaced moments (step 0 and the last step are taken anyway)."""
    every = max(1, -(-total_steps // (MAX_SNAPSHOTS - 2)))
    return step % every == 0


@dataclass
class Snapshots:
    """The probe source's teacher-forced cross-attention at several moments of training."""

    source: list[int]  # token ids of the probe source
    target: list[int]  # the task's output and EOS: one attention row each
    steps: list[int] = field(default_factory=list)
    attention: list[torch.Tensor] = field(default_factory=list)  # each (layers, heads, T, S)

    def thin(self, limit: int) -> None:
        keep = keep_indices(self.steps, limit)
        self.steps = [self.steps[i] for i in keep]
        self.attention = [self.attention[i] for i in keep]


@dataclass
class ProbeRecord:
    """One probe's greedy output at one evaluation, beside its base's output, and the
    cross-attention paid while writing it."""

    step: int
    probe: int  # which of the run's probes (from 0)
    source: str
    output: str
    base_output: str  # the base model's greedy output for the same source
    changed: list[int]  # indices of output.split() words the base's output does not have there
    source_tokens: list[str]  # the fed source's pieces: the attention's columns
    output_tokens: list[str]  # the generated pieces (end token included): its rows
    attention: torch.Tensor  # (layers, heads, len(output_tokens), len(source_tokens))

    def info(self) -> dict:
        return {"step": self.step, "probe": self.probe, "source": self.source, "output": self.output,
                "base_output": self.base_output, "changed": list(self.changed),
                "source_tokens": list(self.source_tokens), "output_tokens": list(self.output_tokens)}


@dataclass
class Watched:
    """A fine-tune's watching: at each evaluation the general-domain loss (with general pairs),
    the mean KL to the base (on the general pairs, else on the probes: `kl_on`), each point's
    largest |activation| and each layer's gradient norm, and the probes' outputs."""

    kl_on: str = "general"  # "general" or "probes"
    points: list[list] = field(default_factory=list)  # [stack, layer, sublayer] in forward order
    layers: list[list] = field(default_factory=list)  # [stack, layer]: the gradient norms' order
    steps: list[int] = field(default_factory=list)
    general_loss: list[float] = field(default_factory=list)  # empty without general pairs
    kl_to_base: list[float] = field(default_factory=list)
    activation_max: list[list[float]] = field(default_factory=list)  # per step, per point
    grad_norm: list[list[float]] = field(default_factory=list)  # per step, per layer
    probes: list[ProbeRecord] = field(default_factory=list)
    # a LoRA fine-tune's adapted layers (module names) and, per step, each one's update size:
    # ||scale B A|| / ||W||, how far it moved from its base's weight
    adapters: list[str] = field(default_factory=list)
    update_size: list[list[float]] = field(default_factory=list)

    def series_of(self, name: str) -> list[float]:
        return {"general_loss": self.general_loss, "kl_to_base": self.kl_to_base}[name]

    def probe_steps(self) -> list[int]:
        return sorted({r.step for r in self.probes})

    def thinned(self, limit: int, probe_bytes: int) -> Watched:
        """A copy with at most `limit` evaluations' series, and the probe records of at most
        MAX_SNAPSHOTS evaluations within `probe_bytes` of attention (evenly, first and last kept)."""
        keep = keep_indices(self.steps, limit)
        out = Watched(self.kl_on, self.points, self.layers, [self.steps[i] for i in keep],
                      adapters=self.adapters)
        for name in ("general_loss", "kl_to_base", "activation_max", "grad_norm", "update_size"):
            values = getattr(self, name)
            setattr(out, name, [values[i] for i in keep] if values else [])
        steps = self.probe_steps()
        if steps:
            each = max(sum(r.attention.numel() * 4 for r in self.probes) / len(steps), 1)
            count = max(2, min(MAX_SNAPSHOTS, int(probe_bytes // each)))
            kept = {steps[i] for i in keep_indices(steps, count)}
            out.probes = [r for r in self.probes if r.step in kept]
        return out


class History:
    def __init__(self) -> None:
        self.steps = array("q")
        self.values = {name: array("d") for name in STEP_SERIES}
        self.eval_steps = array("q")
        self.accuracy = array("d")
        self.eval_n = array("q")  # 0: not recorded (a file from before sizes were kept)
        self.eval_complete = array("b")
        self.snapshots: Snapshots | None = None
        self.watched: Watched | None = None  # a fine-tune's probes, forgetting and numerics

    # -- recording -------------------------------------------------------------------------
    def record_step(self, step: int, loss: float, lr: float, grad_norm: float,
                    examples_per_s: float, seconds: float) -> None:
        self.steps.append(step)
        for name, value in zip(STEP_SERIES, (loss, lr, grad_norm, examples_per_s, seconds)):
            self.values[name].append(value)
        if len(self.steps) > IN_MEMORY_POINTS:
            self._thin_steps(IN_MEMORY_POINTS // 4)

    def record_eval(self, step: int, accuracy: float, n: int = 0, complete: bool = True) -> None:
        """An evaluation at `step` of n examples (complete=False: it stopped early, so the
        accuracy is rough); a second one at the same step replaces the first."""
        if self.eval_steps and self.eval_steps[-1] == step:
            self.accuracy[-1], self.eval_n[-1], self.eval_complete[-1] = accuracy, n, complete
            return
        self.eval_steps.append(step)
        self.accuracy.append(accuracy)
        self.eval_n.append(n)
        self.eval_complete.append(complete)

    def evaluations(self) -> list[tuple[int, float, int, bool]]:
        """(step, accuracy, examples measured or 0 if unknown, complete) of every evaluation."""
        count = min(len(self.eval_steps), len(self.accuracy), len(self.eval_n), len(self.eval_complete))
        return [(self.eval_steps[i], self.accuracy[i], self.eval_n[i], bool(self.eval_complete[i]))
                for i in range(count)]

    def best_accuracy(self) -> tuple[int, float] | None:
        """(step, accuracy) of the best complete evaluation: a rough one is never the best."""
        complete = [(acc, step) for step, acc, _, done in self.evaluations() if done]
        if not complete:
            return None
        accuracy, step = max(complete, key=lambda a: (a[0], -a[1]))
        return step, accuracy

    def record_snapshot(self, step: int, source: list[int], target: list[int],
                        attention: torch.Tensor) -> None:
        import torch

        if not bool(torch.isfinite(attention).all()):
            return  # a model on its way to diverging: no picture, and never a file no loader takes
        if self.snapshots is None:
            self.snapshots = Snapshots(list(source), list(target))
        if self.snapshots.steps and self.snapshots.steps[-1] == step:
            return
        self.snapshots.steps.append(step)
        self.snapshots.attention.append(attention.detach().to("cpu", torch.float32))
        if len(self.snapshots.steps) > 4 * MAX_SNAPSHOTS:
            self.snapshots.thin(2 * MAX_SNAPSHOTS)

    def record_watch(self, step: int, kl_to_base: float | None, general_loss: float | None = None,
                     kl_on: str = "general", activations: list[tuple[str, int, str, float]] = (),
                     gradients: list[tuple[str, int, float]] = (), probes: list[ProbeRecord] = (),
                     updates: list[tuple[str, float]] = ()) -> None:
        """One evaluation's watching of a fine-tune (core/training/watching.py): activations as
        (stack, layer, sublayer, largest |activation|) in forward order, gradients as (stack,
        layer, norm), a LoRA's updates as (adapted layer, update size); a second record at the
        same step replaces the first."""
        import torch

        w = self.watched = self.watched or Watched(kl_on)
        if w.steps and w.steps[-1] == step:
            w.steps.pop()
            for values in (w.general_loss, w.kl_to_base, w.activation_max, w.grad_norm, w.update_size):
                if len(values) > len(w.steps):
                    values.pop()
            w.probes = [r for r in w.probes if r.step != step]
        w.steps.append(step)
        if general_loss is not None:
            w.general_loss.append(general_loss)
        if kl_to_base is not None:
            w.kl_to_base.append(kl_to_base)
        if activations:
            w.points = [[stack, layer, sublayer] for stack, layer, sublayer, _ in activations]
            w.activation_max.append([value for *_, value in activations])
        if gradients:
            w.layers = [[stack, layer] for stack, layer, _ in gradients]
            w.grad_norm.append([norm for *_, norm in gradients])
        if updates:
            w.adapters = [name for name, _ in updates]
            w.update_size.append([size for _, size in updates])
        for record in probes:
            if bool(torch.isfinite(record.attention).all()):  # never a file no loader takes
                record.attention = record.attention.detach().to("cpu", torch.float32)
                w.probes.append(record)
        if len(w.probe_steps()) > 4 * MAX_SNAPSHOTS:  # a long run: memory, as record_snapshot keeps it
            w.probes = w.thinned(len(w.steps), PROBE_ATTENTION_BYTES * 2 * MAX_SNAPSHOTS).probes

    def _thin_steps(self, limit: int) -> None:
        keep = keep_indices(list(self.steps), limit)
        self.steps = array("q", (self.steps[i] for i in keep))
        for name in STEP_SERIES:
            self.values[name] = array("d", (self.values[name][i] for i in keep))

    # -- reading ---------------------------------------------------------------------------
    @property
    def empty(self) -> bool:
        return not self.steps and not self.eval_steps and not self.snapshot_steps

    @property
    def last_step(self) -> int | None:
        return self.steps[-1] if self.steps else None

    @property
    def snapshot_steps(self) -> list[int]:
        return list(self.snapshots.steps) if self.snapshots else []

    def series(self, name: str, at_most: int | None = None) -> tuple[list[int], list[float]]:
        """(steps, values) of one series of SERIES, of equal length even while the training
        thread appends (the app draws a live run's history); with `at_most`, no more points than
        that, chosen by keep_indices (a chart of a long run needs no more than it can draw)."""
        if name == "accuracy":
            steps, values = self.eval_steps, self.accuracy
        elif name in WATCH_SERIES:
            values = self.watched.series_of(name) if self.watched else []
            steps = self.watched.steps if values else []
        elif name in self.values:
            steps, values = self.steps, self.values[name]
        else:
            raise KeyError(f"no series {name!r}; the series are {', '.join((*SERIES, *WATCH_SERIES))}")
        n = min(len(steps), len(values))
        steps, values = steps[:n], values[:n]  # copies (of arrays: cheap), taken together
        if at_most is not None and n > at_most:
            keep = keep_indices(steps, at_most)
            return [steps[i] for i in keep], [values[i] for i in keep]
        return list(steps), list(values)

    def seconds_at(self, steps: list[int]) -> list[float]:
        """Training seconds at each step (interpolated between recorded steps): for an x axis of
        wall time under evaluations and snapshots."""
        known, seconds = self.series("seconds")
        if not known:
            return [0.0 for _ in steps]
        out = []
        for step in steps:
            j = bisect.bisect_left(known, step)
            if j < len(known) and known[j] == step:
                out.append(seconds[j])
            elif j == 0:
                out.append(seconds[0] * step / known[0] if known[0] else 0.0)
            elif j == len(known):
                out.append(seconds[-1])
            else:
                a, b = known[j - 1], known[j]
                out.append(seconds[j - 1] + (seconds[j] - seconds[j - 1]) * (step - a) / (b - a))
        return out

    def to_dict(self) -> dict:
        """Plain data (inspect --json, curves --format json): each series' steps and values, and
        where the snapshots are (their attention stays in the file)."""
        data: dict = {"series": {}}
        for name in SERIES:
            steps, values = self.series(name)
            if steps:
                data["series"][name] = {"step": steps, "value": [_round(v) for v in values]}
        if "accuracy" in data["series"]:  # how many examples each measured, and which stopped early
            evaluations = self.evaluations()
            data["series"]["accuracy"]["n"] = [n for _, _, n, _ in evaluations]
            data["series"]["accuracy"]["complete"] = [done for _, _, _, done in evaluations]
        for name in WATCH_SERIES:
            steps, values = self.series(name)
            if steps:
                data["series"][name] = {"step": steps, "value": [_round(v) for v in values]}
        if "kl_to_base" in data["series"]:
            data["series"]["kl_to_base"]["on"] = self.watched.kl_on
        data["probes"] = [r.info() for r in self.watched.probes] if self.watched else []
        data["numerics"] = self._numerics_dict()
        data["lora_updates"] = self.lora_updates()
        snaps = self.snapshots
        data["snapshots"] = None if snaps is None else {
            "step": list(snaps.steps), "source": snaps.source, "target": snaps.target,
            "shape": [len(snaps.steps), *snaps.attention[0].shape] if snaps.attention else [],
        }
        return data

    def lora_updates(self) -> dict | None:
        """A LoRA fine-tune's update sizes: {"step": [...], "layers": [{"name", "size": [...]}]},
        each adapted layer's ||scale B A|| / ||W|| at each watched evaluation; None without."""
        w = self.watched
        if w is None or not w.update_size:
            return None
        return {"step": list(w.steps[: len(w.update_size)]),
                "layers": [{"name": name, "size": [_round(row[i]) for row in w.update_size]}
                           for i, name in enumerate(w.adapters)]}

    def _numerics_dict(self) -> dict | None:
        """Each point's largest |activation| and headroom to fp16 and bf16 (format's largest value
        / the activation: below 1 it overflows; None where infinite), each layer's gradient norm,
        at each watched evaluation."""
        w = self.watched
        if w is None or not w.activation_max:
            return None
        def headroom(top: float, largest: float) -> float | None:
            return None if not largest or not math.isfinite(largest) else _round(top / largest)

        activations = []
        for i, (stack, layer, sublayer) in enumerate(w.points):
            maxima = [row[i] for row in w.activation_max]
            activations.append({"stack": stack, "layer": layer, "sublayer": sublayer,
                                "max": [_round(v) if math.isfinite(v) else None for v in maxima],
                                **{f"headroom_{fmt}": [headroom(top, v) for v in maxima]
                                   for fmt, top in FORMATS.items()}})
        gradients = [{"stack": stack, "layer": layer, "norm": [_round(row[i]) for row in w.grad_norm]}
                     for i, (stack, layer) in enumerate(w.layers)] if w.grad_norm else []
        return {"step": list(w.steps[: len(w.activation_max)]), "activations": activations,
                "gradients": gradients}

    def for_sharing(self) -> History:
        """This history with its snapshots thinned (evenly, the first and last kept) to at most
        SHARED_SNAPSHOT_BYTES; the curves stay whole. A copy: the run's own is left as it is."""
        shared = copy.copy(self)
        snaps = self.snapshots
        if snaps is not None and snaps.attention:
            each = snaps.attention[0].numel() * snaps.attention[0].element_size()
            shared.snapshots = Snapshots(snaps.source, snaps.target, list(snaps.steps), list(snaps.attention))
            shared.snapshots.thin(max(2, min(MAX_SNAPSHOTS, SHARED_SNAPSHOT_BYTES // each)))
        if self.watched is not None:
            shared.watched = self.watched.thinned(MAX_POINTS, SHARED_SNAPSHOT_BYTES)
        return shared

    # -- the file --------------------------------------------------------------------------
    def to_tensors(self) -> dict[str, torch.Tensor]:
        """At most MAX_POINTS per series and MAX_SNAPSHOTS snapshots, as tensors."""
        import torch

        out: dict[str, torch.Tensor] = {}
        steps = list(self.steps)
        if steps:
            keep = keep_indices(steps, MAX_POINTS)
            out["steps"] = torch.tensor([steps[i] for i in keep], dtype=torch.int64)
            for name in STEP_SERIES:
                values = self.values[name]
                out[name] = torch.tensor([values[i] for i in keep], dtype=torch.float32)
        if self.eval_steps:
            keep = keep_indices(list(self.eval_steps), MAX_POINTS)
            out["eval_steps"] = torch.tensor([self.eval_steps[i] for i in keep], dtype=torch.int64)
            out["accuracy"] = torch.tensor([self.accuracy[i] for i in keep], dtype=torch.float32)
            out["eval_n"] = torch.tensor([self.eval_n[i] for i in keep], dtype=torch.int64)
            out["eval_complete"] = torch.tensor([bool(self.eval_complete[i]) for i in keep], dtype=torch.bool)
        if self.snapshots is not None and self.snapshots.steps:
            snaps = Snapshots(self.snapshots.source, self.snapshots.target,
                              list(self.snapshots.steps), list(self.snapshots.attention))
            snaps.thin(MAX_SNAPSHOTS)
            out["probe_steps"] = torch.tensor(snaps.steps, dtype=torch.int64)
            out["probe_source"] = torch.tensor(snaps.source, dtype=torch.int64)
            out["probe_target"] = torch.tensor(snaps.target, dtype=torch.int64)
            out["probe_attention"] = torch.stack(snaps.attention).contiguous()  # (K, L, h, T, S)
        if self.watched is not None and self.watched.steps:
            out.update(_watch_tensors(self.watched.thinned(MAX_POINTS, PROBE_ATTENTION_BYTES)))
        return out

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], layers: int, heads: int,
                     max_len: int, vocab_size: int, last_step: int | None) -> History:
        """Validate a file's history tensors (names without the "history." prefix) against the
        model that holds them; `last_step` is the run's step count when the file states one."""
        known = {"steps", *SERIES, "eval_steps", *EVAL_SIZES, *PROBE_KEYS, *WATCH_KEYS}
        unknown = sorted(set(tensors) - known)
        if unknown:
            raise HistoryError(f"unknown history tensor {unknown[0]!r}")
        history = cls()
        limit = last_step if last_step is not None else None
        if _present(tensors, ("steps", *STEP_SERIES), "steps"):
            steps = _steps(tensors["steps"], "steps", MAX_POINTS, first=1, last=limit)
            history.steps = array("q", steps)
            for name in STEP_SERIES:
                values = _values(tensors[name], name, len(steps))
                if name in NON_NEGATIVE and any(v < 0 for v in values):
                    raise HistoryError(f"history {name} holds negative values")
                history.values[name] = array("d", values)
            seconds = history.values["seconds"]
            if any(b < a for a, b in zip(seconds, seconds[1:])):
                raise HistoryError("history seconds go backwards")
        if _present(tensors, ("eval_steps", "accuracy"), "eval_steps"):
            steps = _steps(tensors["eval_steps"], "eval_steps", MAX_POINTS, first=0, last=limit)
            values = _values(tensors["accuracy"], "accuracy", len(steps))
            if any(not 0.0 <= v <= 1.0 for v in values):
                raise HistoryError("history accuracy holds values outside 0-1")
            history.eval_steps, history.accuracy = array("q", steps), array("d", values)
            history.eval_n = array("q", [0] * len(steps))
            history.eval_complete = array("b", [1] * len(steps))
            if _present(tensors, EVAL_SIZES, "eval_n"):
                history.eval_n, history.eval_complete = _eval_sizes(tensors, len(steps))
        elif any(name in tensors for name in EVAL_SIZES):
            raise HistoryError("history has evaluation sizes but no evaluations")
        if _present(tensors, PROBE_KEYS, "probe_steps"):
            history.snapshots = _snapshots(tensors, layers, heads, max_len, vocab_size, limit)
        if _present(tensors, ("watch_steps", "watch_info"), "watch_steps"):
            history.watched = _watched(tensors, layers, heads, limit)
        elif any(name in tensors for name in WATCH_KEYS):
            raise HistoryError("history has watching figures but no watch_steps")
        return history


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def _present(tensors: dict, names: tuple[str, ...], lead: str) -> bool:
    """True when every one of `names` is there, False when none is; HistoryError otherwise."""
    there = [n for n in names if n in tensors]
    if there and len(there) != len(names):
        missing = next(n for n in names if n not in tensors)
        raise HistoryError(f"history has {there[0]!r} but not {missing!r}")
    return bool(there)


def _steps(t: torch.Tensor, name: str, limit: int, first: int, last: int | None) -> list[int]:
    import torch

    if t.dtype != torch.int64 or t.dim() != 1:
        raise HistoryError(f"history {name} must be a vector of int64, not {t.dtype} {tuple(t.shape)}")
    if t.numel() > limit:
        raise HistoryError(f"history tensor {name} holds {t.numel()} points; at most {limit} are allowed")
    steps = t.tolist()
    if steps and steps[0] < first:
        raise HistoryError(f"history tensor {name} starts at step {steps[0]}, before step {first}")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise HistoryError(f"history tensor {name} is not strictly increasing")
    if steps and last is not None and steps[-1] > last:
        raise HistoryError(f"history tensor {name} reaches step {steps[-1]}, past the run's {last} steps")
    return steps


def _eval_sizes(tensors: dict, count: int) -> tuple[array, array]:
    import torch

    n, complete = tensors["eval_n"], tensors["eval_complete"]
    if n.dtype != torch.int64 or tuple(n.shape) != (count,):
        raise HistoryError(f"history eval_n must be {count} int64 values, not {n.dtype} {tuple(n.shape)}")
    if complete.dtype != torch.bool or tuple(complete.shape) != (count,):
        raise HistoryError(f"history eval_complete must be {count} bool values, not {complete.dtype} "
                           f"{tuple(complete.shape)}")
    sizes = n.tolist()
    if any(not 0 <= k <= 10**9 for k in sizes):
        raise HistoryError("history eval_n holds a count outside 0-1e9")
    return array("q", sizes), array("b", [int(c) for c in complete.tolist()])


def _values(t: torch.Tensor, name: str, n: int) -> list[float]:
    import torch

    if t.dtype != torch.float32 or tuple(t.shape) != (n,):
        raise HistoryError(f"history {name} must be {n} float32 values, not {t.dtype} {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise HistoryError(f"history {name} holds NaN or infinite values")
    return t.tolist()


def _token_ids(t: torch.Tensor, name: str, max_len: int, vocab_size: int) -> list[int]:
    import torch

    if t.dtype != torch.int64 or t.dim() != 1 or not 1 <= t.numel() <= max_len:
        raise HistoryError(f"history {name} must be 1-{max_len} int64 token ids, not {t.dtype} "
                           f"{tuple(t.shape)}")
    ids = t.tolist()
    if any(not 0 <= i < vocab_size for i in ids):
        raise HistoryError(f"history {name} holds ids outside the vocabulary of {vocab_size}")
    return ids


def _snapshots(tensors: dict, layers: int, heads: int, max_len: int, vocab_size: int,
               last: int | None) -> Snapshots:
    steps = _steps(tensors["probe_steps"], "probe_steps", MAX_SNAPSHOTS, first=0, last=last)
    source = _token_ids(tensors["probe_source"], "probe_source", max_len, vocab_size)
    target = _token_ids(tensors["probe_target"], "probe_target", max_len, vocab_size)
    import torch

    attention = tensors["probe_attention"]
    shape = (len(steps), layers, heads, len(target), len(source))
    if attention.dtype != torch.float32 or tuple(attention.shape) != shape:
        raise HistoryError(f"history probe_attention must be float32 of shape {shape} (snapshots, "
                           f"layers, heads, target, source), not {attention.dtype} "
                           f"{tuple(attention.shape)}")
    if not bool(torch.isfinite(attention).all()) or bool(((attention < 0) | (attention > 1)).any()):
        raise HistoryError("history probe_attention holds weights outside 0-1")
    return Snapshots(source, target, steps, list(attention.unbind(0)))


def _watch_tensors(w: Watched) -> dict[str, torch.Tensor]:
    import torch

    info = {"kl_on": w.kl_on, "points": w.points, "layers": w.layers, "probes": [r.info() for r in w.probes],
            **({"adapters": w.adapters} if w.adapters else {})}
    out = {"watch_steps": torch.tensor(w.steps, dtype=torch.int64),
           "watch_info": torch.frombuffer(bytearray(json.dumps(info).encode()), dtype=torch.uint8)}
    for name in ("general_loss", "kl_to_base", "activation_max", "grad_norm", "update_size"):
        values = getattr(w, name)
        if values:
            out[f"watch_{name}"] = torch.tensor(values, dtype=torch.float32)
    if w.probes:
        out["watch_probe_attention"] = torch.cat([r.attention.reshape(-1) for r in w.probes])
    return out


def _watched(tensors: dict, layers: int, heads: int, last: int | None) -> Watched:
    """A file's watching figures, checked against each other and the model (HistoryError)."""
    import torch

    steps = _steps(tensors["watch_steps"], "watch_steps", MAX_POINTS, first=0, last=last)
    raw = tensors["watch_info"]
    if raw.dtype != torch.uint8 or raw.dim() != 1 or raw.numel() > MAX_WATCH_INFO_BYTES:
        raise HistoryError("history watch_info must be UTF-8 JSON bytes (uint8)")
    try:
        info = json.loads(bytes(raw.tolist()).decode("utf-8"))
        w = Watched(info["kl_on"], info["points"], info["layers"], steps,
                    adapters=[str(name) for name in info.get("adapters", [])])
        if w.kl_on not in ("general", "probes") or not isinstance(info["probes"], list):
            raise ValueError
        for name, size in (("general_loss", None), ("kl_to_base", None), ("activation_max", len(w.points)),
                           ("grad_norm", len(w.layers)), ("update_size", len(w.adapters))):
            t = tensors.get(f"watch_{name}")
            if t is None:
                continue
            shape = (len(steps),) if size is None else (len(steps), size)
            if t.dtype != torch.float32 or tuple(t.shape) != shape or bool((t.isnan() | (t < 0)).any()) \
                    or (size is None and not bool(torch.isfinite(t).all())):
                raise HistoryError(f"history watch_{name} must be {shape} float32 values from 0")
            setattr(w, name, t.tolist())
        flat = tensors.get("watch_probe_attention", torch.zeros(0))
        at = 0
        for r in info["probes"]:
            shape = (layers, heads, len(r["output_tokens"]), len(r["source_tokens"]))
            n = math.prod(shape)
            # a probe's step is a watched evaluation's, though the series may have thinned it away
            if not 0 <= r["step"] <= (steps[-1] if last is None else last) or flat.dtype != torch.float32 \
                    or at + n > flat.numel():
                raise ValueError
            attention = flat[at: at + n].reshape(shape)
            at += n
            if not bool(((attention >= 0) & (attention <= 1)).all()):
                raise HistoryError("history watch_probe_attention holds weights outside 0-1")
            w.probes.append(ProbeRecord(
                int(r["step"]), int(r["probe"]), str(r["source"]), str(r["output"]), str(r["base_output"]),
                [int(i) for i in r["changed"]], [str(t) for t in r["source_tokens"]],
                [str(t) for t in r["output_tokens"]], attention.clone()))
        if at != flat.numel():
            raise ValueError
    except HistoryError:
        raise
    except (ValueError, TypeError, KeyError, RecursionError, UnicodeDecodeError, RuntimeError):
        raise HistoryError("history watch_info does not describe its watching figures") from None
    return w


# ---------------------------------------------------------------------------------------------
# A --metrics file (JSON lines) as a history: what `minitx curves run.jsonl` draws.


def history_from_metrics(path: str | Path) -> History:
    """Rows {"kind": "step", "step", "loss", "lr", "grad_norm", "examples_per_s", "seconds"} and
    {"kind": "eval", "step", "accuracy", "n", "complete"}; rows of older files (no "kind",
    accuracy on a step row; no n) too. A resumed run appends to its file, so a step seen again
    replaces what followed it (the steps after a save that were lost by a crash). HistoryError
    names the file and line."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_METRICS_BYTES:
            raise HistoryError(f"{path} is larger than {MAX_METRICS_BYTES // 2**20} MB")
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise HistoryError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise HistoryError(f"{path} is not a text file of JSON lines") from None
    steps: dict[int, dict] = {}
    evals: dict[int, tuple[float, int, bool]] = {}  # step -> (accuracy, n, complete)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            _metrics_row(row, steps, evals)
        except (ValueError, TypeError, KeyError, RecursionError) as e:
            reason = str(e) if isinstance(e, (HistoryError, ValueError)) else f"missing {e}"
            raise HistoryError(f"{path} line {number}: {reason.splitlines()[0][:120]}") from None
    history = History()
    for step in sorted(steps):
        row = steps[step]
        history.record_step(step, *(row[name] for name in STEP_SERIES))
    for step in sorted(evals):
        history.record_eval(step, *evals[step])
    return history


def _metrics_row(row: dict, steps: dict[int, dict], evals: dict[int, tuple[float, int, bool]]) -> None:
    step = row["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step must be a non-negative whole number, got {step!r}")
    kind = row.get("kind", "step")
    if kind not in ("step", "eval"):
        raise ValueError(f"kind must be step or eval, got {kind!r}")
    if kind == "step":
        values = {}
        for name in STEP_SERIES:
            value = row.get(name, 0.0 if name in ("examples_per_s", "seconds") else None)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            values[name] = float(value)
        # A resumed run went back to its last save: what followed that save is gone.
        for later in [s for s in steps if s >= step]:
            del steps[later]
        for later in [s for s in evals if s >= step]:
            del evals[later]
        steps[step] = values
    if "accuracy" in row:
        accuracy = row["accuracy"]
        if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) \
                or not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"accuracy must be a number in 0-1, got {accuracy!r}")
        n, complete = row.get("n", 0), row.get("complete", True)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a whole number of examples, got {n!r}")
        if not isinstance(complete, bool):
            raise ValueError(f"complete must be true or false, got {complete!r}")
        evals[step] = (float(accuracy), n, complete)
