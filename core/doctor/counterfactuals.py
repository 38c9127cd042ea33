"""Weight checks by counterfactual runs: the trained weights, run under each classic bug's variant
of the forward pass (or of the data), against the same weights under the correct code.

A model trained under a bug learned to work *with* the bug: run its weights the way they were
trained and they do markedly better than under the correct code. That holds whatever the file's
config says, so it finds the bug in a model whose file has no hint of it (a user's own file, or
one from other code). The variants:
- the model's own variants (core/model/transformer.py computes them from ModelConfig.bug): the
  causal mask removed, no 1/sqrt(d_k) scaling, cross-attention reading the decoder's own states;
- the decoder fed the labels themselves instead of the target shifted right (no-shift);
- the copy task's targets instead of the task's own (no-reverse: trained on copies).
Also here: does the output depend on the source at all (the same weights, another source).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig
from minitx.core.data.batch import Batch
from minitx.core.data.task import Task
from minitx.core.doctor.code_checks import SEED, WEIGHTS, CheckResult, check_result, skipped
from minitx.core.interp.decode import padded_to
from minitx.core.model.transformer import Seq2Seq, eval_mode

# "Markedly better" under a variant: a quarter more of the examples exactly right, or the loss
# at most half and at least 0.5 nats lower. Healthy models sit near 100% and a loss near 0 under
# the correct code, so no variant can beat them by that (docs/checks.md has the figures).
EXACT_GAIN = 0.25
LOSS_RATIO, LOSS_DROP = 0.5, 0.5
# A model that has learned its task (a loss under a quarter of what guessing costs) does far
# worse under every variant when healthy: at least 36 times the loss in every healthy model
# measured (docs/checks.md). One whose loss under a variant is at most 1.1 times the correct
# code's, with as many examples right (2 points of slack), was trained that way: a bug the
# weights half-survive (missing scaling in a small model) shows so, where "markedly better" has
# no room left.
LEARNED = 0.25  # x ln(tokens)
AS_GOOD = 1.1
SOURCE_GAIN = 0.1  # nats another example's source must cost a model that reads its source
NEAR_CHANCE = 0.3  # nats above ln(tokens) still counted as "about what guessing gives"
EXAMPLES = 224  # teacher-forced examples per measurement (32 of each length of the reversal task)


@dataclass(frozen=True)
class Variant:
    """One way of running the weights: model variants switched on, and how the data is fed."""

    bug: str  # the preset (core/config.py's BUGS) whose training this reproduces; "" for none
    check: str  # the name of its check
    model_bugs: tuple[str, ...] = ()  # ModelConfig.bug variants, switched on together
    unshifted: bool = False  # the decoder reads the labels themselves, not the target shifted right
    copies: bool = False  # scored against copies of the source, not the task's targets
    correct: str = ""  # how the correct code runs, in words: "with the causal mask"
    differently: str = ""  # how this variant runs: "without it"

    def plus(self, other: Variant) -> Variant:
        """Both variants at once (to see whether `other` adds anything to this one)."""
        return replace(self, bug=f"{self.bug}+{other.bug}", check=f"{self.check}+{other.check}",
                       model_bugs=self.model_bugs + other.model_bugs,
                       unshifted=self.unshifted or other.unshifted, copies=self.copies or other.copies)


CORRECT = Variant("", "correct")
VARIANTS = (
    Variant("no-causal-mask", "trained-without-mask", model_bugs=("no-causal-mask",),
            correct="with the causal mask", differently="without it"),
    Variant("no-shift", "trained-unshifted", unshifted=True,
            correct="with the decoder input shifted right", differently="fed the labels unshifted"),
    Variant("no-scale", "trained-unscaled", model_bugs=("no-scale",),
            correct="with scores divided by sqrt(d_k)", differently="unscaled"),
    Variant("swap-cross", "trained-cross-on-decoder", model_bugs=("swap-cross",),
            correct="with cross-attention reading the encoder",
            differently="reading the decoder's own states"),
    Variant("no-reverse", "trained-on-copies", copies=True,
            correct="against the task's targets", differently="against copies of the source"),
)


@dataclass(frozen=True)
class Fit:
    """How well weights fit teacher-forced examples under one variant."""

    exact: float  # share of examples with every label position predicted right
    loss: float  # mean cross-entropy per label token

    def markedly_better_than(self, other: Fit) -> bool:
        return (self.exact - other.exact >= EXACT_GAIN
                or (self.loss <= LOSS_RATIO * other.loss and other.loss - self.loss >= LOSS_DROP))

    def fires_against(self, correct: Fit, chance: float) -> bool:
        """Markedly better than the correct code, or, for weights that learned the task under
        it, as good: where a healthy model does far worse."""
        learned = correct.loss <= LEARNED * chance
        return self.markedly_better_than(correct) or (
            learned and self.loss <= AS_GOOD * correct.loss and self.exact >= correct.exact - 0.02)

    def strength(self, other: Fit) -> tuple[float, float]:
        """How much better than `other`, for ranking variants: exact-match gain, then loss ratio."""
        return self.exact - other.exact, math.log(max(other.loss, 1e-9) / max(self.loss, 1e-9))


def percent(x: float) -> str:
    """0.395 -> '39.5%', 1.0 -> '100%', 0.0 -> '0%'."""
    return f"{100 * x:.1f}".rstrip("0").rstrip(".") + "%"


# ---------------------------------------------------------------------------------------------
# Running the weights differently


@functools.lru_cache(maxsize=32)
def _switches(cfg: ModelConfig, bug: str) -> tuple[tuple[int, str, object], ...]:
    """(module index, attribute, value) for each plain attribute in which a model built with the
    variant `bug` differs from one built without: read off the modules, so how each variant is
    computed stays in core/model/transformer.py alone. Lets two variants be switched on at once."""
    with torch.random.fork_rng(devices=[]):
        plain, variant = Seq2Seq(cfg.replace(bug="")), Seq2Seq(cfg.replace(bug=bug))
    found = []
    for i, (a, b) in enumerate(zip(plain.modules(), variant.modules())):
        for name, value in vars(b).items():
            plain_value = isinstance(value, (bool, int, float, type(None)))
            if name.startswith("_") or name == "training" or not plain_value:
                continue
            if vars(a).get(name) != value:
                found.append((i, name, value))
    return tuple(found)


def correct_model(model: Seq2Seq) -> Seq2Seq:
    """`model`'s weights in a model built by the correct code for its config (ModelConfig.bug
    empty), in eval mode, on the model's device."""
    with torch.random.fork_rng(devices=[]):
        rebuilt = Seq2Seq(model.cfg.replace(bug=""))
    rebuilt.load_state_dict(model.state_dict())
    return rebuilt.to(model.device).eval()


