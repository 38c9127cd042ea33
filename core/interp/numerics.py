"""Numerics before they fail: how large each sublayer's activations get against a number format's
range, and each layer's gradient norm.

fp16's largest finite value is 65504: an activation above it becomes inf, and the next
subtraction or 0 * inf (a masked attention weight times an inf value) NaN. T5's feed-forward
outputs grow past it in later layers (transformers issues #5651, #9295, #14189), and
transformers' DebugUnderflowOverflow names the module only after the inf. Measured in the model's
own precision (fp32), the largest |activation| says where fp16 would overflow before any fp16 run:
its headroom is the format's largest value divided by it (below 1: it overflows there). bf16
keeps fp32's exponent (largest value about 3.4e38), so what overflows fp16 fits there.

The points, in forward order, are each sublayer's output before it joins the residual stream
and the stream right after the addition (the sublayer hook, core/model/hooks.py), per stack and
layer: the encoder's self-attention and feed-forward, the decoder's self-attention,
cross-attention and feed-forward. A norm's output is normalised, so it is not a point of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch

from minitx.core.model.hooks import SublayerHook, hooks_active
from minitx.core.model.loss import chunked_cross_entropy
from minitx.core.model.transformer import Seq2Seq, eval_mode
from minitx.core.number_formats import FORMATS, headroom

# Each stack's sublayers in forward order, with the attribute of their connection (a Residual).
SUBLAYERS = {
    "encoder": (("self-attention", "attn_res"), ("feed-forward", "ff_res")),
    "decoder": (("self-attention", "self_res"), ("cross-attention", "cross_res"), ("feed-forward", "ff_res")),
}
RESIDUAL = "residual after "  # the point after a sublayer's addition: "residual after feed-forward"


@dataclass(frozen=True)
class ActivationRange:
    """The largest |activation| at one point of the forward pass."""

    stack: str  # "encoder" or "decoder"
    layer: int  # from 1
    sublayer: str  # "self-attention", ..., or "residual after self-attention", ...
    max: float  # the largest |value| on the batch (inf where the model already overflows)

    def headroom(self, fmt: str = "fp16") -> float:
        """The format's largest value / this point's largest |activation|: below 1, it overflows."""
        return headroom(self.max, fmt)

    def overflows(self, fmt: str = "fp16") -> bool:
        return self.max > FORMATS[fmt]  # inf and NaN-free inf compare as above too

    def to_dict(self) -> dict:
        data = {**asdict(self), **{f"headroom_{fmt}": self.headroom(fmt) for fmt in FORMATS}}
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in data.items()}


@dataclass(frozen=True)
class LayerGradient:
    """The gradient norm of one layer's parameters after a backward pass."""

    stack: str
    layer: int  # from 1
    norm: float  # ||grad|| over the layer's parameters


@dataclass(frozen=True)
class Numerics:
    """One batch's measurements: activations in forward order, gradients per layer, the loss."""

    activations: list[ActivationRange]
    gradients: list[LayerGradient]
    loss: float


def first_overflow(ranges: list[ActivationRange], fmt: str = "fp16") -> ActivationRange | None:
    """The first point, in forward order, whose activations exceed the format's range."""
    return next((r for r in ranges if r.overflows(fmt)), None)


def first_overflow_dict(r: ActivationRange) -> dict:
    """{stack, layer, sublayer, max}: what `doctor --json` says of the first overflow."""
    return {"stack": r.stack, "layer": r.layer, "sublayer": r.sublayer,
            "max": r.max if math.isfinite(r.max) else None}  # JSON has no inf


def _connections(model: Seq2Seq) -> Iterator[tuple[str, int, str, torch.nn.Module]]:
    """(stack, layer from 1, sublayer, its connection) in forward order: the encoder, then the decoder."""
    for stack, layers in (("encoder", model.encoder), ("decoder", model.decoder)):
        for index, layer in enumerate(layers, 1):
            for sublayer, attribute in SUBLAYERS[stack]:
                yield stack, index, sublayer, getattr(layer, attribute)


