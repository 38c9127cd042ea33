"""Weight checks on the model as it runs: held-out accuracy (is it below its task's bar?), the
task's alignment, and the symptoms a trained bug leaves (copying the decoder input, copying the
source, saturated attention). The counterfactual runs are core/doctor/counterfactuals.py, the
run's history core/doctor/history_checks.py, the code checks core/doctor/code_checks.py.
"""

from __future__ import annotations

import torch

from minitx.core.data.batch import Batch
from minitx.core.data.digits import CopyTask
from minitx.core.data.task import Task
from minitx.core.doctor.code_checks import SEED, WEIGHTS, CheckResult, check_result, probe_batch, skipped
from minitx.core.interp.alignment import head_sharpness, scores_from_cross
from minitx.core.interp.decode import accuracy_by_length, exact_match, greedy_decode, padded_to
from minitx.core.model.transformer import Seq2Seq, eval_mode

NO_BAR = "exact match is no bar for translations and fine-tunes (judged by held-out loss and BLEU)"
TASK_BAR = 0.9  # held-out exact match below this fails the task: the model always gets a verdict

# ---------------------------------------------------------------------------------------------
# Checks on a trained model (generalisation, and the symptoms of trained bugs)


def check_accuracy(model: Seq2Seq, task: Task, n: int = 200, bar: bool = True) -> CheckResult:
    """Held-out exact match against TASK_BAR; with bar=False (a translation, a fine-tune:
    judged by its loss and BLEU) measured and shown, neither passed nor failed."""
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
    if not bar:
        return CheckResult("accuracy", description, acc, "no bar", None, "",
                           f"{detail}; {NO_BAR}", WEIGHTS)
    return check_result("accuracy", description, acc, f">= {TASK_BAR}", acc >= TASK_BAR, "undertrained",
                        detail, WEIGHTS)


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
                        "input i", rate, "< 0.5", rate < 0.5, "no-shift", kind=WEIGHTS,
                        figure=f"{rate:.0%} of teacher-forced predictions repeat their decoder input token")


