"""Watching a fine-tune: what the Trainer measures at each evaluation of a run that started from
a model (`minitx train --init`), beside its held-out scores, into the run's history
(core/history.py's Watched):

- probes: each probe source's greedy output, the words that differ from the base model's output
  for it, and the cross-attention (every layer and head) paid while writing it; the probes are
  `--probe` texts, or the first DEFAULT_PROBES held-out sources;
- forgetting (core/training/forgetting.py): the general-domain loss on `--general` pairs and
  the mean KL of the model's next-token distributions from the base's on them, with the alarm;
  without general pairs, the KL on the probes (teacher-forced on the base's outputs) stands in;
- numerics (core/interp/numerics.py): each sublayer's largest |activation| (its headroom to
  fp16 and bf16) and each layer's gradient norm, from one forward and backward pass on the first
  NUMERICS_PAIRS held-out pairs (no more than a step's batch: watching never holds more
  activations than training does), the run's own gradients left as they were;
- a LoRA fine-tune's update sizes: each adapted layer's ||scale B A|| / ||W|| (core/model/lora.py).

The base model is the one the fine-tune started from; its outputs are measured once, and so,
without general pairs, are its next-token distributions on the probes (what the KL compares
with), so the Watcher keeps no base model: a fine-tune holds one model's weights, not two
(docs/performance.md). With general pairs the base is held as it was loaded (copied only where
its tensors are the model's own or on another device), measured at every evaluation. A LoRA
fine-tune's base is the model itself with its adapters off (core/model/lora.py): no copy.
"""

from __future__ import annotations

import copy
import difflib
from contextlib import nullcontext

import torch

from minitx.core.data.batch import Batch, padded
from minitx.core.data.pair_files import BY_NAME, Columns
from minitx.core.data.task import Task
from minitx.core.history import History, ProbeRecord
from minitx.core.interp.alignment import cross_attention
from minitx.core.interp.decode import cut_after_end, greedy_decode
from minitx.core.interp.numerics import measure_numerics
from minitx.core.model import lora
from minitx.core.model.transformer import Seq2Seq
from minitx.core.training.fine_tune import general_pairs
from minitx.core.training.forgetting import (
    FORGET_ALARM,
    Forgetting,
    base_log_probs,
    check_forget_alarm,
    general_loss,
    general_loss_and_kl,
    kl_to_base,
)

DEFAULT_PROBES = 3  # held-out sources watched when no --probe is given
NUMERICS_PAIRS = 16  # held-out pairs of the numerics' forward and backward pass
GENERAL_BATCH = 64  # general pairs measured at once


def changed_words(output: str, base_output: str) -> list[int]:
    """Indices of output.split() words that are not part of the longest matching blocks with the
    base's words (difflib's alignment): the words a fine-tune changed."""
    mine, theirs = output.split(), base_output.split()
    same: set[int] = set()
    for block in difflib.SequenceMatcher(a=theirs, b=mine, autojunk=False).get_matching_blocks():
        same.update(range(block.b, block.b + block.size))
    return [i for i in range(len(mine)) if i not in same]


def marked(output: str, changed: list[int]) -> str:
    """The output with each changed word in brackets: 'das [Haus] ist klein'."""
    words = output.split()
    return " ".join(f"[{w}]" if i in changed else w for i, w in enumerate(words))


def probe_sources(task: Task, texts: tuple[str, ...], positions: int) -> list[list[int]]:
    """The probes as fed ids: each text read by the task's tokeniser (ValueError naming it when it
    cannot be read or is longer than the model's positions), or the first held-out sources."""
    if texts:
        sources = []
        for text in texts:
            try:
                sources.append(task.parse(text, positions - 2))  # room for a wrapped source's ends
            except ValueError as e:
                raise ValueError(f"probes: {text[:40]!r}: {e}") from None
        return sources
    held = task.pairs_batch(task.heldout, torch.arange(min(DEFAULT_PROBES, len(task.heldout))))
    pad = task.src_vocab.pad
    return [row[row != pad].tolist() for row in held.src]