@contextmanager
def recording_ranges(model: Seq2Seq) -> Iterator[list[ActivationRange]]:
    """Record the largest |activation| at every point of each forward pass run in this block;
    the list fills when the block ends (points in forward order, the maximum over every pass)."""
    found: dict[tuple[str, int, str], torch.Tensor] = {}  # 0-dim maxima, kept on the device

    def keep(key: tuple[str, int, str]):
        def read(x: torch.Tensor, offset: int) -> torch.Tensor:  # x (B, T, d), returned unchanged
            top = x.detach().abs().amax().float()
            found[key] = top if key not in found else torch.maximum(found[key], top)
            return x
        return read

    hooks = {}
    order: list[tuple[str, int, str]] = []
    for stack, layer, sublayer, connection in _connections(model):
        out, res = (stack, layer, sublayer), (stack, layer, RESIDUAL + sublayer)
        order += [out, res]
        hooks[connection] = SublayerHook(output=keep(out), residual=keep(res))
    ranges: list[ActivationRange] = []
    with hooks_active(hooks):
        yield ranges
    # one transfer for all the maxima, not one per point
    values = torch.stack([found[k] for k in order]).tolist() if all(k in found for k in order) else []
    ranges.extend(ActivationRange(*key, max=value) for key, value in zip(order, values))


def layer_gradient_norms(model: Seq2Seq, taken: dict | None = None) -> list[LayerGradient]:
    """Each encoder and decoder layer's gradient norm from the parameters' .grad, or from
    `taken` (parameter -> its gradient's norm, as measure_numerics takes them); a parameter
    without a gradient counts 0. Encoder first."""
    norms = []
    for stack, layers in (("encoder", model.encoder), ("decoder", model.decoder)):
        for index, layer in enumerate(layers, 1):
            if taken is None:
                grads = [p.grad.detach().float().norm() for p in layer.parameters() if p.grad is not None]
            else:
                grads = [taken[p] for p in layer.parameters() if p in taken]
            total = float(torch.stack(grads).norm()) if grads else 0.0
            norms.append(LayerGradient(stack, index, total))
    return norms


def measure_numerics(model: Seq2Seq, src: torch.Tensor, tgt_in: torch.Tensor,
                     labels: torch.Tensor) -> Numerics:
    """One teacher-forced forward and backward pass on src (B, S), tgt_in (B, T), labels (B, T),
    in eval mode (no dropout): each point's largest |activation|, each layer's gradient norm
    of the mean cross-entropy over the non-PAD labels, and that loss. The parameters' gradients
    are what they were before (a run's accumulated gradients are not disturbed). Only the
    layers' parameters get gradients in this pass: the token tables' and the output layer's are
    no layer's (NLLB's table's is a gigabyte, made twice over in backward), so they are left out."""
    in_layers = {id(p) for layers in (model.encoder, model.decoder) for p in layers.parameters()}
    params = [p for p in model.parameters() if p.requires_grad and id(p) in in_layers]
    spared = [p for p in model.parameters() if p.requires_grad and id(p) not in in_layers]
    saved = [p.grad for p in params]
    taken: dict = {}

    def take_norm(p: torch.Tensor) -> None:  # a gradient's norm once it is whole, then dropped: one
        taken[p] = p.grad.detach().float().norm()  # parameter's gradient alive at a time, not a
        p.grad = None  # model's worth (the memory of a big model's fine-tune)

    for p in params:
        p.grad = None
    handles = [p.register_post_accumulate_grad_hook(take_norm) for p in params]
    for p in spared:
        p.requires_grad_(False)
    try:
        with eval_mode(model), torch.enable_grad(), recording_ranges(model) as ranges:
            memory, src_mask = model.encode(src)
            stream = model.decoder_stream(tgt_in, memory, src_mask)  # (B, T, d)
            pad = model.cfg.pad_id  # the mean over the target tokens, padding not
            real = labels != pad  # (B, T): padding gets no logits
            summed = chunked_cross_entropy(stream[real], labels[real], model.stream_logits,
                                           model.cfg.vocab_size, pad)
            loss = summed / real.sum().clamp(min=1)
            if params:  # a model whose weights are all frozen has no gradients to measure
                loss.backward()
        gradients = layer_gradient_norms(model, taken)
    finally:
        for p in spared:
            p.requires_grad_(True)
        for handle in handles:
            handle.remove()
        for p, grad in zip(params, saved):
            p.grad = grad
    return Numerics(ranges, gradients, float(loss.detach()))
