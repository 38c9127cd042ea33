"""Incremental decoding with a KV cache: one new position per step, earlier keys/values reused.

Why this is not the nn.Modules of core/model.py: a cached step at batch 1 is a few dozen tiny
ops, and going through the modules (a call per Linear and LayerNorm, (B, 1, d) views, a mask
rebuilt every step) cost more than the arithmetic. Here a step is flat functional code on the
decoder's weights (Q, K and V stacked once per decode), on (B, d) rows, with the source mask
built once: 0.34 ms per token at batch 1 became 0.18 ms (benchmarks/decode_speed.py). The modules
stay the one definition of the model; tests/core/test_incremental.py holds this file to them for
every configuration (post/pre-norm, relu/gelu, unscaled attention, padded sources, swapped cross).

Inference only: no dropout, and the weights must not change during one decode (the cached keys
and values, and the stacked projections, are computed from the weights at its start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from minitx.core.model import AttentionMaps, DecoderLayer, Seq2Seq, additive_mask, attention


class _Linear(NamedTuple):
    weight_t: torch.Tensor  # (d_in, d_out): transposed once, so a step is a single addmm
    bias: torch.Tensor  # (d_out,)

    @classmethod
    def of(cls, *linears: nn.Linear) -> _Linear:
        """One projection (a view of its weights), or several stacked side by side, a copy, so
        one matmul computes them all."""
        if len(linears) == 1:
            return cls(linears[0].weight.t(), linears[0].bias)
        weight = torch.cat([lin.weight for lin in linears])  # (sum d_out, d_in)
        return cls(weight.t(), torch.cat([lin.bias for lin in linears]))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # (B, d_in) -> (B, d_out)
        return torch.addmm(self.bias, x, self.weight_t)


class _Norm(NamedTuple):
    weight: torch.Tensor
    bias: torch.Tensor
    eps: float

    @classmethod
    def of(cls, norm: nn.LayerNorm) -> _Norm:
        return cls(norm.weight, norm.bias, norm.eps)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # (B, d) -> (B, d)
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


@dataclass
class _LayerState:
    """One decoder layer's weights for this decode, and what it has cached so far."""

    self_qkv: _Linear  # Q, K and V of self-attention stacked: d -> 3d
    self_out: _Linear
    cross_q: _Linear
    cross_kv: _Linear  # K and V of cross-attention stacked: d -> 2d
    cross_out: _Linear
    ff_in: _Linear
    ff_out: _Linear
    norms: tuple[_Norm, _Norm, _Norm]  # self-attention, cross-attention, feed-forward
    cross_reads_decoder: bool  # keys/values from the decoder stream (a bug preset), not the memory
    self_keys_values: torch.Tensor | None = None  # (2, B, h, t, k): K and V, one concat per step
    cross_keys_values: torch.Tensor | None = None  # (2, B, h, S, k) of the memory (or growing, as self)

    @classmethod
    def of(cls, layer: DecoderLayer) -> _LayerState:
        sa, ca = layer.self_attn, layer.cross_attn
        return cls(
            self_qkv=_Linear.of(sa.q_proj, sa.k_proj, sa.v_proj),
            self_out=_Linear.of(sa.out_proj),
            cross_q=_Linear.of(ca.q_proj),
            cross_kv=_Linear.of(ca.k_proj, ca.v_proj),
            cross_out=_Linear.of(ca.out_proj),
            ff_in=_Linear.of(layer.ff[0]),
            ff_out=_Linear.of(layer.ff[-1]),
            norms=tuple(_Norm.of(r.norm) for r in (layer.self_res, layer.cross_res, layer.ff_res)),
            cross_reads_decoder=layer.cross_reads_decoder,
        )


