"""The doctor's code checks: does minitx's forward pass with this config have a classic bug?
Each measures a fresh model of the same config, or this model's own modules on fixed inputs,
and returns a CheckResult with the number, its threshold, pass/fail, and for a failure the
likely cause. A passing code check says the code is fine now; whether the weights were trained
under a bug is the weight checks' question (core/doctor/trained_checks.py,
core/doctor/counterfactuals.py, core/doctor/history_checks.py). Nothing here reads a bug preset,
a file name or a config flag to decide. docs/checks.md lists every check with its threshold;
core/doctor/diagnosis.py runs them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from minitx.core.data.batch import Batch
from minitx.core.data.task import Task
from minitx.core.model.transformer import MultiHeadAttention, Seq2Seq, eval_mode

# Likely causes, in the words of the symptom table (docs/checks.md).
CAUSES = {
    "no-shift": "target not shifted right: the model copies its decoder input",
    "no-causal-mask": "causal mask missing or inverted (triu instead of tril): the decoder sees the future",
    "no-scale": "missing 1/sqrt(d_k) scaling of the attention scores",
    "swap-cross": "output unrelated to the source: cross-attention arguments swapped, or memory "
    "not passed to the decoder layers",
    "no-reverse": "data generation forgot to reverse: the model copies the source (bright main diagonal)",
    "bad-init": "broken output layer or initialisation",
    "label-leak": "labels leak into the decoder input",
    "no-learning": "learning rate far too low, or gradients not reaching the model",
    "softmax": "softmax over the wrong axis, or masking applied after the softmax",
    "attention-maths": "attention does not compute softmax(QK^T / sqrt(d_k)) V",
    "undertrained": "the model has not learned the task: see the other failures, or train longer",
    "unused-cross": "cross-attention unused (a uniform field): the decoder ignores the source; "
    "see the other failures",
    "no-positions": "positions do not reach the model (position encoding missing or not added): "
    "it reads a source as a set",
    "position-leak": "something besides the position encoding depends on position (a causal or "
    "stale mask in the encoder?)",
    "no-warmup": "no learning-rate warmup: the loss jumped above where it started while the "
    "learning rate was at its peak from step 1",
    "no-warmup-failing": "no learning-rate warmup: the learning rate was at its peak from step 1 and "
    "the model fails its task (try a warmup, or a lower learning rate)",
    "diverged": "training diverged (the loss rose back up): the learning rate is too high",
    "too-few-steps": "training stopped while the loss was still falling: too few steps, or a "
    "learning rate too low to finish in them",
    "saw-answer": "the model saw the answer in training (loss near zero, generation fails): the "
    "target not shifted right, or the causal mask missing",
    "ignores-source": "the decoder ignores its source: the model has learned nothing from it",
    "fp16-overflow": "activations exceed fp16's range (65504): an fp16 run turns them to inf, then NaN",
    "fine-tune-no-gain": "the fine-tune did not lower its base's held-out loss: too few steps or a "
    "learning rate too low (or so high it undid the base: see training-progress)",
    "fine-tune-worse": "the fine-tune translates its held-out pairs worse than its base (BLEU fell)",
    "forgetting": "the fine-tune forgot what its base could do (the general pairs' loss rose): a "
    "lower learning rate, fewer steps, or general pairs mixed into the data",
}

# The two kinds of evidence, reported apart: does minitx's forward pass with this config have
# a bug (code), and were these weights trained under one (weights: counterfactual runs of the
# trained weights, their symptoms, and the run's own history).
CODE, WEIGHTS = "code", "weights"

SEED = 20240  # every probe batch and fresh model is drawn from fixed seeds: reruns agree


@dataclass(frozen=True)
class CheckResult:
    name: str  # short id, e.g. "future-leakage-values"
    description: str  # what it asserts, one line
    value: float | None  # the measured number (None when skipped)
    threshold: str  # what passing means, e.g. "< 1e-06"
    passed: bool | None  # None: skipped (see detail)
    cause: str = ""  # for a failure: the likely cause (a CAUSES text)
    detail: str = ""  # secondary numbers, or why the check was skipped
    kind: str = CODE  # which evidence it is: CODE or WEIGHTS
    figure: str = ""  # a failure's numbers in words, for the evidence of its cause (else detail)

    @property
    def status(self) -> str:
        return "skip" if self.passed is None else ("pass" if self.passed else "fail")

    def to_dict(self) -> dict:
        return {**asdict(self), "status": self.status}


def check_result(name, description, value, threshold, passed, cause_key="", detail="", kind=CODE,
                 figure=""):
    cause = CAUSES[cause_key] if (passed is False and cause_key) else ""
    return CheckResult(name, description, None if value is None else float(value), threshold,
                       passed, cause, detail, kind, figure)


def skipped(name: str, description: str, threshold: str, why: str, kind: str = CODE) -> CheckResult:
    return CheckResult(name, description, None, threshold, None, "", why, kind)


# ---------------------------------------------------------------------------------------------
# Helpers


def _fresh_model(model: Seq2Seq, seed: int = SEED, **changes) -> Seq2Seq:
    """A newly initialised model of the same config, without disturbing the caller's RNG."""
    cfg = model.cfg.replace(**changes) if changes else model.cfg
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = Seq2Seq(cfg)
    return fresh.to(model.device)


