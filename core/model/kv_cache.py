"""Incremental decoding with a KV cache: one new position per step, earlier keys/values reused.

Why this is not the nn.Modules of core/model/transformer.py: a cached step at batch 1 is a few dozen
tiny ops, and going through the modules (a call per Linear and LayerNorm, (B, 1, d) views, a mask
rebuilt every step) costs more than the arithmetic (docs/performance.md has the figures). Here a
step is flat functional code on the decoder's weights (Q, K and V stacked once per decode while
that copy is small), on (B, d) rows, with the source mask built once. The modules stay the one
definition of the model; tests/core/test_incremental.py holds this file to them for every
configuration (post/pre-norm,
LayerNorm/RMSNorm/the std norm, final norms after a post-norm stack, relu/gelu/SwiGLU, every
position encoding, grouped-query attention, unscaled attention, padded sources, separate source
vocabularies, a log-softmax output, swapped cross, a relative bias per layer, a decoder
feed-forward of its own width).

The variants act here as they do in the modules, through the same functions
(core/model/components.py): RoPE turns the new query and key by the position being fed (the cached
length), keys are cached turned and values never are; grouped-query attention caches g K/V heads,
not h, and shares them out (shared_heads) only when attending.

Inference only: no dropout, and the weights must not change during one decode (the cached keys and
values, and the stacked projections, are computed from the weights at its start).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from minitx.core.model import lora
from minitx.core.model.attention import additive_mask, attention, shared_heads
from minitx.core.model.components import (
    GatedFeedForward,
    RelativePositionBias,
    RMSNorm,
    StdNorm,
    activation_function,
    gated,
    rms_norm,
    rotary_angles,
    rotate_pairs,
    std_norm,
)
from minitx.core.model.hooks import (
    HeadHook,
    StreamEdit,
    embedding_hook,
    head_hook,
    stream_hook,
    sublayer_hook,
)
from minitx.core.model.transformer import AttentionMaps, DecoderLayer, Seq2Seq

# Several projections read by one step (Q, K and V; cross-attention's K and V; SwiGLU's two) are
# stacked into one copy only while the copy is small: at batch 1 a small model's step is call
# overhead, which one matmul saves, while a big model's step is reading its weights, and a copy
# of an NLLB-1.3B decoder's would cost 480 MB of every decode and save nothing measurable.
STACK_BYTES = 4 * 2**20


class _Linear(NamedTuple):
    weight_t: torch.Tensor  # (d_in, d_out): transposed once, so a step is a single addmm
    bias: torch.Tensor | None  # (d_out,), or None: a model without biases (T5)

    @classmethod
    def of(cls, *linears: nn.Module) -> _Linear | _Adapted | _Parts:
        """One projection (a view of its weights; with its LoRA adapter, _Adapted); several side
        by side as one stacked copy (one matmul computes them all) while that is under
        STACK_BYTES and none is adapted, else each on its own (_Parts)."""
        if len(linears) == 1:
            linear = linears[0]
            plain = cls(linear.weight.t(), linear.bias)
            adapter = lora.low_rank(linear)
            return plain if adapter is None else _Adapted(plain, adapter[0].t(), adapter[1].t(), adapter[2])
        if sum(lin.weight.numel() * lin.weight.element_size() for lin in linears) > STACK_BYTES \
                or any(lora.low_rank(lin) is not None for lin in linears):
            return _Parts(tuple(cls.of(lin) for lin in linears))
        weight = torch.cat([lin.weight for lin in linears])  # (sum d_out, d_in)
        biased = linears[0].bias is not None
        return cls(weight.t(), torch.cat([lin.bias for lin in linears]) if biased else None)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # (B, d_in) -> (B, d_out)
        if self.bias is None:
            return x @ self.weight_t
        return torch.addmm(self.bias, x, self.weight_t)


class _Adapted(NamedTuple):
    """A projection with its LoRA adapter (core/model/lora.py): x W^T + ((x A^T) B^T) scale, as
    peft's forward computes it, with no merged copy of W."""

    base: _Linear
    a_t: torch.Tensor  # (d_in, r)
    b_t: torch.Tensor  # (r, d_out)
    scale: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # (B, d_in) -> (B, d_out)
        return self.base(x) + ((x.to(self.a_t.dtype) @ self.a_t) @ self.b_t) * self.scale


class _Parts(NamedTuple):
    """Projections side by side without copying their weights: _Linear's stacked output, made
    by one matmul each."""

    parts: tuple[_Linear | _Adapted, ...]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # (B, d_in) -> (B, sum d_out)
        return torch.cat([part(x) for part in self.parts], dim=-1)


