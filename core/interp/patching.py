"""Activation patching: which activations carry what makes a model's answer right?

Run a clean source and a corrupted one of the same length, copy one activation (a head's output,
or the residual stream leaving a layer, at one or all positions) from the clean run into the
corrupted one, and measure how much of the clean answer comes back.

All runs are teacher-forced on the clean source's correct output, so they differ only in the
source. Where the task cannot tell the correct outputs (dates, a data file, an imported model:
typed text has no known answer), the model's own greedy outputs for the two sources are the
answers: patching then asks which activations carry what makes the model answer as it does.

The metric is the logit difference LD = logit(clean answer) - logit(corrupted answer),
averaged over the steps where the two answers differ; the recovered fraction of a patch is
(LD_patched - LD_corrupted) / (LD_clean - LD_corrupted): 0 is the corrupted run, 1 the clean one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from minitx.core.interp.decode import greedy_decode
from minitx.core.interp.interventions import Head, Interventions, Patch, Recording, Stream, all_heads
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
    heads: dict[str, float] = field(default_factory=dict)  # "cross:L2.H1" -> fraction, all positions
    streams: dict[str, list[float]] = field(default_factory=dict)  # "enc:L1.resid" -> per position
    stream_all: dict[str, float] = field(default_factory=dict)  # "enc:L1.resid" -> all positions
    answers: str = "task"  # whose the answers are: "task", or "model" (its greedy outputs)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Patcher:
    """The clean and corrupted runs of one pair of sources, kept so any patch is one forward."""

    @torch.no_grad()
    def __init__(self, model: Seq2Seq, task, clean: list[int], corrupted: list[int]) -> None:
        if len(clean) != len(corrupted):
            raise ValueError(f"the clean and corrupted sources must have the same length "
                             f"(positions are patched one to one), not {len(clean)} and {len(corrupted)}")
        self.model, self.clean, self.corrupted = model, list(clean), list(corrupted)
        answers = [task.expected_output(ids) for ids in (self.clean, self.corrupted)]
        self.answers = "task"
        if None in answers:  # dates, a data file, an imported model: the model's own outputs
            answers, self.answers = [self._greedy(task, ids) for ids in (self.clean, self.corrupted)], "model"
        self.clean_answer, self.corrupted_answer = (a + [model.cfg.eos_id] for a in answers)
        self.steps = [t for t, (a, b) in enumerate(zip(self.clean_answer, self.corrupted_answer)) if a != b]
        if not self.steps:
            raise ValueError("the clean and corrupted sources have the same answer: "
                             "there is no difference to recover")
        device = model.device
        self._src = {name: torch.tensor([ids], device=device)
                     for name, ids in (("clean", self.clean), ("corrupted", self.corrupted))}
        self._decoder_input = torch.tensor([[model.cfg.sos_id] + self.clean_answer[:-1]],
                                           device=device)  # (1, T)
        self.recording = Recording()
        self.clean_logits = self.run("clean", Interventions(record=self.recording))  # (T, V)
        self.corrupted_logits = self.run("corrupted")
        self.clean_difference = self.difference(self.clean_logits)
        self.corrupted_difference = self.difference(self.corrupted_logits)
        if abs(self.clean_difference - self.corrupted_difference) < 1e-6:
            raise ValueError("the clean and corrupted runs give the same logit difference: "
                             "this model does not tell the two answers apart")

    def _greedy(self, task, src_ids: list[int]) -> list[int]:
        """The model's greedy output for a source, without EOS (cut at the task's budget)."""
        src = torch.tensor([src_ids], device=self.model.device)
        cap = task.decode_cap(len(src_ids), self.model.cfg.max_len)
        out = greedy_decode(self.model, src, max_new_tokens=cap)[0].tolist()
        eos = self.model.cfg.eos_id
        return out[: out.index(eos)] if eos in out else out[: cap - 1]

    def run(self, source: str, interventions: Interventions | None = None) -> torch.Tensor:
        """Logits (T, V) of the clean or corrupted source under `interventions`."""
        with eval_mode(self.model), torch.no_grad(), (interventions or Interventions()).applied(self.model):
            return self.model(self._src[source], self._decoder_input)[0]

    def difference(self, logits: torch.Tensor) -> float:
        """The mean logit difference (clean answer minus corrupted answer) over the steps."""
        steps = torch.tensor(self.steps)
        clean = torch.tensor(self.clean_answer)[steps]
        corrupted = torch.tensor(self.corrupted_answer)[steps]
        rows = logits.cpu()[steps]  # (n, V)
        return float((rows.gather(1, clean[:, None]) - rows.gather(1, corrupted[:, None])).mean())

    def clean_values(self, site: Head | Stream) -> torch.Tensor:
        """What `site` computed in the clean run: (1, T, d_k) for a head, (1, T, d) for a stream."""
        if isinstance(site, Head):
            return self.recording.head_outputs(site.kind, site.layer)[:, site.head]
        return self.recording.stream(site.stack, site.layer)

    def patches(self, sites, positions: tuple[int, ...] | None = None) -> Interventions:
        """Interventions copying `sites` from the clean run at `positions` (None: all)."""
        return Interventions(patches=tuple(Patch(s, self.clean_values(s), positions) for s in sites))

    def recovered(self, interventions: Interventions) -> float:
        """The recovered fraction of the corrupted run under `interventions`."""
        patched = self.difference(self.run("corrupted", interventions))
        return (patched - self.corrupted_difference) / (self.clean_difference - self.corrupted_difference)


def streams_of(model: Seq2Seq) -> list[Stream]:
    return [Stream("enc", i) for i in range(len(model.encoder))] + \
        [Stream("dec", i) for i in range(len(model.decoder))]


def patching_sweep(model: Seq2Seq, task, clean: list[int], corrupted: list[int],
                   progress: Callable[[int, int], None] | None = None) -> PatchingResult:
    """Every head alone (all positions), and every residual stream at each position and at all."""
    patcher = Patcher(model, task, clean, corrupted)
    heads, streams = all_heads(model), streams_of(model)
    lengths = {"enc": len(clean), "dec": len(patcher.clean_answer)}
    total = len(heads) + sum(lengths[s.stack] + 1 for s in streams)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    result = PatchingResult(patcher.clean, patcher.corrupted, patcher.clean_answer,
                            patcher.corrupted_answer, patcher.steps, patcher.clean_difference,
                            patcher.corrupted_difference, answers=patcher.answers)
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
    return result
