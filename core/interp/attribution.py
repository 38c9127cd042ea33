"""Attribution patching: the fast, linear estimate of activation patching, and how far to trust it.

Patching one activation a from the clean run into the corrupted run changes the logit difference
by LD(corrupted with a_clean) - LD(corrupted). Attribution estimates every such change at once
from one clean forward, one corrupted forward and one backward:

    effect(a) ~ (a_clean - a_corrupted) . dLD/da   (the gradient taken in the corrupted run)

divided by LD_clean - LD_corrupted, so it reads as the recovered fraction of core/interp/patching.py.
It is exact when LD is linear in a along the way, and fails when the change is large for the
nonlinearities after a, above all a softmax that saturates (a head whose attention sits on one
key has almost no gradient towards the others).

For what a cross-attention head reads (its key/value input, its query input) the estimate can
avoid that failure: the "QK fix" (after AtP*, Kramar et al. 2024) recomputes the head's
attention exactly, softmax included, with the clean input, and linearises only from the head's
output on. minitx gives both estimates for those inputs; head outputs and residual streams have
no attention of their own to recompute, so theirs is the plain estimate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from minitx.core.interp.interventions import SIDES, Head, HeadInput, Interventions, Recording, all_heads
from minitx.core.interp.patching import Patcher, streams_of
from minitx.core.model.attention import attention, padding_mask_or_none
from minitx.core.model.transformer import eval_mode

SATURATED = 0.9  # a head whose top attention weight averages at least this is called saturated


@dataclass
class Attribution:
    """Estimated recovered fractions, named as PatchingResult names the exact ones."""

    heads: dict[str, float] = field(default_factory=dict)  # "cross:L2.H1" -> estimate
    streams: dict[str, list[float]] = field(default_factory=dict)  # "enc:L1.resid" -> per position
    inputs: dict[str, float] = field(default_factory=dict)  # "cross:L2.H1 K/V" -> plain estimate
    inputs_qk: dict[str, float] = field(default_factory=dict)  # the same with the QK fix
    saturation: dict[str, float] = field(default_factory=dict)  # cross head -> mean top weight

    @property
    def stream_all(self) -> dict[str, float]:
        """Every position at once: linear, so the sum of the positions' estimates."""
        return {name: sum(values) for name, values in self.streams.items()}

    def saturated(self) -> list[str]:
        return [name for name, top in self.saturation.items() if top >= SATURATED]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Agreement:
    """How an estimate matches exact patching over the same activations."""

    r: float | None  # Pearson correlation; None when either side does not vary
    count: int
    apart: list[tuple[str, float, float]]  # (name, exact, estimate), the largest gap first

    def to_dict(self) -> dict:
        return {"r": self.r, "count": self.count,
                "apart": [{"name": n, "exact": e, "estimate": a} for n, e, a in self.apart]}