def probe_batch(task: Task, n: int, seed: int = SEED, length: int | None = None) -> Batch:
    """n of the task's examples from `seed`: fresh ones (of one `length` where the task can
    draw it), or held-out pairs for a data file."""
    return task.batch(n, torch.Generator().manual_seed(seed), length, length)


def input_batch(task: Task, n: int, seed: int = SEED, length: int | None = None) -> Batch:
    """n inputs from `seed` for a check that needs no known answer: probe_batch's examples
    where the task has them, else valid sequences of its vocabularies (Task.input_batch), so
    the code checks run on a model that keeps no example pairs."""
    return task.input_batch(n, torch.Generator().manual_seed(seed), length)


# Why a check that needs examples with known answers did not run on a model without them.
NEEDS_EXAMPLES = "no example pairs to measure on"


def _mean_loss(logits: torch.Tensor, labels: torch.Tensor, pad: int) -> float:
    """logits (B, T, V), labels (B, T) -> mean cross-entropy over non-PAD labels."""
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                 ignore_index=pad))


def _other_tokens(task: Task, tokens: torch.Tensor, side: str = "tgt") -> torch.Tensor:
    """Each id replaced by the next ordinary token of the `side`'s vocabulary (specials by some
    ordinary token): a different, valid input at every position (digit tasks: d -> d + 1 mod 10)."""
    vocab = task.src_vocab if side == "src" else task.vocab
    real = torch.tensor(vocab.real_ids(), device=tokens.device)
    return real[torch.searchsorted(real, tokens.contiguous(), right=True) % len(real)]


# ---------------------------------------------------------------------------------------------
# Checks on a fresh model of the same config (initial loss, overfit, saturation)


def check_initial_loss(model: Seq2Seq, task: Task, inits: int = 4) -> CheckResult:
    """Mean first-batch loss of a few fresh models of this config: one init scatters by ~0.3.

    A uniform guess over V tokens costs ln V, and random logits add about the same amount at
    any V (docs/checks.md: 3.3 for 13 tokens, healthy from 2.5 to 3.5), so the band moves with ln V.
    A fresh model knows no answer, so any valid targets measure it (input_batch)."""
    batch = input_batch(task, 64)
    device = model.device
    losses = []
    for i in range(inits):
        fresh = _fresh_model(model, seed=SEED + i).eval()
        with torch.no_grad():
            logits = fresh(batch.src.to(device), batch.decoder_input.to(device))  # (B, T, V)
        losses.append(_mean_loss(logits, batch.labels.to(device), model.cfg.pad_id))
    loss = sum(losses) / inits
    V = model.cfg.vocab_size
    shift = math.log(V / 13)
    low, high = round(2.5 + shift, 1), round(3.5 + shift, 1)  # to 0.1: the band shown is the one used
    cause = "bad-init" if loss > high else "label-leak"
    return check_result("initial-loss", f"a fresh model of this config starts near {3.3 + shift:.1f} "
                   f"(ln {V} = {math.log(V):.3f})", loss, f"{low:.3g} to {high:.3g}",
                   low <= loss <= high, cause, f"{inits} inits: {min(losses):.2f} to {max(losses):.2f}")


