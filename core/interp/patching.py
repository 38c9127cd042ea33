"""Activation patching: which activations carry what makes a model's answer right?

Run a clean source and a corrupted one of the same length, copy one activation (a head's output,
the residual stream leaving a layer, at one or all positions, or what one cross-attention head
reads) from the clean run into the corrupted one, and measure how much of the clean answer comes
back. Copying clean into corrupted asks whether the activation suffices to bring the answer
back; copying corrupted into clean would ask whether it is needed.

All runs are teacher-forced on the clean source's correct output, so they differ only in the
source. The metric is the logit difference LD = logit(clean answer) - logit(corrupted answer),
averaged over the steps where the two answers differ; the recovered fraction of a patch is
(LD_patched - LD_corrupted) / (LD_clean - LD_corrupted): 0 is the corrupted run, 1 the clean one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from minitx.core.interp.interventions import (
    SIDES,
    Head,
    HeadInput,
    Interventions,
    Patch,
    Recording,
    Stream,
    all_heads,
)
from minitx.core.interp.pairs import Pair, PairBatch, typed_pair
from minitx.core.model.transformer import Seq2Seq, eval_mode


@dataclass
class PatchingResult:
    clean: list[int]
    corrupted: list[int]
    clean_answer: list[int]  # the task's output for the clean source, then EOS
    corrupted_answer: list[int]
    steps: list[int]  # the steps whose answers differ: the metric averages over them
    clean_difference: float  # LD of the clean run
    corrupted_difference: float  # LD of the corrupted run
    by_model: bool = False  # the answers are the model's outputs (typed text a task cannot answer)
    heads: dict[str, float] = field(default_factory=dict)  # "cross:L2.H1" -> fraction, all positions
    streams: dict[str, list[float]] = field(default_factory=dict)  # "enc:L1.resid" -> per position
    stream_all: dict[str, float] = field(default_factory=dict)  # "enc:L1.resid" -> all positions
    inputs: dict[str, float] = field(default_factory=dict)  # "cross:L2.H1 K/V" -> what it reads

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Patcher:
    """The clean and corrupted runs of a batch of pairs (core/interp/pairs.py), kept so any patch
    is one forward. Made from two typed sources (`Patcher(model, task, clean, corrupted)`) or from
    pairs (`Patcher.of_pairs`); with several pairs the metric averages over every step of every
    pair where the answers differ."""

    def __init__(self, model: Seq2Seq, task, clean: list[int], corrupted: list[int]) -> None:
        self._start(model, [typed_pair(task, clean, corrupted, model.cfg.eos_id, model)])

    @classmethod
    def of_pairs(cls, model: Seq2Seq, pairs: list[Pair]) -> Patcher:
        patcher = cls.__new__(cls)
        patcher._start(model, pairs)
        return patcher

    @torch.no_grad()
    def _start(self, model: Seq2Seq, pairs: list[Pair]) -> None:
        cfg = model.cfg
        self.model, self.pairs = model, list(pairs)
        first = self.pairs[0]
        self.clean, self.corrupted = first.clean, first.corrupted  # the first pair (all, with one)
        self.clean_answer, self.corrupted_answer, self.steps = first.clean_answer, first.corrupted_answer, \
            first.steps
        self.by_model = first.by_model
        self.batch = PairBatch.of(self.pairs, cfg.pad_id, cfg.sos_id, cfg.source_pad_id)
        if not bool(self.batch.steps.any()):
            raise ValueError("the clean and corrupted sources have the same answer: "
                             "there is no difference to recover")
        device = model.device
        self._src = {"clean": self.batch.clean.to(device), "corrupted": self.batch.corrupted.to(device)}
        self.decoder_input = self.batch.decoder_input.to(device)  # (B, T)
        self._steps = self.batch.steps.to(device)  # (B, T)
        self._answers = (self.batch.clean_answer.to(device), self.batch.corrupted_answer.to(device))
        self.recording = Recording(inputs=True)
        self._corrupted_recording: Recording | None = None
        self.clean_logits = self.run("clean", Interventions(record=self.recording))  # (B, T, V)
        self.corrupted_logits = self.run("corrupted")
        self.clean_difference = self.difference(self.clean_logits)
        self.corrupted_difference = self.difference(self.corrupted_logits)
        if abs(self.clean_difference - self.corrupted_difference) < 1e-6:
            raise ValueError("the clean and corrupted runs give the same logit difference: "
                             "this model does not tell the two answers apart")

    def source(self, name: str) -> torch.Tensor:
        """(B, S) clean or corrupted sources, on the model's device."""
        return self._src[name]

    def runs(self) -> PatchingResult:
        """The first pair's two runs as a result with nothing patched yet (what sweep fills)."""
        return PatchingResult(self.clean, self.corrupted, self.clean_answer, self.corrupted_answer,
                              self.steps, self.clean_difference, self.corrupted_difference, self.by_model)

    def run(self, source: str, interventions: Interventions | None = None) -> torch.Tensor:
        """Logits (B, T, V) of the clean or corrupted sources under `interventions`."""
        with eval_mode(self.model), torch.no_grad(), (interventions or Interventions()).applied(self.model):
            return self.model(self._src[source], self.decoder_input)

    def difference_tensor(self, logits: torch.Tensor) -> torch.Tensor:
        """The mean logit difference (clean answer minus corrupted answer) over the steps that
        differ, as a 0-d tensor (differentiable: attribution takes its gradient)."""
        clean, corrupted = self._answers
        gap = logits.gather(-1, clean[..., None]) - logits.gather(-1, corrupted[..., None])  # (B, T, 1)
        return gap[..., 0][self._steps].mean()

    def difference(self, logits: torch.Tensor) -> float:
        """The mean logit difference (clean answer minus corrupted answer) over the steps."""
        return float(self.difference_tensor(logits))

    def fraction(self, difference: float) -> float:
        """A logit difference as the recovered fraction: 0 the corrupted run, 1 the clean one."""
        return (difference - self.corrupted_difference) / (self.clean_difference - self.corrupted_difference)

    def clean_values(self, site: Head | Stream | HeadInput) -> torch.Tensor:
        """What `site` computed (or read) in the clean run: (B, T, d_k) for a head, (B, T, d) for
        a stream or a head's input."""
        return self.values(site, self.recording)

    @property
    def corrupted_recording(self) -> Recording:
        """Everything the corrupted run computed and read (recorded when first asked for)."""
        if self._corrupted_recording is None:
            self._corrupted_recording = Recording(inputs=True)
            self.run("corrupted", Interventions(record=self._corrupted_recording))
        return self._corrupted_recording

    def corrupted_values(self, site: Head | Stream | HeadInput) -> torch.Tensor:
        return self.values(site, self.corrupted_recording)

    @staticmethod
    def values(site: Head | Stream | HeadInput, recording: Recording) -> torch.Tensor:
        if isinstance(site, Head):
            return recording.head_outputs(site.kind, site.layer)[:, site.head]
        if isinstance(site, HeadInput):
            return recording.head_input(site)
        return recording.stream(site.stack, site.layer)

    def patches(self, sites, positions: tuple[int, ...] | None = None) -> Interventions:
        """Interventions copying `sites` from the clean run at `positions` (None: all)."""
        return Interventions(patches=tuple(Patch(s, self.clean_values(s), positions) for s in sites))

    def recovered(self, interventions: Interventions) -> float:
        """The recovered fraction of the corrupted run under `interventions`."""
        return self.fraction(self.difference(self.run("corrupted", interventions)))