@contextlib.contextmanager
def switched(rebuilt: Seq2Seq, model_bugs: tuple[str, ...]) -> Iterator[Seq2Seq]:
    """A correct_model() with the given ModelConfig.bug variants switched on for a block."""
    modules = list(rebuilt.modules())
    changes = [change for bug in model_bugs for change in _switches(rebuilt.cfg, bug)]
    before = [(i, name, getattr(modules[i], name)) for i, name, _ in changes]
    try:
        for i, name, value in changes:
            setattr(modules[i], name, value)
        yield rebuilt
    finally:
        for i, name, value in reversed(before):
            setattr(modules[i], name, value)


def fit_batches(task: Task, n: int = EXAMPLES, seed: int = SEED + 7) -> list[Batch]:
    """The task's examples to fit, one source length per batch where the task can draw them (as
    the fast recipe trains: a model trained without padding is measured without padding)."""
    generator = torch.Generator().manual_seed(seed)
    if not task.exact_lengths:
        return [task.batch(n, generator)]
    lengths = range(task.min_len, task.max_len + 1)
    each = max(16, n // len(lengths))
    return [task.batch(each, generator, length, length) for length in lengths]


def copies_of_source(batch: Batch, task: Task) -> Batch:
    """The batch with each target replaced by its source unchanged: SOS, source, EOS, in the
    output vocabulary (Task.sources_as_outputs: by token text where the source has its own),
    without the examples whose source the outputs cannot write."""
    own, writable = task.sources_as_outputs(batch)
    vocab = task.vocab
    B, S = own.shape
    tgt = torch.full((B, S + 2), vocab.pad, dtype=torch.long)
    tgt[:, 0] = vocab.sos
    tgt[:, 1 : S + 1] = own
    tgt[torch.arange(B), batch.lengths + 1] = vocab.eos
    return Batch(src=batch.src[writable], tgt=tgt[writable], lengths=batch.lengths[writable])


def measure_fit(model: Seq2Seq, batches: list[Batch], variant: Variant = CORRECT,
                other_source: bool = False, task: Task | None = None) -> Fit:
    """Teacher-forced exact match and loss of `model` (already the variant's model) on `batches`,
    fed as `variant` says (the copies variant: against copies of the source, which `task` writes);
    other_source gives each example the source of its neighbour in the batch (same length), to
    see whether the output depends on the source."""
    cfg, device = model.cfg, model.device
    exact = examples = 0
    total = tokens = 0.0
    with eval_mode(model), torch.no_grad():
        for batch in batches:
            if variant.copies:
                batch = copies_of_source(batch, task)
                if not len(batch):
                    continue
            labels = batch.labels.to(device)  # (B, T)
            tgt_in = labels if variant.unshifted else batch.decoder_input.to(device)  # (B, T)
            src = batch.src.roll(1, dims=0) if other_source else batch.src
            logits = model(src.to(device), tgt_in)  # (B, T, V)
            real = labels != cfg.pad_id  # (B, T)
            right = (logits.argmax(-1) == labels) | ~real
            exact += int(right.all(dim=1).sum())
            examples += len(labels)
            total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                           ignore_index=cfg.pad_id, reduction="sum"))
            tokens += int(real.sum())
    return Fit(exact / max(examples, 1), total / max(tokens, 1))