def check_overfit_one_batch(model: Seq2Seq, task: Task, steps: int = 400) -> CheckResult:
    """A fresh model with dropout 0 must drive one fixed batch of 8 below 0.01 in 400 steps."""
    if not task.has_examples:
        return skipped("overfit-one-batch", f"a fresh model (dropout 0) fits one batch of 8 in {steps} "
                       "Adam steps", "< 0.01", NEEDS_EXAMPLES)
    fresh = _fresh_model(model, dropout=0.0).train()
    device = model.device
    batch = probe_batch(task, 8)
    src, tgt_in, labels = (t.to(device) for t in (batch.src, batch.decoder_input, batch.labels))
    optimizer = torch.optim.Adam(fresh.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    first_grad = 0.0
    with torch.enable_grad():
        for step in range(steps):
            logits = fresh(src, tgt_in)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                   ignore_index=model.cfg.pad_id)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(fresh.parameters(), 1.0)
            if step == 0:
                first_grad = float(norm)
            optimizer.step()
    final = float(loss.detach())
    # A loss that stalls near 1.2 is the classic signature of unscaled, saturated attention.
    cause = "no-learning" if final > 2.0 or first_grad == 0.0 else "no-scale"
    return check_result("overfit-one-batch", f"a fresh model (dropout 0) fits one batch of 8 in {steps} "
                   "Adam steps", final, "< 0.01", final < 0.01, cause,
                   f"first grad norm {first_grad:.3g}")


def check_attention_saturation(model: Seq2Seq) -> CheckResult:
    """The scaling facts (docs/checks.md): with unit-variance inputs, q.k has std sqrt(d_k); divided by
    sqrt(d_k) the scores have std ~1 and the softmax over 200 keys peaks at ~0.05, without it
    the softmax saturates (peak ~0.48 at d_k 16).

    The scores are read back from the weights: log w = score - log Z, so the spread of log w
    along a row is the spread of the scores. Unlike the peak weight, this separates scaled from
    unscaled attention even at a small d_k (4: std 1 vs 2; at d_k 1 they are the same).
    The spread is counted in units of the q and k actually drawn (rms of q times the spread of
    k over positions), which is how "unit-variance" holds for every init: grouped-query
    attention's narrower K projection (Xavier on 64 -> 16 draws 1.26x larger weights than on
    64 -> 64) makes larger keys, not missing scaling.

    A config that declares its scores unscaled (scale_scores false: T5, which folds 1/sqrt(d_k)
    into its weights' initialisation) has chosen the spread this check measures: skipped."""
    description = "at init, attention scores over 200 random keys have std ~1 (the softmax is not saturated)"
    if not model.cfg.scale_scores:
        return skipped("attention-saturation", description, "< 1.25",
                       "scores unscaled by design (scale_scores false: T5 folds 1/sqrt(d_k) into weights)")
    fresh = _fresh_model(model).eval()
    gen = torch.Generator().manual_seed(SEED)
    spreads, peaks, top = [], [], 0.0
    for module in fresh.modules():
        if not isinstance(module, MultiHeadAttention):
            continue
        x = torch.randn(4, 200, fresh.cfg.d_model, generator=gen).to(model.device)  # (B, T, d)
        with torch.no_grad():
            kv = module.keys_values(x)  # K (B, g, T, k)
            _, weights = module(x, kv, None, need_weights=True)  # (B, h, T, T)
            unit = module.queries(x).pow(2).mean().sqrt() * kv[0].std(dim=-2).mean()
        log_w = weights.clamp_min(torch.finfo(weights.dtype).tiny).log()
        spreads.append(float(log_w.std(dim=-1).mean() / unit))
        row_max = weights.max(dim=-1).values  # (B, h, T)
        peaks.append(float(row_max.mean()))
        top = max(top, float(row_max.max()))
    spread = sum(spreads) / len(spreads)
    return check_result("attention-saturation", description, spread, "< 1.25", spread < 1.25,
                   "no-scale", f"peak {sum(peaks) / len(peaks):.3f} (max {top:.2f})")


# ---------------------------------------------------------------------------------------------
# Checks on the model itself


def check_rows_sum_to_one(model: Seq2Seq, task: Task) -> CheckResult:
    batch = input_batch(task, 32)
    device = model.device
    with eval_mode(model), torch.no_grad():
        _, maps = model(batch.src.to(device), batch.decoder_input.to(device), return_attention=True)
    worst = 0.0
    for weights in maps.encoder_self + maps.decoder_self + maps.cross:  # each (B, h, Tq, Tk)
        worst = max(worst, float((weights.sum(dim=-1) - 1).abs().max()))
    return check_result("rows-sum-to-one", "every attention row sums to 1 over its keys", worst,
                   "< 1e-05", worst < 1e-5, "softmax")