def pearson(xs: list[float], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx < 1e-12 or syy < 1e-12:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(sxx * syy)


def agreement(exact: dict[str, float], estimate: dict[str, float], top: int = 3) -> Agreement:
    names = [n for n in exact if n in estimate]
    xs, ys = [exact[n] for n in names], [estimate[n] for n in names]
    apart = sorted(zip(names, xs, ys), key=lambda t: -abs(t[1] - t[2]))[:top]
    return Agreement(pearson(xs, ys), len(names), apart)


def flat_streams(streams: dict[str, list[float]]) -> dict[str, float]:
    """{"enc:L1.resid": [per position]} -> {"enc:L1.resid@0": value, ...} (to compare)."""
    return {f"{name}@{p}": v for name, values in streams.items() for p, v in enumerate(values)}


def agreements(exact, estimate: Attribution) -> dict[str, Agreement]:
    """A PatchingResult against the estimate of the same pair: heads, stream positions, and the
    cross-attention inputs with the plain estimate and with the QK fix."""
    return {"heads": agreement(exact.heads, estimate.heads),
            "streams": agreement(flat_streams(exact.streams), flat_streams(estimate.streams)),
            "inputs": agreement(exact.inputs, estimate.inputs),
            "inputs_qk": agreement(exact.inputs, estimate.inputs_qk)}


def attribute(patcher: Patcher) -> Attribution:
    """Every head's output, every residual stream at each position, and each cross-attention
    head's two inputs, estimated from one corrupted forward and one backward (the clean forward
    is the Patcher's)."""
    model = patcher.model
    record = Recording(inputs=True)
    with eval_mode(model), torch.enable_grad(), Interventions(record=record).applied(model):
        logits, maps = model(patcher.source("corrupted"), patcher.decoder_input, return_attention=True)
        difference = patcher.difference_tensor(logits)
    heads, streams = all_heads(model), streams_of(model)
    cross_layers = range(len(model.decoder))
    # A full forward records each block once: the tensors themselves, which the backward reaches.
    outputs = {(k, la): record.outputs[(k, la)][0] for k, la in {(h.kind, h.layer) for h in heads}}
    stream_values = {(s.stack, s.layer): record.streams[(s.stack, s.layer)][0] for s in streams}
    reads = {(la, side): record.read[("cross", la, side)] for la in cross_layers for side in SIDES}
    wanted = [*outputs.values(), *stream_values.values(), *reads.values()]
    names = [*(("head", *k) for k in outputs), *(("stream", *k) for k in stream_values),
             *(("read", *k) for k in reads)]
    grads = dict(zip(names, torch.autograd.grad(difference, wanted, allow_unused=True)))
    scale = patcher.clean_difference - patcher.corrupted_difference
    clean = patcher.recording
    result = Attribution()

    def estimate(delta: torch.Tensor, grad: torch.Tensor | None) -> float:
        return 0.0 if grad is None else float((delta * grad).sum()) / scale

    with torch.no_grad():
        for head in heads:
            key = (head.kind, head.layer)
            delta = clean.head_outputs(*key)[:, head.head] - outputs[key][:, head.head]  # (B, T, k)
            grad = grads[("head", *key)]
            result.heads[str(head)] = estimate(delta, None if grad is None else grad[:, head.head])
        for stream in streams:
            key = (stream.stack, stream.layer)
            delta = clean.stream(*key) - stream_values[key]  # (B, T, d)
            grad = grads[("stream", *key)]
            result.streams[str(stream)] = [estimate(delta[:, p], None if grad is None else grad[:, p])
                                           for p in range(delta.shape[1])]
        real = (patcher.batch.clean_answer != model.cfg.pad_id).to(model.device)  # (B, T)
        for layer in cross_layers:
            exact_outputs = _cross_outputs_with_clean_inputs(patcher, record, layer)
            corrupted_out = outputs[("cross", layer)]  # (B, h, T, k)
            out_grad = grads[("head", "cross", layer)]
            top = maps.cross[layer].detach().max(dim=-1).values  # (B, h, T)
            for h in range(model.cfg.n_heads):
                head = Head("cross", layer, h)
                result.saturation[str(head)] = float(top[:, h][real].mean())
                for side in SIDES:
                    name = str(HeadInput(head, side))
                    grad = grads[("read", layer, side)]
                    delta = clean.head_input(HeadInput(head, side)) - reads[(layer, side)][:, h]
                    result.inputs[name] = estimate(delta, None if grad is None else grad[:, h])
                    result.inputs_qk[name] = estimate(exact_outputs[side][:, h] - corrupted_out[:, h],
                                                      None if out_grad is None else out_grad[:, h])
    return result


def _cross_outputs_with_clean_inputs(patcher: Patcher, corrupted: Recording, layer: int) -> dict:
    """side -> (B, h, T, k): every head of decoder layer `layer`'s cross-attention computed
    exactly, softmax included, with that side's input from the clean run and the other side's
    from the corrupted run (the QK fix: nothing linearised inside the head)."""
    model = patcher.model
    block = model.decoder[layer].cross_attn
    reads_decoder = model.decoder[layer].cross_reads_decoder  # a bug preset: keys from the decoder
    keys_from = patcher.decoder_input if reads_decoder else patcher.source("clean")
    pad = model.cfg.pad_id if reads_decoder else model.cfg.source_pad_id  # a source has its own PAD
    mask = padding_mask_or_none(keys_from, pad)  # (B, 1, 1, Tk) or None
    clean = patcher.recording
    inputs = {("clean", side): clean.read[("cross", layer, side)][:, 0] for side in SIDES}
    inputs |= {("corrupted", side): corrupted.read[("cross", layer, side)][:, 0].detach() for side in SIDES}
    out = {}
    with eval_mode(model):
        for side in SIDES:
            q_from = "clean" if side == "q" else "corrupted"
            kv_from = "clean" if side == "kv" else "corrupted"
            q = block.queries(inputs[(q_from, "q")])  # (B, h, T, k)
            k, v = block.keys_values(inputs[(kv_from, "kv")])
            out[side], _ = attention(q, k, v, mask, causal=reads_decoder and model.causal,
                                     divisor=block.score_divisor)
    return out