def _copies_apply(task: Task, batches: list[Batch], positions: int) -> str:
    """Why the copy-target variant says nothing for this task ("" when it applies)."""
    vocab = task.vocab
    same = written = 0
    for b in batches:
        copies = copies_of_source(b, task)
        width = max(copies.labels.shape[1], b.labels.shape[1])
        labels = b.labels[task.sources_as_outputs(b)[1]]  # the examples the outputs can write
        same += int((padded_to(copies.labels, width, eos=vocab.eos, pad=vocab.pad)
                     == padded_to(labels, width, eos=vocab.eos, pad=vocab.pad)).all(dim=1).sum())
        written += len(copies)
    if not written:
        return "no source is written in tokens the outputs have"
    if same * 2 >= written:
        return "the task's targets are copies of the source"
    if max(b.src.shape[1] for b in batches) + 1 > positions:
        return "copies of the longest sources do not fit the model's positions"
    return ""


# ---------------------------------------------------------------------------------------------
# The checks


THRESHOLD = f"< +{EXACT_GAIN:g}"  # and the loss not halved: the description says so


def check_counterfactuals(model: Seq2Seq, task: Task) -> list[CheckResult]:
    """One check per classic bug: the weights under its variant against the correct code. A
    variant that fires is blamed unless another, stronger one explains it: switched on together
    with the strongest, it adds nothing (a model trained without the causal mask also does
    somewhat better fed the labels unshifted: both let it see the answer)."""
    batches = fit_batches(task)
    rebuilt = correct_model(model)

    def fit_under(v: Variant) -> Fit:
        with switched(rebuilt, v.model_bugs) as variant:
            return measure_fit(variant, batches, v, task=task)

    correct = fit_under(CORRECT)
    _, chance = chance_loss(task)
    no_copies = _copies_apply(task, batches, model.cfg.max_len)
    fits = {v.bug: fit_under(v) for v in VARIANTS if not (v.copies and no_copies)}
    fired = sorted((v for v in VARIANTS if v.bug in fits and fits[v.bug].fires_against(correct, chance)),
                   key=lambda v: fits[v.bug].strength(correct), reverse=True)
    explained: dict[str, Variant] = {}
    for v in fired[1:]:
        if not fit_under(fired[0].plus(v)).markedly_better_than(fits[fired[0].bug]):
            explained[v.bug] = fired[0]
    n = sum(len(b) for b in batches)
    results = []
    for v in VARIANTS:
        description = (f"teacher-forced on {n} examples, the trained weights do no better {v.differently} "
                       f"than {v.correct}: exact match not {EXACT_GAIN:g} higher, loss not halved, and "
                       f"for a model that learned its task, clearly worse (a loss above {AS_GOOD:g}x)")
        if v.bug not in fits:
            results.append(skipped(v.check, description, THRESHOLD, no_copies, WEIGHTS))
            continue
        f = fits[v.bug]
        detail = (f"exact {percent(correct.exact)} -> {percent(f.exact)}; "
                  f"loss {correct.loss:.3g} -> {f.loss:.3g}")
        if v.bug in explained:
            detail += f"; explained by {explained[v.bug].check}"
        figure = (f"teacher-forced exact match {percent(correct.exact)} {v.correct}, {percent(f.exact)} "
                  f"{v.differently} (loss {correct.loss:.3g} -> {f.loss:.3g})")
        results.append(check_result(v.check, description, f.exact - correct.exact, THRESHOLD,
                                    v not in fired or v.bug in explained, v.bug, detail, WEIGHTS, figure))
    return results