def _reference_attention(module: MultiHeadAttention, query, memory, mask, scale: float | None):
    """The textbook formula via F.scaled_dot_product_attention on the module's own projections;
    with grouped-query attention, query head j reads K/V head j // (query heads per K/V head)."""
    q = module.queries(query)  # (B, h, Tq, k)
    k, v = module.keys_values(memory)  # (B, g, Tk, k)
    kv_head = torch.arange(q.shape[1], device=q.device) // (q.shape[1] // k.shape[1])  # (h,)
    k, v = k[:, kv_head], v[:, kv_head]  # (B, h, Tk, k)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)  # (B, h, Tq, k)
    B, h, Tq, dk = out.shape
    return module.out_proj(out.transpose(1, 2).reshape(B, Tq, h * dk))  # (B, Tq, d)


def check_fused_agreement(model: Seq2Seq) -> CheckResult:
    """Every attention block of the model (its explicit path, and its fast path) against
    F.scaled_dot_product_attention on a fixed input, with the scale its config declares: the
    standard 1/sqrt(d_k), or 1 where scale_scores is false (T5). Matching the other scale instead
    names missing scaling only where the config asks for it."""
    scaled = model.cfg.scale_scores
    gen = torch.Generator().manual_seed(SEED)
    device, d = model.device, model.cfg.d_model
    query = torch.randn(3, 7, d, generator=gen).to(device)  # (B, Tq, d)
    memory = torch.randn(3, 5, d, generator=gen).to(device)  # (B, Tk, d)
    mask = torch.ones(3, 1, 1, 5, dtype=torch.bool, device=device)
    mask[1, ..., 3:] = False  # some padded keys, so masking is exercised too
    worst, worst_other = 0.0, 0.0
    with eval_mode(model), torch.no_grad():
        for module in model.modules():
            if not isinstance(module, MultiHeadAttention):
                continue
            kv = module.keys_values(memory)
            ref = _reference_attention(module, query, memory, mask, None if scaled else 1.0)
            other = _reference_attention(module, query, memory, mask, 1.0 if scaled else None)
            # Relative to the output's size once it exceeds 1: trained weights make large
            # outputs, and float32 rounding grows with them.
            size = max(1.0, float(ref.abs().max()))
            for need_weights in (True, False):
                out, _ = module(query, kv, mask, need_weights=need_weights)  # (B, Tq, d)
                worst = max(worst, float((out - ref).abs().max()) / size)
                worst_other = max(worst_other, float((out - other).abs().max()) / size)
    cause = "no-scale" if scaled and worst_other < 1e-5 else "attention-maths"
    return check_result("fused-agreement", "each attention block equals scaled_dot_product_attention "
                   "on a fixed input", worst, "< 1e-05", worst < 1e-5, cause,
                   f"vs unscaled: {worst_other:.3g}" if scaled else
                   f"unscaled by design; vs scaled: {worst_other:.3g}")


def _equivariance_error(model: Seq2Seq, src: torch.Tensor, order: torch.Tensor) -> float:
    """How far encode(src permuted) is from encode(src) permuted, relative to the memory's size."""
    with eval_mode(model), torch.no_grad():
        memory, _ = model.encode(src)  # (1, S, d)
        permuted, _ = model.encode(src[:, order])
    return float((memory[:, order] - permuted).abs().max()) / max(1.0, float(memory.abs().max()))


