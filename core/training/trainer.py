"""Training: a Trainer that runs one step at a time and knows nothing about any UI.

`Trainer.run` is minitx's one training loop. Whoever watches a run (the CLI's progress and
metrics file, `--save-every`, the app's live view, the lab) plugs in a RunListener
(core/training/events.py).

Everything needed to continue a run lives in `state_tensors()` (weights, Adam moments, step,
RNG states), so stopping at step k and resuming reproduces the uninterrupted run bit for bit
on the CPU.
"""

from __future__ import annotations

import dataclasses
import json
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from minitx import __version__
from minitx.core.checkpoint import Checkpoint, CheckpointError, OpenBase, load_checkpoint, save_checkpoint
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.batch import Batch, draw_lengths
from minitx.core.data.pair_files import DataError
from minitx.core.data.pair_task import PairSampler
from minitx.core.data.task import DATA_TASK
from minitx.core.data.tasks import get_task, task_for_config
from minitx.core.history import History, snapshot_due
from minitx.core.model import lora
from minitx.core.model.loss import summed_cross_entropy
from minitx.core.model.transformer import Seq2Seq, set_training
from minitx.core.training.best import METRIC_NAMES, Best, figure, metric_value, shown, watched_metric
from minitx.core.training.bug_presets import apply_bug, bug_preset
from minitx.core.training.divergence import first_non_finite_layer
from minitx.core.training.evaluation import evaluate, score
from minitx.core.training.events import RunListener
from minitx.core.training.fine_tune import base_record, fine_tune_task, train_as_family
from minitx.core.training.guided_alignment import Guide, guided_row_losses, head_weights, linked_rows
from minitx.core.training.memory_estimate import MemoryEstimate, check_fine_tune
from minitx.core.training.optim import make_optimizer
from minitx.core.training.probe import probe, probe_example
from minitx.core.training.processes import Processes, shard
from minitx.core.training.results import EvalResult, StepStats
from minitx.core.training.resume import (
    check_optim_state,
    check_same_data,
    restart_from,
    resumed_config,
    same_step_pairs,
)
from minitx.core.training.watching import watcher_for

EARLY_STOP_BATCH = 100  # sequences per batch of an evaluation that may stop early (--until)
FINE_TUNE_EVAL_BATCH = 64  # held-out pairs decoded at once by a fine-tune's evaluation
HELD_OUT_SEED_OFFSET = 1_000_003  # plus the run's seed: held-out sequences, apart from the training stream


def scores_of(result: EvalResult) -> dict:
    """A fine-tune's evaluation as plain numbers: exact match, loss per target token, BLEU, chrF."""
    text = result.text
    return {"accuracy": result.accuracy, "loss": result.loss, "bleu": text.bleu if text else None,
            "chrf": text.chrf if text else None, "n": result.n,
            **({"bleu_signature": text.bleu_signature, "chrf_signature": text.chrf_signature}
               if text else {})}


