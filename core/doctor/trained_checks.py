"""The doctor's checks for a trained model: held-out accuracy, the task's alignment, and the
symptoms a trained bug leaves (copying the decoder input, copying the source). The doctor runs
them only on a model that looks trained (core/doctor/diagnosis.py); the rest are core/doctor/code_checks.py.
"""

from __future__ import annotations

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.digits import CopyTask
from minitx.core.data.task import Task
from minitx.core.doctor.code_checks import SEED, CheckResult, check_result, probe_batch, skipped
from minitx.core.interp.alignment import head_sharpness, scores_from_cross
from minitx.core.interp.decode import accuracy_by_length, exact_match, greedy_decode, padded_to
from minitx.core.model.transformer import Seq2Seq, eval_mode

# ---------------------------------------------------------------------------------------------
# Checks on a trained model (generalisation, and the symptoms of trained bugs)


def check_accuracy(model: Seq2Seq, task: Task, n: int = 200) -> CheckResult:
    batch = probe_batch(task, n, seed=SEED + 2)
    device, cfg = model.device, model.cfg
    cap = task.decode_cap(batch.src.shape[1], cfg.max_len)
    generated = greedy_decode(model, batch.src.to(device), max_new_tokens=cap).cpu()
    ok = exact_match(generated, batch.labels, eos=cfg.eos_id, pad=cfg.pad_id)  # (n,)
    by_length = accuracy_by_length(ok, batch.lengths)
    worst = min(by_length, key=by_length.get)
    acc = float(ok.float().mean())
    detail = f"worst at length {worst}: {by_length[worst]:.0%}"
    if by_length[worst] == max(by_length.values()):
        detail = f"{by_length[worst]:.0%} at every length"
    description = f"held-out exact match of greedy decoding on {len(batch)} {task.evaluated_on}"
    return check_result("accuracy", description, acc, ">= 0.9", acc >= 0.9, "undertrained", detail)


def check_copies_decoder_input(model: Seq2Seq, task: Task) -> CheckResult:
    """Teacher forcing: how often the prediction at position i is the input token at i.
    A model trained without the shift learned exactly that; a healthy one predicts the next."""
    batch = probe_batch(task, 64, seed=SEED + 3)
    device = model.device
    tgt_in = batch.decoder_input.to(device)  # (B, T)
    with eval_mode(model), torch.no_grad():
        predicted = model(batch.src.to(device), tgt_in).argmax(-1)  # (B, T)
    real = torch.isin(tgt_in, torch.tensor(task.vocab.real_ids(), device=device))  # not SOS/PAD/UNK
    rate = float((predicted == tgt_in)[real].float().mean())
    return check_result("copies-decoder-input", "the prediction at position i is not simply decoder "
                   "input i", rate, "< 0.5", rate < 0.5, "no-shift")


def check_copies_source(model: Seq2Seq, task: Task) -> CheckResult:
    """How often greedy outputs equal the source unchanged, on examples whose target is not
    their source (meaningless for the copy task)."""
    name, description = "copies-source", "greedy outputs are not plain copies of the source"
    if isinstance(task, CopyTask):
        return skipped(name, description, "< 0.5", "the task is copying")
    if task.src_vocab != task.vocab or task.wraps_source:  # an imported model: ids do not match up
        return skipped(name, description, "< 0.5", "sources and outputs are fed in different ids")
    batch = probe_batch(task, 100, seed=SEED + 4)
    eos, pad = model.cfg.eos_id, model.cfg.pad_id
    B, S = batch.src.shape
    copies = torch.cat([batch.src, torch.full((B, 1), pad)], dim=1)  # (B, S + 1): source, EOS, PAD
    copies[torch.arange(B), batch.lengths] = eos
    width = max(copies.shape[1], batch.labels.shape[1])
    differs = (padded_to(copies, width, eos=eos, pad=pad)
               != padded_to(batch.labels, width, eos=eos, pad=pad)).any(dim=1)  # palindromes say nothing
    if not bool(differs.any()):
        return skipped(name, description, "< 0.5", "every target is its source")
    cap = task.decode_cap(S, model.cfg.max_len)
    generated = greedy_decode(model, batch.src.to(model.device), max_new_tokens=cap).cpu()
    rate = float(exact_match(generated, copies, eos=eos, pad=pad)[differs].float().mean())
    return check_result(name, description, rate, "< 0.5", rate < 0.5, "no-reverse")


def _cross_alignment(model: Seq2Seq, batch: Batch, expected: torch.Tensor):
    """Best head's alignment score for `expected` (B, S_out, S), or None when the
    cross-attention keys are not the source positions."""
    device = model.device
    with eval_mode(model), torch.no_grad():
        _, maps = model(batch.src.to(device), batch.decoder_input.to(device), return_attention=True)
    if any(w.shape[-1] != batch.src.shape[1] for w in maps.cross):
        return None
    return float(scores_from_cross(maps.cross, expected.to(device)).max())


ALIGNMENT_THRESHOLD = 0.4  # uniform attention over n source positions scores 1/n (0.1 to 0.25)


def check_alignment(model: Seq2Seq, task: Task) -> CheckResult:
    """The best head's mean attention mass on the source positions the task expects. A data
    file expects none unless told (--expect); then each head's sharpness is reported and the
    check is skipped."""
    name, threshold = "alignment", f">= {ALIGNMENT_THRESHOLD}"
    description = f"some cross-attention head shows the task's {task.alignment_name or 'expected'} alignment"
    batch = probe_batch(task, 128, seed=SEED + 5)
    expected = task.expected_alignment(batch)
    if expected is None:
        sharp = head_sharpness(model, batch)  # (layers, heads)
        layer, head = divmod(int(sharp.argmax()), sharp.shape[1])
        return skipped(name, description, threshold,
                       "no expected pattern for a data file (train with --expect diagonal or "
                       f"anti-diagonal to score one); sharpest head L{layer + 1} H{head + 1}: mean max "
                       f"weight {float(sharp.max()):.2f}, all heads {float(sharp.mean()):.2f}")
    score = _cross_alignment(model, batch, expected)
    if score is None:
        return check_result(name, description, 0.0, threshold, False, "swap-cross",
                       "cross-attention does not attend over the source positions")
    detail, cause = "", "undertrained"
    if task.exact_lengths and not isinstance(task, CopyTask):  # a digit task: is it a copy instead?
        diagonal = _cross_alignment(model, batch, CopyTask(task.min_len, task.max_len).alignment(
            batch.src, batch.lengths))
        detail = f"main diagonal {diagonal:.2f}"
        if diagonal > max(score, ALIGNMENT_THRESHOLD):
            cause = "no-reverse"
    if cause == "undertrained" and score < 1.5 / task.max_len:
        cause = "unused-cross"  # about uniform: a symptom of several bugs, not one cause
    return check_result(name, description, score, threshold, score >= ALIGNMENT_THRESHOLD, cause, detail)