def check_copies_source(model: Seq2Seq, task: Task) -> CheckResult:
    """How often greedy outputs equal the source unchanged, on examples whose target is not
    their source (meaningless for the copy task). With separate source and output vocabularies
    the source is compared by its tokens' text, on the examples the outputs can write."""
    name, description = "copies-source", "greedy outputs are not plain copies of the source"
    if isinstance(task, CopyTask):
        return skipped(name, description, "< 0.5", "the task is copying", WEIGHTS)
    batch = probe_batch(task, 100, seed=SEED + 4)
    eos, pad = model.cfg.eos_id, model.cfg.pad_id
    own, writable = task.sources_as_outputs(batch)
    B = own.shape[0]
    copies = torch.cat([own, torch.full((B, 1), pad)], dim=1)  # (B, S + 1): source, EOS, PAD
    copies[torch.arange(B), batch.lengths] = eos
    width = max(copies.shape[1], batch.labels.shape[1])
    differs = (padded_to(copies, width, eos=eos, pad=pad)
               != padded_to(batch.labels, width, eos=eos, pad=pad)).any(dim=1)  # palindromes say nothing
    differs &= writable
    if not bool(writable.any()):
        return skipped(name, description, "< 0.5", "no source is written in tokens the outputs have",
                       WEIGHTS)
    if not bool(differs.any()):
        return skipped(name, description, "< 0.5", "every target is its source", WEIGHTS)
    S = batch.src.shape[1]
    cap = task.decode_cap(S, model.cfg.max_len)
    generated = greedy_decode(model, batch.src.to(model.device), max_new_tokens=cap).cpu()
    rate = float(exact_match(generated, copies, eos=eos, pad=pad)[differs].float().mean())
    return check_result(name, description, rate, "< 0.5", rate < 0.5, "no-reverse", kind=WEIGHTS,
                        figure=f"{rate:.0%} of greedy outputs are the source unchanged")


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
    file or an imported model expects none unless told (train's or the doctor's --expect); then
    each head's sharpness is reported and the check is skipped."""
    name, threshold = "alignment", f">= {ALIGNMENT_THRESHOLD}"
    description = f"some cross-attention head shows the task's {task.alignment_name or 'expected'} alignment"
    batch = probe_batch(task, 128, seed=SEED + 5)
    expected = task.expected_alignment(batch)
    if expected is None:
        sharp = head_sharpness(model, batch)  # (layers, heads)
        layer, head = divmod(int(sharp.argmax()), sharp.shape[1])
        return skipped(name, description, threshold,
                       "no expected pattern named for this model (minitx doctor --expect diagonal or "
                       f"anti-diagonal scores one); sharpest head L{layer + 1} H{head + 1}: mean max "
                       f"weight {float(sharp.max()):.2f}, all heads {float(sharp.mean()):.2f}", WEIGHTS)
    score = _cross_alignment(model, batch, expected)
    if score is None:
        return check_result(name, description, 0.0, threshold, False, "swap-cross",
                            "cross-attention does not attend over the source positions", WEIGHTS)
    detail, cause = "", "undertrained"
    if task.exact_lengths and not isinstance(task, CopyTask):  # a digit task: is it a copy instead?
        diagonal = _cross_alignment(model, batch, CopyTask(task.min_len, task.max_len).alignment(
            batch.src, batch.lengths))
        detail = f"main diagonal {diagonal:.2f}"
        if diagonal > max(score, ALIGNMENT_THRESHOLD):
            cause = "no-reverse"
    if cause == "undertrained" and score < 1.5 / task.max_len:
        cause = "unused-cross"  # about uniform: a symptom of several bugs, not one cause
    return check_result(name, description, score, threshold, score >= ALIGNMENT_THRESHOLD, cause, detail,
                        WEIGHTS)


SATURATED = 0.999  # a row that puts more than this on one key is saturated
SATURATED_SHARE = 0.1  # healthy trained models: at most 0.07 of the rows of any one block


def check_saturated_attention(model: Seq2Seq, task: Task) -> CheckResult:
    """On the task's own examples, the share of attention rows (over at least 4 source keys:
    encoder self-attention and cross-attention) that put more than 0.999 on one key, averaged
    over the blocks. Unscaled scores are sqrt(d_k) times too large and saturate the softmax;
    trained healthy attention is sharp where it must be, but rarely that sharp."""
    name = "saturated-attention"
    description = "on its own data, few attention rows put everything on one key"
    batch = probe_batch(task, 64, seed=SEED + 6)
    device, pad = model.device, model.cfg.pad_id
    src = batch.src.to(device)  # (B, S)
    with eval_mode(model), torch.no_grad():
        _, maps = model(src, batch.decoder_input.to(device), return_attention=True)
    keys = (src != pad).sum(dim=1)  # (B,) source keys of each row
    shares = []
    for weights, queries in ([(w, src != pad) for w in maps.encoder_self]
                             + [(w, batch.labels.to(device) != pad) for w in maps.cross]):
        if weights.shape[-1] != src.shape[1]:  # cross-attention that is not over the source
            continue
        rows = (queries & (keys >= 4)[:, None])[:, None].expand(weights.shape[:-1])  # (B, h, Tq)
        if bool(rows.any()):
            shares.append(float((weights.max(dim=-1).values > SATURATED)[rows].float().mean()))
    if not shares:
        return skipped(name, description, f"< {SATURATED_SHARE:g}", "no source of 4 or more tokens", WEIGHTS)
    share = sum(shares) / len(shares)
    return check_result(name, description, share, f"< {SATURATED_SHARE:g}", share < SATURATED_SHARE,
                        "no-scale", f"{len(shares)} blocks; the most saturated {max(shares):.2f}", WEIGHTS)