def _appended(cached: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    """cached (2, B, h, t, k) or None, new (B, 2, h, 1, k) -> (2, B, h, t + 1, k)."""
    new = new.transpose(0, 1)  # (2, B, h, 1, k)
    return new if cached is None else torch.cat([cached, new], dim=3)


class IncrementalDecoder:
    """Greedy-decoding state for one batch of sources: step(tokens) feeds the decoder one new
    position per sequence and returns the logits for the next one. Use it under
    torch.inference_mode() or torch.no_grad(), as greedy_decode and the Stepper do."""

    @torch.no_grad()
    def __init__(self, model: Seq2Seq, memory: torch.Tensor, src_mask: torch.Tensor | None) -> None:
        """memory (B, S, d) and src_mask (B, 1, 1, S) or None, as model.encode() returns them."""
        cfg = model.cfg
        self.model = model
        self.position = 0  # decoder positions fed so far
        self._heads, self._d = cfg.n_heads, cfg.d_model
        self._divisor = model.decoder[0].self_attn.score_divisor  # None: sqrt(d_k)
        self._pre_norm = cfg.norm == "pre"
        self._activation = F.relu if cfg.activation == "relu" else F.gelu
        # Token embedding scaled once: (E * sqrt(d))[token] is exactly E[token] * sqrt(d).
        self._embedding = model.tgt_embed.weight * cfg.d_model**0.5  # (V, d)
        self._positional = model.positional if model.use_positions else None  # (max_len, d)
        self._layers = [_LayerState.of(layer) for layer in model.decoder]
        self._final_norm = _Norm.of(model.decoder_norm) if self._pre_norm else None
        self._output = _Linear.of(model.output)
        self._src_mask = src_mask  # bool, for attention weights
        self._src_bias = None if src_mask is None else additive_mask(src_mask, memory.dtype)  # for SDPA
        B, S, d = memory.shape
        for state in self._layers:
            if not state.cross_reads_decoder:  # the memory's keys and values, fixed for the decode
                kv = state.cross_kv(memory.reshape(B * S, d)).view(B, S, 2, self._heads, -1)
                state.cross_keys_values = kv.permute(2, 0, 3, 1, 4).contiguous()  # (2, B, h, S, k)

    def step(self, tokens: torch.Tensor, maps: AttentionMaps | None = None) -> torch.Tensor:
        """tokens (B,) at the next position -> logits (B, V). With `maps`, each layer's attention
        rows for this position go in: decoder_self (B, h, 1, position + 1), cross (B, h, 1, S)."""
        self.model.check_length(self.position + 1)
        y = F.embedding(tokens, self._embedding)  # (B, d)
        if self._positional is not None:
            y = y + self._positional[self.position]
        for state in self._layers:
            y = self._layer_step(state, y, maps)
        self.position += 1
        if self._final_norm is not None:
            y = self._final_norm(y)
        return self._output(y)  # (B, V)

    def _layer_step(self, state: _LayerState, y: torch.Tensor, maps: AttentionMaps | None) -> torch.Tensor:
        B, h = y.shape[0], self._heads
        self_norm, cross_norm, ff_norm = state.norms

        x = self_norm(y) if self._pre_norm else y
        qkv = state.self_qkv(x).view(B, 3, h, 1, -1)  # (B, 3, h, 1, k)
        kv = state.self_keys_values = _appended(state.self_keys_values, qkv[:, 1:])  # (2, B, h, t + 1, k)
        a, self_w = self._attend(qkv[:, 0], kv[0], kv[1], None, None, maps)  # (B, d)
        y = self._residual(y, state.self_out(a), self_norm)

        x = cross_norm(y) if self._pre_norm else y
        q = state.cross_q(x).view(B, h, 1, -1)  # (B, h, 1, k)
        if state.cross_reads_decoder:  # a bug preset: keys/values from the decoder positions so far
            new_kv = state.cross_kv(x).view(B, 2, h, 1, -1)  # (B, 2, h, 1, k)
            kv = state.cross_keys_values = _appended(state.cross_keys_values, new_kv)
            a, cross_w = self._attend(q, kv[0], kv[1], None, None, maps)
        else:
            kv = state.cross_keys_values
            a, cross_w = self._attend(q, kv[0], kv[1], self._src_mask, self._src_bias, maps)
        y = self._residual(y, state.cross_out(a), cross_norm)

        x = ff_norm(y) if self._pre_norm else y
        y = self._residual(y, state.ff_out(self._activation(state.ff_in(x))), ff_norm)
        if maps is not None:
            maps.decoder_self.append(self_w)
            maps.cross.append(cross_w)
        return y

    def _attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        bias: torch.Tensor | None,
        maps: AttentionMaps | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """q (B, h, 1, k) over k/v (B, h, Tk, k) -> (B, d), and the weights (B, h, 1, Tk) when
        maps are wanted (the explicit path; otherwise the fused kernel with the prepared bias)."""
        if maps is not None:
            out, weights = attention(q, k, v, mask, divisor=self._divisor, need_weights=True)
        else:
            scale = None if self._divisor is None else 1.0 / self._divisor
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
            weights = None
        return out.reshape(q.shape[0], self._d), weights

    def _residual(self, y: torch.Tensor, sublayer_out: torch.Tensor, norm: _Norm) -> torch.Tensor:
        """Post-norm LN(y + f), pre-norm y + f; sublayer_out is fresh, so it takes the sum in place."""
        out = sublayer_out.add_(y)
        return out if self._pre_norm else norm(out)