def chance_loss(task: Task) -> tuple[int, float]:
    """(ordinary tokens, ln of their number): the loss of a uniform guess among them."""
    n = len(task.vocab.real_ids())
    return n, math.log(n)


def check_source_use(model: Seq2Seq, task: Task) -> CheckResult:
    """Each example fed another example's source (same length): a model that reads its source
    does much worse; one whose decoder ignores the source does the same. If these weights fit
    the task about as well as guessing does, as they are or with cross-attention reading the
    decoder's own states (a source-blind fit by construction), the output's token frequencies
    were learned and nothing of the source: that points at cross-attention (swapped, or cut off).
    Far from guessing, at a model that is untrained, or found a shortcut that needs no source."""
    batches = fit_batches(task)
    own = measure_fit(model, batches)
    other = measure_fit(model, batches, other_source=True)
    with switched(correct_model(model), ("swap-cross",)) as source_blind:
        blind = measure_fit(source_blind, batches)
    tokens, chance = chance_loss(task)
    gain = other.loss - own.loss
    best = min(own.loss, blind.loss)
    # Far below guessing the decoder predicts well without the source: a shortcut (it sees the answer).
    cause = "swap-cross" if chance / 2 <= best <= chance + NEAR_CHANCE else "ignores-source"
    return check_result("source-use", "the output depends on the source: another example's source "
                        f"(same length) makes the teacher-forced loss at least {SOURCE_GAIN:g} nats worse",
                        gain, f"> {SOURCE_GAIN:g}", gain > SOURCE_GAIN, cause,
                        f"loss {own.loss:.3g} own source, {other.loss:.3g} another's", WEIGHTS,
                        f"teacher-forced loss {own.loss:.3g} with its own source, {other.loss:.3g} with "
                        f"another's, {blind.loss:.3g} with cross-attention reading the decoder (guessing: "
                        f"ln {tokens} = {chance:.2f})")