class _Norm(NamedTuple):
    kind: str  # "layer", "rms" or "std", as ModelConfig.norm_kind
    weight: torch.Tensor
    bias: torch.Tensor | None  # None: RMSNorm
    eps: float

    @classmethod
    def of(cls, norm: nn.LayerNorm | RMSNorm | StdNorm) -> _Norm:
        if isinstance(norm, RMSNorm):
            return cls("rms", norm.weight, None, norm.eps)
        return cls("std" if isinstance(norm, StdNorm) else "layer", norm.weight, norm.bias, norm.eps)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # (B, d) -> (B, d)
        if self.kind == "rms":
            return rms_norm(x, self.weight, self.eps)
        if self.kind == "std":
            return std_norm(x, self.weight, self.bias, self.eps)
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


@dataclass
class _LayerState:
    """One decoder layer's weights for this decode, and what it has cached so far."""

    self_qkv: _Linear | _Adapted | _Parts  # Q, K and V of self-attention side by side: d -> h k + 2 g k
    self_out: _Linear | _Adapted
    cross_q: _Linear | _Adapted
    cross_kv: _Linear | _Adapted | _Parts  # K and V of cross-attention side by side: d -> 2 g k
    cross_out: _Linear | _Adapted
    ff_in: _Linear | _Adapted | _Parts  # W1 (with SwiGLU, W1 and W3 side by side: d -> 2f)
    ff_out: _Linear | _Adapted
    norms: tuple[_Norm, _Norm, _Norm]  # self-attention, cross-attention, feed-forward
    cross_reads_decoder: bool  # keys/values from the decoder stream (a bug preset), not the memory
    # Interventions active when the decode began (core/model/hooks.py), the modules' own hooks.
    self_hook: HeadHook | None
    cross_hook: HeadHook | None
    stream_hook: StreamEdit | None
    own_bias: RelativePositionBias | None  # the layer's own relative positions (UMT5), else None
    self_keys_values: torch.Tensor | None = None  # (2, B, g, t, k): K and V, one concat per step
    cross_keys_values: torch.Tensor | None = None  # (2, B, g, S, k) of the memory (or growing, as self)

    @classmethod
    def of(cls, layer: DecoderLayer) -> _LayerState:
        sa, ca, ff = layer.self_attn, layer.cross_attn, layer.ff
        if any(hook is not None and hook.edits_inputs for hook in (head_hook(sa), head_hook(ca))):
            raise ValueError("a head's own query or key/value input acts in full forwards only, "
                             "not in cached decoding")
        if any(sublayer_hook(r) is not None for r in (layer.self_res, layer.cross_res, layer.ff_res)):
            raise ValueError("a hook on a decoder sublayer's output acts in full forwards only, "
                             "not in cached decoding")
        is_gated = isinstance(ff, GatedFeedForward)
        return cls(
            self_qkv=_Linear.of(sa.q_proj, sa.k_proj, sa.v_proj),
            self_out=_Linear.of(sa.out_proj),
            cross_q=_Linear.of(ca.q_proj),
            cross_kv=_Linear.of(ca.k_proj, ca.v_proj),
            cross_out=_Linear.of(ca.out_proj),
            ff_in=_Linear.of(ff.w1, ff.w3) if is_gated else _Linear.of(ff[0]),
            ff_out=_Linear.of(ff.w2 if is_gated else ff[-1]),
            norms=tuple(_Norm.of(r.norm) for r in (layer.self_res, layer.cross_res, layer.ff_res)),
            cross_reads_decoder=layer.cross_reads_decoder,
            self_hook=head_hook(sa),
            cross_hook=head_hook(ca),
            stream_hook=stream_hook(layer),
            own_bias=layer.position_bias,
        )


