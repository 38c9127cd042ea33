"""Attention as a function: masks, the score fill value, grouped K/V heads and softmax(QK^T)V
(explicit, returning weights, or one fused kernel). The modules of core/model/transformer.py and the KV
cache of core/model/kv_cache.py both compute attention here, and an intervention's weight edit
(core/model/hooks.py) applies here for both.

Shapes: B batch, h query heads, g K/V heads, Tq queries, Tk keys, k d_k.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from minitx.core.model.hooks import WeightsEdit

# ---------------------------------------------------------------------------------------------
# Masks (True = this key may be attended to). Always built from the tensors at hand, never cached:
# reusing a mask made for another length is a classic bug.


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, S) -> (B, 1, 1, S): True where the key is a real token."""
    return (tokens != pad_id)[:, None, None, :]


def padding_mask_or_none(tokens: torch.Tensor, pad_id: int) -> torch.Tensor | None:
    """padding_mask(), or None when no position is padding: attention then skips masking, and
    the fused kernel runs its unmasked (or is_causal) path, the fastest (one sync on a GPU)."""
    mask = padding_mask(tokens, pad_id)
    return None if bool(mask.all()) else mask


def causal_mask(length: int, device: torch.device | None = None) -> torch.Tensor:
    """-> (1, 1, T, T): lower-triangular, query i may see keys 0..i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]


def masked_fill_value(dtype: torch.dtype) -> float:
    """A large finite negative for masked scores: -1e9, or half the most negative float16 value.

    Finite so a fully masked row softmaxes to uniform instead of NaN; halved so adding a score
    to it cannot overflow float16 to -inf.
    """
    return max(-1e9, torch.finfo(dtype).min / 2)


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Boolean mask (True = allowed) -> the same shape in `dtype`: 0 where allowed, a large
    negative where not. What the fused kernel takes; building it once per decode, not per
    step, is part of what keeps a cached decoding step cheap."""
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, masked_fill_value(dtype))


# ---------------------------------------------------------------------------------------------
# Attention


def shared_heads(kv: torch.Tensor, heads: int) -> torch.Tensor:
    """K or V (B, g, T, k) -> (B, h, T, k) for h query heads: with grouped-query attention each
    of the g heads serves h / g query heads in a row (query head j reads K/V head j // (h / g))."""
    group = heads // kv.shape[1]
    return kv if group == 1 else kv.repeat_interleave(group, dim=1)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    causal: bool = False,
    dropout: float = 0.0,
    divisor: float | None = None,
    fused: bool = False,
    need_weights: bool = False,
    edit_weights: WeightsEdit | None = None,
    offset: int = 0,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q k^T / divisor + bias) v over the key axis; the divisor is sqrt(d_k) unless given,
    bias (broadcastable to (B, h, Tq, Tk)) is added to the scores when given (T5's relative
    positions).

    q (B, h, Tq, k), k/v (B, g, Tk, k) with g dividing h (shared_heads), mask broadcastable to
    (B, h, Tq, Tk), True = allowed; causal (self-attention, Tq == Tk) also hides from query i
    every key after i. Returns every query head's output (B, h, Tq, k) and, when asked, its
    weights (B, h, Tq, Tk) before dropout: the one place both exist, per head, before the heads
    are merged. The fused path (scaled_dot_product_attention) is used only when weights are not
    needed. edit_weights (a pattern override, core/model/hooks.py) replaces the weights after the
    softmax; offset is the position of the first query row, which it may need.
    """
    k, v = shared_heads(k, q.shape[1]), shared_heads(v, q.shape[1])  # (B, h, Tk, k)
    if fused and not need_weights and edit_weights is None:
        score_bias, is_causal = bias, causal
        if mask is not None or (causal and bias is not None):  # one additive bias carries them all
            if causal:
                tril = causal_mask(q.shape[-2], q.device)
                mask, is_causal = (tril if mask is None else mask & tril), False
            masked = additive_mask(mask, q.dtype)
            score_bias = masked if bias is None else masked + bias
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=score_bias, dropout_p=dropout, is_causal=is_causal,
            scale=None if divisor is None else 1.0 / divisor,
        )
        return out, None
    if causal:
        tril = causal_mask(q.shape[-2], q.device)  # (1, 1, Tq, Tq)
        mask = tril if mask is None else mask & tril
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    scores = q @ k.transpose(-2, -1) / divisor  # (B, h, Tq, Tk)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, masked_fill_value(q.dtype))
    weights = scores.softmax(dim=-1)
    if edit_weights is not None:
        weights = edit_weights(weights, mask, offset)
    dropped = F.dropout(weights, p=dropout) if dropout > 0 else weights
    return dropped @ v, (weights if need_weights else None)