def read_probes(model: Seq2Seq, task: Task, sources: list[list[int]]) -> list[tuple[list[int], torch.Tensor]]:
    """Each source's greedy output (up to its end token) and the cross-attention paid while
    writing it, (layers, heads, len(output), len(source)): all probes in one batch."""
    src = padded(sources, task.src_vocab.pad).to(model.device)  # (P, S)
    cap = max(task.decode_cap(len(s), model.cfg.max_len) for s in sources)
    generated = greedy_decode(model, src, max_new_tokens=cap).tolist()  # (P, n)
    outputs = [cut_after_end(row, model.generation.eos) or row[:1] for row in generated]
    start = model.generation.start
    # each output teacher-forced after the start token: the attention paid while writing it
    written = Batch(src, padded([[start, *out] for out in outputs], model.cfg.pad_id).to(model.device),
                    torch.tensor([len(s) for s in sources]))  # tgt (P, T + 1)
    with torch.inference_mode():
        cross = torch.stack(cross_attention(model, written), dim=1).float().cpu()  # (P, L, h, T, S)
    return [(out, cross[i, :, :, : len(out), : len(sources[i])].clone()) for i, out in enumerate(outputs)]


def shares_tensors(a: Seq2Seq, b: Seq2Seq) -> bool:
    """Whether any parameter of `a` is stored where one of `b`'s trained ones is (then training b
    changes a; a frozen tensor both hold stays as it is)."""
    mine = {p.data_ptr() for p in b.parameters() if p.requires_grad}
    return any(p.data_ptr() in mine for p in a.parameters())