def _appended(cached: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    """cached (2, B, g, t, k) or None, new (B, 2, g, 1, k) -> (2, B, g, t + 1, k)."""
    new = new.transpose(0, 1)  # (2, B, g, 1, k)
    return new if cached is None else torch.cat([cached, new], dim=3)


class IncrementalDecoder:
    """Greedy-decoding state for one batch of sources: step(tokens) feeds the decoder one new
    position per sequence and returns the logits for the next one. Use it under
    torch.inference_mode() or torch.no_grad(), as greedy_decode and the Stepper do.

    The interventions active when it is created (core/model/hooks.py) apply to every step, so create it
    where they are active, as the model's encode() must run there too."""

    @torch.no_grad()
    def __init__(self, model: Seq2Seq, memory: torch.Tensor, src_mask: torch.Tensor | None) -> None:
        """memory (B, S, d) and src_mask (B, 1, 1, S) or None, as model.encode() returns them."""
        cfg = model.cfg
        if embedding_hook(model.tgt_embed) is not None:
            raise ValueError("a hook on the target's token vectors acts in full forwards only, not in "
                             "cached decoding")
        self.model = model
        self.position = 0  # decoder positions fed so far
        self._heads, self._kv_heads, self._d_k = cfg.n_heads, cfg.kv_heads, cfg.d_k
        self._width = cfg.attention_width  # h k: the query heads side by side
        self._divisor = model.decoder[0].self_attn.score_divisor  # None: sqrt(d_k)
        self._pre_norm = cfg.norm == "pre"
        self._activation = _gated(cfg.activation) if isinstance(model.decoder[0].ff, GatedFeedForward) \
            else activation_function(cfg.activation)
        self._embedding = model.tgt_embed.weight  # (V, d)
        # Each step scales its looked-up rows, as the modules do: scaling the whole table once
        # copied it (V x d: 119 MB and 0.07-0.1 s of each decode of an opus-mt-sized model).
        self._embed_scale = math.sqrt(cfg.d_model) if cfg.embed_scale else None
        self._positional = model.position_table("tgt")  # (max_len, d), or None
        self._embed_norm = _Norm.of(model.tgt_embed_norm) if cfg.embedding_norm else None
        self._relative = cfg.position_encoding == "relative"
        self._scale_output = cfg.d_model**-0.5 if cfg.scale_output else None
        self._rope = cfg.position_encoding == "rope"
        self._rotary: tuple[torch.Tensor, torch.Tensor] | None = None  # (cos, sin) (n, k), grown as needed
        self._layers = [_LayerState.of(layer) for layer in model.decoder]
        self._final_norm = _Norm.of(model.decoder_norm) if cfg.with_final_norms else None
        self._log_softmax = cfg.log_softmax
        self._output = _Linear.of(model.output)
        self._src_mask = src_mask  # bool, for attention weights
        self._src_bias = None if src_mask is None else additive_mask(src_mask, memory.dtype)  # for SDPA
        B, S, d = memory.shape
        for state in self._layers:
            if not state.cross_reads_decoder:  # the memory's keys and values, fixed for the decode
                kv = state.cross_kv(memory.reshape(B * S, d)).view(B, S, 2, self._kv_heads, -1)
                state.cross_keys_values = kv.permute(2, 0, 3, 1, 4).contiguous()  # (2, B, g, S, k)

    def step(self, tokens: torch.Tensor, maps: AttentionMaps | None = None) -> torch.Tensor:
        """tokens (B,) at the next position -> logits (B, V). With `maps`, each layer's attention
        rows for this position go in: decoder_self (B, h, 1, position + 1), cross (B, h, 1, S)."""
        self.model.check_length(self.position + 1)
        y = F.embedding(tokens, self._embedding)  # (B, d)
        if self._embed_scale is not None:
            y = y * self._embed_scale
        if self._positional is not None:
            y = y + self._positional[self.position]
        if self._embed_norm is not None:
            y = self._embed_norm(y)
        rotary = self._rotary_at(self.position, y.device) if self._rope else None
        # T5: this position's query over every key so far, (1, h, 1, position + 1), for all layers
        bias = self.model.position_bias("tgt", 1, self.position + 1, self.position) if self._relative \
            else None  # (None where each layer has its own: UMT5)
        for state in self._layers:
            if state.own_bias is not None:  # (1, h, 1, position + 1), this layer's own table
                bias = state.own_bias(1, self.position + 1, self.position)
            y = self._layer_step(state, y, maps, rotary, bias)
            if state.stream_hook is not None:
                y = state.stream_hook(y[:, None], self.position)[:, 0]  # (B, d) as (B, 1, d)
        self.position += 1
        if self._final_norm is not None:
            y = self._final_norm(y)
        if self._scale_output is not None:
            y = y * self._scale_output
        logits = self._output(y)  # (B, V)
        return logits.log_softmax(dim=-1) if self._log_softmax else logits

    def select(self, rows: torch.Tensor) -> None:
        """Keep the cached rows `rows` (N,) in that order: beam search's reorder, each kept
        hypothesis continuing its parent's keys and values. The rows are one source's hypotheses,
        so the memory's cross keys and values (the same in every row) stay."""
        for state in self._layers:
            state.self_keys_values = state.self_keys_values.index_select(1, rows)  # (2, N, g, t, k)
            if state.cross_reads_decoder:
                state.cross_keys_values = state.cross_keys_values.index_select(1, rows)

    def _rotary_at(self, position: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (1, k) of one position. The table is computed for 64 positions at a time,
        so a step reads a row instead of computing angles, and no config can make it large."""
        if self._rotary is None or position >= self._rotary[0].shape[0]:
            end = 64 * (position // 64 + 1)
            self._rotary = rotary_angles(torch.arange(end, device=device), self._d_k)  # (end, k) each
        cos, sin = self._rotary
        return cos[position : position + 1], sin[position : position + 1]

    def _layer_step(self, state: _LayerState, y: torch.Tensor, maps: AttentionMaps | None,
                    rotary: tuple[torch.Tensor, torch.Tensor] | None,
                    bias: torch.Tensor | None) -> torch.Tensor:
        B, h, g = y.shape[0], self._heads, self._kv_heads
        self_norm, cross_norm, ff_norm = state.norms

        x = self_norm(y) if self._pre_norm else y
        qkv = state.self_qkv(x)  # (B, h k + 2 g k): Q, then K and V
        q = qkv[:, : self._width].view(B, h, 1, -1)  # (B, h, 1, k)
        new_kv = qkv[:, self._width :].view(B, 2, g, 1, -1)  # (B, 2, g, 1, k)
        if rotary is not None:  # this position's turn, for the query and the key it caches
            q = rotate_pairs(q, *rotary)
            new_kv = torch.stack((rotate_pairs(new_kv[:, 0], *rotary), new_kv[:, 1]), dim=1)
        kv = state.self_keys_values = _appended(state.self_keys_values, new_kv)  # (2, B, g, t + 1, k)
        a, self_w = self._attend(q, kv[0], kv[1], None, bias, maps, state.self_hook, bias)  # (B, h k)
        y = self._residual(y, state.self_out(a), self_norm)

        x = cross_norm(y) if self._pre_norm else y
        q = state.cross_q(x).view(B, h, 1, -1)  # (B, h, 1, k)
        if state.cross_reads_decoder:  # a bug preset: keys/values from the decoder positions so far
            new_kv = state.cross_kv(x).view(B, 2, g, 1, -1)  # (B, 2, g, 1, k)
            kv = state.cross_keys_values = _appended(state.cross_keys_values, new_kv)
            a, cross_w = self._attend(q, kv[0], kv[1], None, None, maps, state.cross_hook, None)
        else:
            kv = state.cross_keys_values
            a, cross_w = self._attend(q, kv[0], kv[1], self._src_mask, self._src_bias, maps,
                                      state.cross_hook, None)
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
        hook: HeadHook | None,
        score_bias: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """q (B, h, 1, k) over k/v (B, g, Tk, k) -> (B, h k), and the weights (B, h, 1, Tk) when
        maps are wanted (the explicit path; otherwise the fused kernel with the prepared bias:
        the source mask's, or the relative positions' score_bias, never both). Every query head's
        output (B, h, 1, k) and weights exist here, before the heads merge; a hook edits them
        exactly as in the modules' forward."""
        if hook is not None:
            out, weights = attention(q, k, v, mask, divisor=self._divisor, need_weights=True,
                                     edit_weights=hook.weights, offset=self.position, bias=score_bias)
            if hook.output is not None:
                out = hook.output(out, self.position)  # (B, h, 1, k)
        elif maps is not None:
            out, weights = attention(q, k, v, mask, divisor=self._divisor, need_weights=True,
                                     bias=score_bias)
        else:
            scale = None if self._divisor is None else 1.0 / self._divisor
            heads = q.shape[1]
            out = F.scaled_dot_product_attention(q, shared_heads(k, heads), shared_heads(v, heads),
                                                 attn_mask=bias, scale=scale)
            weights = None
        return out.reshape(q.shape[0], self._width), weights

    def _residual(self, y: torch.Tensor, sublayer_out: torch.Tensor, norm: _Norm) -> torch.Tensor:
        """Post-norm LN(y + f), pre-norm y + f; sublayer_out is fresh, so it takes the sum in place."""
        out = sublayer_out.add_(y)
        return out if self._pre_norm else norm(out)


def _gated(activation: str):
    """A gated block's step: (B, 2f), W1 x and W3 x side by side (one stacked matmul) ->
    act(W1 x) * W3 x (B, f)."""

    def step(hidden: torch.Tensor) -> torch.Tensor:
        gate, up = hidden.chunk(2, dim=-1)
        return gated(gate, up, activation)

    return step