class TrainingDiverged(RuntimeError):
    """The loss or gradient became NaN/inf; the model keeps its last good weights."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda was asked for but no CUDA GPU is available")
    return torch.device(name)



def planned_run(model_cfg: ModelConfig, train_cfg: TrainConfig):
    """(ModelConfig, TrainConfig, Task) a run of these configs trains with, nothing built yet: the
    bug preset's effects and the task's vocabulary applied, the task made (a data file read: a
    DataError, one line, for a bad file; ValueError for configs that do not go together). The app
    checks a form with it before it offers to drop the last run."""
    model_cfg, train_cfg = apply_bug(model_cfg, train_cfg)
    task = task_for_config(train_cfg, model_cfg.max_len)  # reads a data file, if any
    # The vocabulary is the task's: a data file's decides the model's size and special ids.
    model_cfg = model_cfg.replace(**task.model_fields())
    bug = bug_preset(train_cfg.bug)
    if bug.data_task and task.vocab != get_task(bug.data_task).vocab:
        raise ValueError(f"bug: {train_cfg.bug} changes the digit tasks' data, not {task.name}'s")
    return model_cfg, train_cfg, task


def planned_fine_tune(base: Checkpoint, model_cfg: ModelConfig, train_cfg: TrainConfig):
    """(ModelConfig, TrainConfig, Task) of a fine-tune of `base` (train_cfg.init): the base's
    network (its dropout may differ: how it trains), and the data file's pairs in its
    vocabularies (a DataError, one line, for a bad file)."""
    if model_cfg.replace(dropout=base.model_config.dropout) != base.model_config:
        theirs, mine = base.model_config.to_dict(), model_cfg.to_dict()
        changed = next((k for k in sorted(set(theirs) | set(mine)) if theirs.get(k) != mine.get(k)), "")
        raise ValueError(f"{changed or 'init'}: a fine-tune keeps its base's architecture "
                         f"({train_cfg.init}'s {changed} is {theirs.get(changed)!r})")
    task = fine_tune_task(base.task, train_cfg.data, train_cfg.valid, train_cfg.seed, model_cfg.max_len,
                          train_cfg.max_length, train_cfg.columns)
    return model_cfg, train_cfg, task


class Trainer:
    def __init__(self, model_cfg: ModelConfig | None = None, train_cfg: TrainConfig | None = None,
                 base: Checkpoint | None = None, processes: Processes | None = None,
                 base_info: dict | None = None, watch_base: Seq2Seq | None = None,
                 check_memory: bool = False, base_given: bool = False):
        """A run of these configs. A fine-tune (train_cfg.init) starts from `base`, a loaded
        model (its weights, generation settings and task's vocabularies); `base_info` is what
        the file says of the base (computed from `base` when not given: a new fine-tune).
        `processes`: the torchrun group (default: joined from the environment, or this process
        alone). A fine-tune is watched (core/training/watching.py) against the model it started
        from: `base`'s for a new one, `watch_base` for a resumed one (none given: not watched).
        check_memory: a fine-tune's estimated peak is checked against the machine before anything
        is built (WontFit, one line, core/training/memory_estimate.py). base_given: the caller
        gives `base` up to the run (the command line, a resumed file; the app keeps its own): a
        LoRA takes its tensors and leaves `base.model` empty (on the meta device), so under bf16
        each float32 matrix is freed as its bf16 copy is made, rather than after the run is built."""
        if train_cfg is not None and train_cfg.init:
            if base is None:
                raise ValueError(f"init: a fine-tune needs its base model loaded ({train_cfg.init})")
            model_cfg, train_cfg, self.task = planned_fine_tune(base, model_cfg or base.model_config,
                                                                train_cfg)
            self.base_info = base_info or base_record(train_cfg.init, base.model, base.task)
        else:
            model_cfg, train_cfg, self.task = planned_run(model_cfg or ModelConfig(),
                                                          train_cfg or TrainConfig())
            self.base_info = None
        self.model_cfg, self.cfg = model_cfg, train_cfg
        self.device = resolve_device(train_cfg.device)
        self.processes = processes or Processes.from_environment(self.device)
        self.memory: MemoryEstimate | None = None  # a checked fine-tune's estimated peak
        if train_cfg.init and check_memory:  # before anything is built
            self.memory = check_fine_tune(model_cfg, train_cfg, self.task, self.device,
                                          base_kept=not base_given)
        if self.device.type == "cuda" and self.processes.distributed:
            self.device = torch.device("cuda", self.processes.local_rank)  # one GPU a process
        # Every process draws each step's pairs (all processes' together) from the same seeded
        # stream and trains on its shard, in `accumulate` micro-batches (processes.py).
        self.step_rows = train_cfg.step_pairs * self.processes.world
        self._parts = self.processes.world * train_cfg.accumulate  # micro-batches of a step, all processes'
        shard(self.step_rows, self.processes, train_cfg.accumulate)  # ValueError: more parts than pairs
        if self.task.train is not None and len(self.task.train) < self._parts:
            processes = "1 process" if self.processes.world == 1 else f"{self.processes.world} processes"
            raise ValueError(f"batch_size: {len(self.task.train)} training pairs cannot be shared by "
                             f"{processes} x {train_cfg.accumulate} micro-batches")
        # A bug preset may feed the model other data (copies for no-reverse, while the task
        # still says reverse) or feed it differently (no-shift); chosen here, once.
        bug = bug_preset(train_cfg.bug)
        self._data_task = get_task(bug.data_task, train_cfg.min_source_len, train_cfg.max_source_len) \
            if bug.data_task else self.task
        self._feed = bug.feed
        torch.manual_seed(train_cfg.seed)  # weight init and dropout draw from the global RNG
        self.lora = lora.LoraSpec.of(train_cfg)
        base_taken = base is not None and base_given and self.lora is not None  # the run's alone
        if base is not None:  # a fine-tune: the base's weights and how it generates
            with torch.device("meta"):  # no random weights drawn first: a model's worth of memory
                self.model = Seq2Seq(model_cfg)
            # the base's own tensors; the optimiser takes what it trains into its own buffers
            self.model.load_own_state_dict(base.model.own_state_dict(), assign=True)
            self.model = self.model.to(self.device)
            self.model.generation = base.model.generation
            train_as_family(self.model, self.task)
            if base_taken:  # the run's tensors are the base's only ones now
                base.model.to("meta")
        else:
            self.model = Seq2Seq(model_cfg).to(self.device)
        self.model.checkpoint_layers = train_cfg.gradient_checkpointing
        # LoRA (core/model/lora.py): the base frozen, peft's adapters the only weights trained
        # (made in float32 on the float32 base); under bf16 the frozen base's matrices held in
        # bf16, half their memory (every pass of the run is under autocast): a given base's
        # float32 matrices are freed one by one as they are converted
        if self.lora is not None:
            lora.add_adapters(self.model, self.lora)
            if train_cfg.precision == "bf16":
                lora.hold_base_in(self.model, torch.bfloat16)
        # Adam: torch's fused kernel over one flat buffer of all parameters, without torch.optim's
        # first-call import of torch._dynamo (core/training/optim.py); or Adafactor
        self.optimizer = make_optimizer(self.trainable(), train_cfg, self.model)
        if base is not None and not base_taken:
            self._own_tensors(base.model)
        # torch.distributed's data parallel: gradients averaged over the processes in backward
        self._ddp = torch.nn.parallel.DistributedDataParallel(
            self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None) \
            if self.processes.distributed else None
        self.data_generator = torch.Generator().manual_seed(train_cfg.seed)
        # Guided alignment (--guided-head): a head, the training pairs' links and held-out gold
        self.guide = Guide.for_run(train_cfg, self.task, model_cfg) if train_cfg.guided_head else None
        self.last_guided_loss: float | None = None  # the last step's guided loss (before its weight)
        self._sampler = None  # shuffled epochs over a data file's training pairs
        if self.task.train is not None:
            make_batch = self.task.pairs_batch if self.guide is None else \
                self.guide.links.batches(self.task.pairs_batch)  # batches carry their pairs' links
            self._sampler = PairSampler(self.task.train, self.step_rows, self.data_generator,
                                        train_cfg.bucket_lengths, self.task.vocab, make_batch,
                                        min_rows=self._parts)
        self.step_count = 0
        self.seconds = 0.0
        self.seconds_at_start = 0.0  # what a resumed run had already trained
        self.last_loss: float | None = None
        self.last_accuracy: float | None = None
        self.accuracy_step: int | None = None  # the step whose weights last_accuracy measured in full
        self.history = History()  # every step and evaluation, and probe snapshots
        self.probe_batch = probe_example(self.task, train_cfg.probe_source)  # a batch of one
        self.probe_ids = self.probe_batch.src[0, : int(self.probe_batch.lengths[0])].tolist()
        self.until_reached_at: int | None = None  # the step whose evaluation met cfg.until
        self.eval_seconds = 0.0  # spent in this run's evaluations (not part of `seconds`)
        self.lr_restart: tuple[int, float] | None = None  # see TrainConfig.lr_at
        self.schedule_from = 0  # a new schedule's first step after this one (see TrainConfig.lr_at)
        self.schedule_ended = False  # resumed after the schedule it was planned with had ended
        self.listeners: tuple[RunListener, ...] = ()  # of the run in progress (see run())
        self.run_seconds = 0.0  # wall time of this process's runs: steps, evaluations, snapshots
        self.run_steps = 0  # steps this process's runs took
        origin = base.model if base is not None and base_info is None else watch_base
        if self.lora is not None:  # the base is this model with its adapters off: no second copy
            origin = self.model
        self.watcher = None
        if train_cfg.init and train_cfg.watch and origin is not None and self.processes.main:
            with self.precision():  # the base's outputs are read as the run computes
                self.watcher = watcher_for(self.model, origin, self.task, train_cfg.probes, train_cfg.general,
                                           train_cfg.forget_alarm, train_cfg.max_length, train_cfg.eval_size,
                                           train_cfg.columns, train_cfg.batch_size)
        self.base_scores: dict | None = None  # a fine-tune's held-out scores of its base (step 0)
        self.last_scores: dict | None = None  # ... and of its latest evaluation
        # --keep-best and --patience (core/training/best.py): the best evaluation so far; the
        # caller says where its weights go (best_path: None keeps none, e.g. another process)
        self.best = Best(watched_metric(train_cfg.keep_best, self.scored)) \
            if train_cfg.keep_best or train_cfg.patience else None
        self.best_path: Path | None = None
        self.best_saved: tuple[int, Path] | None = None  # (step, file) of the weights kept last
        self.stopped_early_at: int | None = None  # the evaluation --patience stopped the run at

    def _own_tensors(self, base: Seq2Seq) -> None:
        """A copy of each tensor the model still shares with `base` (it took the base's tensors,
        and the optimiser moved what it trains into its own buffers): training never changes the
        base a caller holds (Adafactor keeps no buffer of weights), and the base is freed once the
        caller lets it go. Not a LoRA's in float32: its frozen base is the loaded tensors
        themselves."""
        if self.lora is not None and self.cfg.precision == "fp32":
            return
        stored = {t.data_ptr() for t in (*base.parameters(), *base.buffers())}
        for t in (*self.model.parameters(), *self.model.buffers()):
            if t.data_ptr() in stored:
                t.data = t.data.clone()

    def trainable(self) -> list[torch.nn.Parameter]:
        """The parameters the optimiser changes (a fine-tune keeps some as its family does)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    @property
    def done(self) -> bool:
        return self.step_count >= self.cfg.steps or self.until_reached_at is not None \
            or self.stopped_early_at is not None

    @property
    def scored(self) -> bool:
        """Whether the evaluations decode the held-out pairs: loss, BLEU and chrF (a fine-tune's
        always, a run from scratch's with --eval-bleu)."""
        return bool(self.cfg.init or self.cfg.eval_bleu)

    @property
    def seconds_this_run(self) -> float:
        return self.seconds - self.seconds_at_start

    @property
    def heldout_seed(self) -> int:
        """The seed of the run's held-out evaluations (fresh sequences never trained on)."""
        return self.cfg.seed + HELD_OUT_SEED_OFFSET

    @property
    def steps_per_s(self) -> float:
        """Steps a wall-clock second of this process's runs, evaluations and snapshots included
        (pauses not): what the remaining steps will take."""
        return self.run_steps / self.run_seconds if self.run_seconds > 0 else 0.0

    def lr_for(self, step: int) -> float:
        """The learning rate of 1-based `step` of this run (its schedule, restarts included)."""
        return self.cfg.lr_at(step, self.lr_restart, self.schedule_from)

    def next_batch(self) -> Batch:
        """The next step's pairs, every process's micro-batches together (step_rows of them)."""
        if self._sampler is not None:
            return self._sampler.next_batch()
        power = self.cfg.length_power
        if self.cfg.bucket_lengths and self._data_task.exact_lengths:
            lo, hi = self.cfg.min_source_len, self.cfg.max_source_len
            length = int(draw_lengths(1, lo, hi, self.data_generator, power))
            return self._data_task.batch(self.step_rows, self.data_generator, length, length)
        return self._data_task.batch(self.step_rows, self.data_generator, length_power=power)

    def train_step(self) -> StepStats:
        """One optimiser step on a fresh batch. Raises TrainingDiverged before applying a
        non-finite update, so the weights stay at the last good state."""
        if self.step_count == 0 and not self.history.snapshot_steps:
            self.snapshot()  # the untrained model's attention starts the timeline
        if self.cfg.init and self.step_count == 0 and self.base_scores is None:
            result = self.evaluate(self.cfg.eval_size, self.heldout_seed)  # the base: where it starts
            self.base_scores = self.last_scores
            self._record_scores(result)
            self._judge(result)
            self.watch()
            for listener in self.listeners:
                listener.on_base_evaluation(self, result)
        if self.guide is not None and self.step_count == 0 and not self.history.aer_steps:
            self.record_aer()  # the head before it is taught: what guiding it starts from
        start = time.perf_counter()
        step = self.step_count + 1
        lr = self.lr_for(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        batch = self.next_batch()
        src, decoder_input, labels = self._feed(batch)  # (R, S), (R, T), (R, T) on the CPU
        tokens = int((labels != self.model_cfg.pad_id).sum())  # counted before the copy: no device sync
        src, decoder_input, labels = (t.to(self.device, non_blocking=True)
                                      for t in (src, decoder_input, labels))
        if not self.model.training:  # only when something switched it (an app's decode, say)
            set_training(self.model, True)
        micro = shard(len(src), self.processes, self.cfg.accumulate)
        links = batch.alignment if self.guide is not None else None  # (R, T, S): guided alignment's
        loss = self._accumulated_loss(src, decoder_input, labels, micro, tokens, links)
        grad_norm = self.optimizer.clip_grad_norm(self.cfg.clip_grad_norm)  # over one flat buffer
        loss_value, norm_value = float(loss), float(grad_norm)
        if not (torch.isfinite(loss) and torch.isfinite(grad_norm)):
            layer = next(filter(None, (first_non_finite_layer(self.model, src[rows], decoder_input[rows])
                                       for rows in micro)), None)
            where = f"first non-finite in {layer}" if layer else \
                "the forward pass finite, the gradient not"
            self.optimizer.zero_grad()
            raise TrainingDiverged(
                f"training diverged at step {step}: loss {loss_value:.4g}, grad norm "
                f"{norm_value:.4g}, {where} (try a lower learning rate); the last good weights are kept"
            )
        self.optimizer.step()
        elapsed = time.perf_counter() - start
        self.step_count = step
        self.seconds += elapsed
        self.last_loss = loss_value
        stats = StepStats(step, loss_value, norm_value, lr, self.step_rows / elapsed, self.seconds)
        self.history.record_step(step, loss_value, lr, norm_value, stats.examples_per_s, self.seconds)
        if self.cfg.eval_every and (step % self.cfg.eval_every == 0 or step == self.cfg.steps):
            # Before the last step, an evaluation that cannot reach --until stops early.
            result = self.evaluate(stop_below=self.cfg.until if step < self.cfg.steps else 0.0)
            stats = dataclasses.replace(stats, accuracy=result.accuracy, eval_n=result.n,
                                        eval_complete=result.complete)
            if self.cfg.until and result.accuracy >= self.cfg.until and self.until_reached_at is None:
                self.until_reached_at = step
        if snapshot_due(step, self.cfg.steps) or self.done:
            self.snapshot()
        return stats

    def _accumulated_loss(self, src: torch.Tensor, decoder_input: torch.Tensor, labels: torch.Tensor,
                          micro: list[slice], tokens: int | None = None,
                          links: torch.Tensor | None = None) -> torch.Tensor:
        """Forward and backward of this process's micro-batches of the step; the step's loss: the
        mean cross-entropy over ALL its target tokens (every process's, every micro-batch's;
        padding not), never a mean of micro-batch means. Each micro-batch's summed loss is
        divided by the step's token count, so the accumulated gradient is the full batch's.
        With `links` (R, T, S) (guided alignment) the gradient also has the guided loss's, weighted
        (core/training/guided_alignment.py); the loss returned stays the translation loss."""
        pad = self.model_cfg.pad_id
        if tokens is None:  # (R, T): the whole step's rows, so no message needed
            tokens = int((labels != pad).sum())
        per_process = tokens / self.processes.world  # DDP averages over processes: undo it
        if links is not None:  # the guided loss: a mean over the step's linked rows, all processes'
            linked = max(linked_rows(links), 1)  # counted on the CPU: no device sync
            guided_scale = self.guide.weight * self.processes.world / linked  # DDP's average undone too
            links = links.to(self.device, non_blocking=True)
            guided = torch.zeros((), device=self.device)
        model = self._ddp or self.model
        self.optimizer.zero_grad()
        total = torch.zeros((), device=self.device)
        for i, rows in enumerate(micro):
            last = i == len(micro) - 1
            with nullcontext() if last or self._ddp is None else self._ddp.no_sync():
                with nullcontext([]) if links is None else head_weights(self.model, self.guide.head) as seen:
                    with self.precision():
                        logits = model(src[rows], decoder_input[rows])  # (b, T, V)
                logits = logits.float()  # the loss in float32 whatever the forward's precision
                part = summed_cross_entropy(logits, labels[rows], pad, self.cfg.label_smoothing)
                if links is None:
                    (part / per_process).backward()
                else:
                    aligned = guided_row_losses(seen[0].float(), links[rows]).sum()  # seen[0]: (b, T, S)
                    (part / per_process + aligned * guided_scale).backward()
                    guided += aligned.detach()
            total += part.detach()
        if links is not None:
            self.last_guided_loss = float(self.processes.sum(guided)) / linked
        return self.processes.sum(total) / tokens

    def precision(self):
        """The context the run computes in (its steps' forward, evaluations, snapshots, watching):
        bfloat16 autocast for precision bf16 (matrix products in bf16; the weights the optimiser
        updates kept in float32, a LoRA's frozen base in bf16), nothing for fp32."""
        if self.cfg.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def snapshot(self) -> None:
        """Record the probe source's cross-attention (every layer and head) at this step."""
        with self.precision():
            result = probe(self.model, self.task, self.probe_batch)
        self.history.record_snapshot(self.step_count, result.src, result.target,
                                     result.cross_attention)  # (L, h, T, S)
        for listener in self.listeners:
            listener.on_snapshot(self, self.step_count)

    def evaluate(self, n: int | None = None, seed: int | None = None,
                 stop_below: float = 0.0) -> EvalResult:
        """Held-out exact match: fresh sequences (a stream separate from training data), or a
        data file's held-out pairs, teacher-forced (the same figure as greedy decoding, in one
        pass). The run's own evaluation (no n or seed given) goes into the history. With
        stop_below (a run with --until) it goes EARLY_STOP_BATCH examples at a time and stops at
        the batch that puts the target out of reach, so evaluations far from it cost little.
        A fine-tune's measures its held-out pairs by greedy decoding: exact match, loss, BLEU, chrF."""
        own = n is None and seed is None
        start = time.perf_counter()
        n, seed = n or self.cfg.eval_size, self.heldout_seed if seed is None else seed
        whose = "the base" if self.cfg.init and self.base_scores is None else f"step {self.step_count}"
        what = f"{whose} on {self.task.evaluation_count(n):,} {self.task.evaluated_on}"
        for listener in self.listeners:
            listener.on_evaluating(self, what)
        if self.scored:  # a fine-tune (or --eval-bleu): also loss per target token, BLEU and chrF (greedy)
            batches = self.task.evaluation_batches(n, seed, FINE_TUNE_EVAL_BATCH)
            with self.precision():
                result = score(self.model, self.task, batches, loss=True, text=True)
            self.last_scores = scores_of(result)
        else:
            with self.precision():
                result = evaluate(self.model, self.task, n, seed=seed,
                                  batch_size=EARLY_STOP_BATCH if stop_below else 500,
                                  teacher_forced=True, stop_below=stop_below)
        self.eval_seconds += time.perf_counter() - start
        self.last_accuracy = result.accuracy
        # an evaluation stopped early (--until out of reach) measured a few examples: no figure
        self.accuracy_step = self.step_count if result.complete else None
        if own:
            self.history.record_eval(self.step_count, result.accuracy, result.n, result.complete)
            self._record_scores(result)
            self._judge(result)
            self.record_aer()
            self.watch()
            for listener in self.listeners:
                listener.on_evaluation(self, result)
        return result

    def _record_scores(self, result: EvalResult) -> None:
        if result.text is not None and result.loss is not None:
            self.history.record_scores(self.step_count, result.loss, result.text.bleu, result.text.chrf)

    def _judge(self, result: EvalResult) -> None:
        """--keep-best and --patience: a better evaluation's weights go to best_path; N evaluations
        in a row without one stop the run (stopped_early_at)."""
        if self.best is None or not result.complete:  # a rough evaluation is never the best
            return
        value = metric_value(self.best.metric, result.accuracy, scores_of(result) if self.scored else None)
        if value is None:
            return
        if self.best.offer(self.step_count, value):
            if self.cfg.keep_best and self.best_path is not None and self.processes.main:
                self.save_best()
        elif self.cfg.patience and self.best.since >= self.cfg.patience:
            self.stopped_early_at = self.step_count

    def save_best(self) -> Path:
        """The weights as they are now (the best evaluation's) to best_path: a file to use or
        share, not to resume (the run's own file is that)."""
        best = {**self.best.to_dict(), "of": shown(self.best.metric, self.best.value)}
        summary = {**self.summary(), "best": best}
        saved = save_checkpoint(self.best_path, self.model, self.task, summary, None, {},
                                history=self.history)
        self.best_saved = (self.step_count, saved)
        return saved

    @property
    def best_file(self) -> tuple[int, Path] | None:
        """(step, file) of the best weights kept: this run's last write of them, or a resumed
        run's best_path as its earlier part wrote it (no better evaluation since)."""
        if self.best_saved is not None:
            return self.best_saved
        best, path = self.best, self.best_path
        if best is not None and best.step is not None and path is not None and path.exists():
            return best.step, path
        return None

    def stopped_early_line(self) -> str:
        """'stopped early at step 600: 3 evaluations without a better BLEU than step 400's 25.41
        (--patience 3)'."""
        best = self.best
        return (f"stopped early at step {self.stopped_early_at}: {best.since} evaluations without a better "
                f"{METRIC_NAMES[best.metric]} than step {best.step}'s {figure(best.metric, best.value)} "
                f"(--patience {self.cfg.patience})")
    def record_aer(self) -> None:
        """The guided head's AER on held-out gold at this step, into the history (a guided run's;
        its time counts as evaluation's)."""
        if self.guide is not None and self.guide.heldout is not None:  # gold held out to measure on
            start = time.perf_counter()
            self.history.record_aer(self.step_count, self.guide.heldout_aer(self.model, self.task))
            self.eval_seconds += time.perf_counter() - start

    def watch(self) -> None:
        """A fine-tune's probes, forgetting and numerics at this step, into the history (its time
        counts as evaluation's)."""
        if self.watcher is not None:
            start = time.perf_counter()
            with self.precision():
                self.watcher.watch(self.step_count, self.history)
            self.eval_seconds += time.perf_counter() - start

    def run(self, *listeners: RunListener, until_step: int | None = None) -> StepStats | None:
        """Train until cfg.steps (or `until_step`, or a listener asks to stop); returns the last
        step's stats. The listeners hear of every step, evaluation, snapshot and save meanwhile."""
        stats = None
        self.listeners = listeners
        try:
            while not self.done and (until_step is None or self.step_count < until_step):
                stop = any([listener.stop_requested(self) for listener in listeners])  # each asked
                if self.processes.any(stop, self.device):  # every process stops at the same step
                    break
                start = time.perf_counter()
                stats = self.train_step()
                self.run_seconds += time.perf_counter() - start
                self.run_steps += 1
                for listener in listeners:
                    listener.on_step(self, stats)
        finally:
            self.listeners = ()
        return stats

    def measure_weights(self) -> None:
        """Make last_accuracy the held-out exact match of the weights as they are now: the run's
        last evaluation if it measured them in full, else a new one on the run's held-out examples
        (not a point of the history's curve, which keeps its evaluation steps). What a saved file
        states is then always a figure of the weights it holds, whenever the run stopped."""
        if self.accuracy_step != self.step_count:
            self.evaluate(self.cfg.eval_size, self.heldout_seed)

    # -- saving and resuming -------------------------------------------------------------------
    def summary(self) -> dict:
        return {
            "steps": self.step_count,
            "loss": self.last_loss,
            "accuracy": self.last_accuracy,
            "seed": self.cfg.seed,
            "seconds": round(self.seconds, 3),
            **({"until_reached_at": self.until_reached_at} if self.until_reached_at else {}),
            "bug": self.cfg.bug,
            **({"base": self.base_info} if self.base_info else {}),
            **({"base_scores": self.base_scores} if self.base_scores else {}),
            **({"scores": self.last_scores} if self.last_scores and self.scored else {}),
            "minitx_version": __version__,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Everything beyond the weights that resuming needs, as plain tensors."""
        state: dict[str, torch.Tensor] = {
            "rng.torch_cpu": torch.get_rng_state(),
            "rng.data": self.data_generator.get_state(),
        }
        if self.device.type == "cuda":
            state["rng.cuda"] = torch.cuda.get_rng_state(self.device)
        if self._sampler is not None:
            state["data.epoch_rng"] = self._sampler.state()[1]
        names = {id(p): n for n, p in self.model.named_parameters()}
        for p, s in self.optimizer.state.items():
            for key, value in s.items():
                # views of the optimiser's flat buffers, not copies: a save writes them tensor by
                # tensor (core/safetensors_file.py), two moments of the model never copied at once
                state[f"optim.{names[id(p)]}.{key}"] = torch.as_tensor(value)
        return state

    def save(self, path, resumable: bool = True) -> Path:
        """Atomic save; with resumable, the file carries what resume() needs. The accuracy it
        states is measured on the weights it writes (measure_weights)."""
        self.measure_weights()
        if not self.processes.main:  # only the first process writes
            return Path(path)
        extra = {}
        if resumable:
            extra = {
                "train_config": json.dumps(self.cfg.to_dict()),
                "trainer": json.dumps({"step": self.step_count, "seconds": self.seconds,
                                       "last_loss": self.last_loss, "last_accuracy": self.last_accuracy,
                                       "lr_restart": self.lr_restart,
                                       **({"schedule_from": self.schedule_from}
                                          if self.schedule_from else {}),
                                       **({"processes": self.processes.world}
                                          if self.processes.distributed else {}),
                                       **({"base": self.base_info} if self.base_info else {}),
                                       **({"base_scores": self.base_scores} if self.base_scores else {}),
                                       **({"best": self.best.to_dict()} if self.best else {}),
                                       **({"data": self._sampler.state()[0]} if self._sampler else {})}),
            }
        saved = save_checkpoint(path, self.model, self.task, self.summary(),
                                self.state_tensors() if resumable else None, extra, history=self.history,
                                lora_file=lora.LoraFile(self.lora, self.base_info) if self.lora else None)
        for listener in self.listeners:
            listener.on_save(self, saved, resumable)
        return saved

    @classmethod
    def resume(cls, path, train_cfg: TrainConfig | None = None,
               model_cfg: ModelConfig | None = None, restart_schedule: bool = False,
               watch_base: Seq2Seq | None = None, open_base: OpenBase | None = None) -> Trainer:
        """Continue a run from a resumable checkpoint. A train_cfg (and model_cfg), if given,
        must match the saved ones except where core/training/resume.py's rule lets a run change.

        A different `steps` never raises the learning rate: a cosine run decays from the lr it had
        reached to its floor at the new `steps` (TrainConfig.lr_at's restart, docs/curves.md).
        `restart_schedule` starts a new schedule instead (warmup, then the decay to the floor at
        the new `steps`) from these weights and Adam moments: the way to train a finished run
        further (`schedule_ended` says whether it was). A fine-tune goes on being watched when
        `watch_base`, the model it started from, is given. A LoRA fine-tune's file opens its base
        through `open_base` (minitx.checkpoints.open_base) and goes on training its adapters."""
        ckpt = load_checkpoint(path, open_base=open_base, merge=False)
        saved = ckpt.train_config
        if saved is None or not ckpt.resumable:
            raise CheckpointError(f"{path} holds no training state; it cannot be resumed")
        try:
            trainer_info = json.loads(ckpt.metadata.get("trainer", "{}"))
            if not isinstance(trainer_info, dict):
                raise ValueError("'trainer' is not an object")
        except (ValueError, TypeError, RecursionError) as e:
            raise CheckpointError(f"{path} has invalid training metadata: {e}") from None
        planned_steps = saved.steps
        saved_cfg = resumed_config(path, ckpt.model_config, saved, train_cfg, model_cfg)
        if saved_cfg.task == DATA_TASK:
            check_same_data(path, ckpt.task, saved_cfg)
        processes = Processes.from_environment(resolve_device(saved_cfg.device))
        saved_cfg = same_step_pairs(path, saved, saved_cfg, trainer_info.get("processes", 1), processes.world)
        base_info = trainer_info.get("base")
        if saved_cfg.init and not isinstance(base_info, dict):
            raise CheckpointError(f"{path} is a fine-tune that does not say what its base was")
        # The saved model config already has the bug's effects applied; apply_bug is idempotent.
        # A fine-tune continues from the file itself: its weights, tokenisers and generation.
        try:
            trainer = cls(ckpt.model_config, saved_cfg, ckpt if saved_cfg.init else None, processes,
                          base_info, watch_base, base_given=True)  # the file's, opened here for the run
        except DataError:
            raise
        except ValueError as e:  # a training config that does not fit the saved model
            raise CheckpointError(f"cannot resume {path}: {e}") from None
        if trainer.task.vocab != ckpt.task.vocab or trainer.model_cfg != ckpt.model_config:
            raise CheckpointError(f"cannot resume {path}: its data no longer gives the same vocabulary")
        trainer._load_state(ckpt, trainer_info)
        trainer.schedule_ended = saved_cfg.schedule in ("cosine", "linear") \
            and trainer.step_count >= planned_steps
        if restart_schedule:
            trainer.schedule_from, trainer.lr_restart = trainer.step_count, None
        elif planned_steps != trainer.cfg.steps:
            trainer._restart_schedule(saved_cfg.replace(steps=planned_steps))
        return trainer

    def _restart_schedule(self, planned: TrainConfig) -> None:
        """A cosine (or linear) run given another `steps` after warmup: decay from the lr it was at."""
        step = self.step_count
        if self.cfg.schedule in ("cosine", "linear") and step > self.cfg.warmup + self.schedule_from:
            self.lr_restart = (step, planned.lr_at(step, self.lr_restart, self.schedule_from))

    def _load_state(self, ckpt: Checkpoint, info: dict) -> None:
        if (ckpt.lora is None) != (self.lora is None):
            raise CheckpointError(f"{ckpt.path}: its LoRA settings and its training config disagree")
        if ckpt.lora is not None:  # the base's weights are in already (from ckpt.model)
            lora.load_adapter_tensors(self.model, ckpt.lora.tensors)
        else:
            self.model.load_state_dict(ckpt.model.state_dict())
        state = ckpt.train_state
        try:
            params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
            optim_state = {}
            for key, value in state.items():
                if not key.startswith("optim."):
                    continue
                name, field_name = key[len("optim."):].rsplit(".", 1)
                optim_state.setdefault(params[name], {})[field_name] = value.to(self.device)
            step = int(info.get("step", 0))
            seconds = float(info.get("seconds", 0.0))
            if step < 0 or not seconds >= 0:
                raise ValueError(f"step {step} and seconds {seconds} must not be negative")
            check_optim_state(optim_state, params, step, self.optimizer.FIELDS)
            restart = restart_from(info.get("lr_restart"), step, self.cfg.lr)
            schedule_from = info.get("schedule_from", 0)
            if type(schedule_from) is not int or not 0 <= schedule_from <= step:
                raise ValueError(f"schedule_from {schedule_from!r} is outside the run (step {step})")
            self.optimizer.load_state(optim_state)
            torch.set_rng_state(state["rng.torch_cpu"])
            self.data_generator.set_state(state["rng.data"])
            if self._sampler is not None:
                position = info.get("data")
                if not isinstance(position, dict):
                    raise ValueError("no position in the data file")
                self._sampler.restore(position, state["data.epoch_rng"])
            if self.device.type == "cuda" and "rng.cuda" in state:
                torch.cuda.set_rng_state(state["rng.cuda"], self.device)
        except (KeyError, RuntimeError, ValueError, TypeError) as e:
            raise CheckpointError(f"{ckpt.path} has incomplete or invalid training state ({e})") from None
        self.step_count = step
        self.seconds = self.seconds_at_start = seconds
        self.last_loss = info.get("last_loss")
        self.last_accuracy = info.get("last_accuracy")
        self.lr_restart, self.schedule_from = restart, schedule_from
        base_scores = info.get("base_scores")
        self.base_scores = base_scores if isinstance(base_scores, dict) else None
        if self.best is not None and info.get("best") is not None:
            try:
                self.best = Best.from_dict(info["best"], self.best.metric)
            except ValueError as e:
                raise CheckpointError(f"{ckpt.path} has invalid training metadata: {e}") from None
        self._load_history(ckpt)

    def _load_history(self, ckpt: Checkpoint) -> None:
        """Continue the file's history (validated by load_checkpoint); a file without one starts
        a history at this step."""
        history = ckpt.history or History()
        if history.last_step is not None and history.last_step != self.step_count:
            raise CheckpointError(f"{ckpt.path} has a history that ends at step {history.last_step}, "
                                  f"its training state is at step {self.step_count}")
        snaps = history.snapshots
        if snaps is not None and snaps.source != self.probe_ids:
            raise CheckpointError(f"{ckpt.path} has history snapshots of another probe source than "
                                  "its training config's")
        self.history = history
        if self.watcher is not None:
            self.watcher.resume_from(history)