class Watcher:
    """A fine-tune's watching; `watch(step)` measures the model as it is now into its history.
    `base`: the model the fine-tune started from, never trained (its gradients are not computed:
    it is only run in inference mode); kept only for general pairs."""

    def __init__(self, model: Seq2Seq, base: Seq2Seq, task: Task, probes: tuple[str, ...] = (),
                 general: list[Batch] | None = None, alarm_rise: float = FORGET_ALARM,
                 numerics_pairs: int = NUMERICS_PAIRS) -> None:
        self.model, self.task = model, task
        self.base_view = nullcontext  # what the base is run under (a LoRA's: its adapters off)
        if base is model:
            self.base_view = lambda: lora.adapters_off(model)
        self.sources = probe_sources(task, probes, model.cfg.max_len)
        self.general = general or []
        self.alarm_rise = check_forget_alarm(alarm_rise)
        held = task.pairs_batch(task.heldout, torch.arange(min(numerics_pairs, len(task.heldout))))
        self.numerics_batch = held
        with self.base_view():
            self.base_outputs = [out for out, _ in read_probes(base, task, self.sources)]
        # the probes teacher-forced on the base's outputs: the KL's stand-in without general pairs
        start = base.generation.start
        self._probe_kl_batch = Batch(src=padded(self.sources, task.src_vocab.pad),
                                     tgt=padded([[start, *o] for o in self.base_outputs], model.cfg.pad_id),
                                     lengths=torch.tensor([len(s) for s in self.sources]))
        # the base itself where it costs no copy (a LoRA's) or general pairs measure it at each
        # evaluation; else its (P, T, V) log-probabilities on the probes, measured once
        self.base: Seq2Seq | None = None
        self._base_on_probes: list[torch.Tensor] | None = None
        if base is model:
            self.base = model
        elif self.general:
            self.base = base if base.device == model.device and not shares_tensors(base, model) \
                else copy.deepcopy(base).to(model.device)  # a copy only where the base moves as training does
        else:
            self._base_on_probes = [t.to(model.device) for t in base_log_probs(base, [self._probe_kl_batch])]
        self.forgetting: Forgetting | None = None  # with general pairs: set at the first watch

    def resume_from(self, history: History) -> None:
        """Continue a resumed run's forgetting record from its history (the base's general loss
        is the first watched evaluation's, at step 0)."""
        w = history.watched
        if self.general and w is not None and w.general_loss and w.steps[0] == 0:
            self.forgetting = Forgetting(w.general_loss[0], self.alarm_rise)
            for step, loss, kl in zip(w.steps[1:], w.general_loss[1:], w.kl_to_base[1:]):
                self.forgetting.record(step, loss, kl)

    def watch(self, step: int, history: History) -> bool:
        """Measure the model at `step` into `history`; True when the forgetting alarm goes off here."""
        loss = None
        if self.general:
            loss, kl = general_loss_and_kl(self.model, self.base, self.general, self.base_view)
        else:
            kl = kl_to_base(self.model, self._base_on_probes if self.base is None else self.base,
                            [self._probe_kl_batch], self.base_view)
        alarm = False
        if loss is not None:
            if self.forgetting is None:  # at step 0 the model is its base
                with self.base_view():
                    base_loss = loss if step == 0 else general_loss(self.base, self.general)[0]
                self.forgetting = Forgetting(base_loss, self.alarm_rise)
            alarm = self.forgetting.record(step, loss, kl)
        batch = self.numerics_batch
        device = self.model.device
        numerics = measure_numerics(self.model, batch.src.to(device), batch.decoder_input.to(device),
                                    batch.labels.to(device))
        records = []
        read = read_probes(self.model, self.task, self.sources)
        for i, ((out, attention), base_out) in enumerate(zip(read, self.base_outputs)):
            text, base_text = self.task.format(out), self.task.format(base_out)
            records.append(ProbeRecord(step, i, self.task.format_source(self.sources[i]), text, base_text,
                                       changed_words(text, base_text),
                                       self.task.source_labels(self.sources[i]), self.task.vocab.labels(out),
                                       attention))
        history.record_watch(step, kl, loss, "general" if self.general else "probes",
                             [(a.stack, a.layer, a.sublayer, a.max) for a in numerics.activations],
                             [(g.stack, g.layer, g.norm) for g in numerics.gradients], records,
                             lora.update_sizes(self.model))
        return alarm

    def forgetting_dict(self, history: History) -> dict:
        """`train --json`'s forgetting object: general_loss_base, general_loss_end, kl_to_base_end,
        alarm, alarm_step, and kl_on (what the KL was measured on; without general pairs the
        probes, and no loss)."""
        if self.forgetting is not None:
            return {**self.forgetting.to_dict(), "kl_on": "general"}
        w = history.watched
        return {"general_loss_base": None, "general_loss_end": None,
                "kl_to_base_end": w.kl_to_base[-1] if w is not None and w.kl_to_base else None,
                "alarm": False, "alarm_step": None, "kl_on": "probes"}


def watcher_for(model: Seq2Seq, base: Seq2Seq, task: Task, probes: tuple[str, ...], general: str,
                alarm_rise: float, max_length: int, general_size: int, columns: Columns = BY_NAME,
                batch_size: int = NUMERICS_PAIRS) -> Watcher:
    """A run's Watcher from its settings: `general` a file of pairs (at most `general_size` of
    them measured), read as the fine-tune's own pairs are (DataError naming the file); the
    numerics on at most `batch_size` pairs, the run's."""
    batches = None
    if general:
        pairs = general_pairs(general, task, model.cfg.max_len, max_length, general_size, columns)
        batches = [task.pairs_batch(pairs, torch.arange(start, min(len(pairs), start + GENERAL_BATCH)))
                   for start in range(0, len(pairs), GENERAL_BATCH)]
    return Watcher(model, base, task, probes, batches, alarm_rise, min(NUMERICS_PAIRS, batch_size))


def last_probes(history: History) -> list[ProbeRecord]:
    """The probes' records of the latest watched evaluation."""
    w = history.watched
    if w is None or not w.probes:
        return []
    last = w.probes[-1].step
    return [r for r in w.probes if r.step == last]