def check_permutation(model: Seq2Seq) -> CheckResult:
    """Without positions, self-attention is permutation-equivariant; with them it is not. The
    first half runs this model's weights with its position encoding removed (position_encoding
    "none"); the second, the model as it is, unless it has no position encoding at all."""
    length = min(8, model.cfg.max_len)
    cfg = model.cfg
    # source ids (an imported model's source vocabulary is its own; its specials may sit anywhere)
    specials = (cfg.source_pad_id, cfg.sos_id, cfg.eos_id)
    ordinary = [i for i in range(cfg.source_vocab_size) if i not in specials]
    digits = [3, 1, 4, 0, 5, 9, 2, 6][:length]  # the digit tasks' ids; any vocabulary's otherwise
    src = torch.tensor([[ordinary[d % len(ordinary)] for d in digits]], device=model.device)  # (1, S)
    order = torch.randperm(length, generator=torch.Generator().manual_seed(SEED)).to(model.device)
    with torch.random.fork_rng(devices=[]):
        plain = Seq2Seq(model.cfg.replace(position_encoding="none")).to(model.device)
    plain.load_state_dict(model.state_dict(), strict=False)  # every weight but the positions'
    without = _equivariance_error(plain, src, order)
    description = "without positions the encoder is permutation-equivariant; with them it is not"
    threshold = "< 1e-05, and > 1e-03 with positions"
    if model.cfg.position_encoding == "none":
        return check_result("permutation", description, without, threshold, without < 1e-5,
                       "position-leak", "the model has no position encoding: a source is a set to it")
    with_positions = _equivariance_error(model, src, order)
    cause = "position-leak" if without >= 1e-5 else "no-positions"
    return check_result("permutation", description, without, threshold,
                   without < 1e-5 and with_positions > 1e-3, cause,
                   f"with its {model.cfg.position_encoding} positions: {with_positions:.3g}")


def check_future_leakage_values(model: Seq2Seq, task: Task) -> CheckResult:
    """Changing only the last decoder input token must leave every earlier position's logits."""
    batch = input_batch(task, 16, length=task.max_len)  # equal lengths: the last input is a token
    device = model.device
    src, tgt_in = batch.src.to(device), batch.decoder_input.to(device)  # (B, S), (B, T)
    changed = tgt_in.clone()
    changed[:, -1] = _other_tokens(task, changed[:, -1])
    diff = 0.0
    with eval_mode(model), torch.no_grad():
        # Both attention paths: the fused kernel (plain inference) and the explicit one that
        # training and attention maps use, where a hand-built causal mask can be wrong.
        for explicit in (False, True):
            a = model(src, tgt_in, return_attention=explicit)  # (B, T, V) [, maps]
            b = model(src, changed, return_attention=explicit)
            if explicit:
                a, b = a[0], b[0]
            diff = max(diff, float((a[:, :-1] - b[:, :-1]).abs().max()))
    return check_result("future-leakage-values", "in eval mode, changing the last decoder input token "
                   "leaves earlier logits equal", diff, "< 1e-06", diff < 1e-6, "no-causal-mask")


def check_future_leakage_gradients(model: Seq2Seq, task: Task) -> CheckResult:
    """Gradients of the outputs up to position t w.r.t. the input embeddings after t are zero."""
    batch = input_batch(task, 8, length=task.max_len)
    device = model.device
    captured = []

    def capture(_module, _inputs, output):  # (B, T, d) embedding output, made a leaf
        leaf = output.detach().requires_grad_(True)
        captured.append(leaf)
        return leaf

    handle = model.tgt_embed.register_forward_hook(capture)
    try:
        with eval_mode(model), torch.enable_grad():
            logits = model(batch.src.to(device), batch.decoder_input.to(device))  # (B, T, V)
            t = logits.shape[1] // 2
            weights = torch.randn(logits[:, : t + 1].shape, generator=torch.Generator().manual_seed(SEED))
            (grad,) = torch.autograd.grad((logits[:, : t + 1] * weights.to(device)).sum(), captured[0])
    finally:
        handle.remove()
    future = float(grad[:, t + 1 :].abs().max())  # (B, T - t - 1, d) must be all zero
    return check_result("future-leakage-gradients", "earlier outputs have zero gradient w.r.t. "
                   "future decoder inputs", future, "< 1e-10", future < 1e-10, "no-causal-mask")


def check_source_dependence(model: Seq2Seq, task: Task) -> CheckResult:
    """Same decoder input, different source: the logits must change."""
    batch = input_batch(task, 16)
    pad = task.src_vocab.pad
    other = _other_tokens(task, batch.src, "src").masked_fill(batch.src == pad, pad)  # same lengths
    device = model.device
    tgt_in = batch.decoder_input.to(device)
    with eval_mode(model), torch.no_grad():
        a = model(batch.src.to(device), tgt_in)
        b = model(other.to(device), tgt_in)
    diff = float((a - b).abs().max())
    return check_result("source-dependence", "changing the source changes the output", diff, "> 1e-04",
                   diff > 1e-4, "swap-cross")