def streams_of(model: Seq2Seq) -> list[Stream]:
    return [Stream("enc", i) for i in range(len(model.encoder))] + \
        [Stream("dec", i) for i in range(len(model.decoder))]


def patching_sweep(model: Seq2Seq, task, clean: list[int], corrupted: list[int],
                   progress: Callable[[int, int], None] | None = None) -> PatchingResult:
    """Every head alone (all positions), and every residual stream at each position and at all."""
    return sweep(Patcher(model, task, clean, corrupted), progress)


def input_sites(model: Seq2Seq) -> list[HeadInput]:
    """What each cross-attention head reads: its K/V input, its Q input."""
    return [HeadInput(h, side) for h in all_heads(model, ("cross",)) for side in SIDES]


def sweep(patcher: Patcher, progress: Callable[[int, int], None] | None = None) -> PatchingResult:
    """patching_sweep on a Patcher made any way (a drawn pair: core/interp/pairs.py); positions
    are those of the longest pair. Also each cross-attention head's two inputs, one at a time."""
    model = patcher.model
    heads, streams, inputs = all_heads(model), streams_of(model), input_sites(model)
    lengths = {"enc": patcher.batch.clean.shape[1], "dec": patcher.batch.clean_answer.shape[1]}
    total = len(heads) + sum(lengths[s.stack] + 1 for s in streams) + len(inputs)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    result = patcher.runs()
    for head in heads:
        result.heads[str(head)] = patcher.recovered(patcher.patches([head]))
        tick()
    for stream in streams:
        fractions = []
        for position in range(lengths[stream.stack]):
            fractions.append(patcher.recovered(patcher.patches([stream], (position,))))
            tick()
        result.streams[str(stream)] = fractions
        result.stream_all[str(stream)] = patcher.recovered(patcher.patches([stream]))
        tick()
    for site in inputs:
        result.inputs[str(site)] = patcher.recovered(patcher.patches([site]))
        tick()
    return result
