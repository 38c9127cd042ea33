"""Hook points: the few places where an intervention may read or change what the model computes.

Two kinds, each named by the module it sits in, the same in the full forward (core/model/transformer.py) and
in cached decoding (core/model/kv_cache.py), so one intervention behaves identically in both:
- a head hook at every attention block: `weights` may replace the attention weights (B, h, Tq, Tk)
  after the softmax, `output` may change the per-head outputs (B, h, Tq, d_k) before they are
  concatenated and projected;
- a stream hook after every encoder and decoder layer: it may read or replace the residual
  stream (B, T, d) that leaves the layer;
- an embedding hook on each token embedding table (the source's and the target's): it may read
  or replace the looked-up token vectors (B, T, d) before they are scaled and positions are added,
  which makes them the input of gradient-based attribution (core/interp);
- a sublayer hook at every sublayer connection (core/model/transformer.py's Residual): `output`
  may read or replace what the sublayer (self-attention, cross-attention, feed-forward) hands
  the residual stream (B, T, d), `residual` the stream right after the addition (B, T, d),
  before a post-norm model's norm: where activations grow past a number format's range
  (core/interp/numerics.py). It acts in full forwards (the KV cache refuses it);
- the head hook's input parts: `query_input` may give each query head its own input (B, h, T, d)
  for the query projection, `key_value_input` the same for the key and value projections (what
  path patching replaces); they act in full forwards (the KV cache refuses them).
`offset` is the position of the first query row: 0 in a full forward, the step in cached decoding.

Which hooks are active is a context variable, not a model attribute: a thread that ablates a head
(the app's importance worker) never changes what another thread's decode of the same model sees.
core/interp/interventions.py builds the hooks; nothing here knows what they do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import nn

WeightsEdit = Callable[[torch.Tensor, "torch.Tensor | None", int], torch.Tensor]  # (w, mask, offset)
OutputEdit = Callable[[torch.Tensor, int], torch.Tensor]  # (out, offset)
StreamEdit = Callable[[torch.Tensor, int], torch.Tensor]  # (x, offset)
# (x (B, T, d), offset) -> (B, h, T, d): what each query head's projection reads, or None: x itself
InputEdit = Callable[[torch.Tensor, int], "torch.Tensor | None"]


@dataclass(frozen=True)
class HeadHook:
    """What one attention block's hook does; any part may be None."""

    weights: WeightsEdit | None = None  # (B, h, Tq, Tk), mask (True = allowed) or None -> weights
    output: OutputEdit | None = None  # (B, h, Tq, d_k) -> the same shape
    query_input: InputEdit | None = None  # the queries' input (B, Tq, d) -> per head (B, h, Tq, d)
    key_value_input: InputEdit | None = None  # the keys' and values' input (B, Tk, d) -> (B, h, Tk, d)

    @property
    def edits_inputs(self) -> bool:
        return self.query_input is not None or self.key_value_input is not None


@dataclass(frozen=True)
class SublayerHook:
    """What one sublayer connection's hook does; either part may be None."""

    output: StreamEdit | None = None  # the sublayer's output (B, T, d), before it joins the stream
    residual: StreamEdit | None = None  # the stream after the addition (B, T, d)


# id(module) -> its hook: attention blocks map to HeadHook, sublayer connections to SublayerHook,
# layers and embedding tables to a StreamEdit.
_ACTIVE: ContextVar[dict[int, object] | None] = ContextVar("minitx_hooks", default=None)


def head_hook(attention_block: nn.Module) -> HeadHook | None:
    """The hook at this attention block in the current context, or None (the usual case)."""
    active = _ACTIVE.get()
    return active.get(id(attention_block)) if active else None  # type: ignore[return-value]


def stream_hook(layer: nn.Module) -> StreamEdit | None:
    """The hook on the residual stream leaving this layer, or None."""
    active = _ACTIVE.get()
    return active.get(id(layer)) if active else None  # type: ignore[return-value]


def sublayer_hook(connection: nn.Module) -> SublayerHook | None:
    """The hook at this sublayer connection (a Residual), or None."""
    active = _ACTIVE.get()
    return active.get(id(connection)) if active else None  # type: ignore[return-value]


def embedding_hook(table: nn.Module) -> StreamEdit | None:
    """The hook on the token vectors this embedding table looks up, or None."""
    active = _ACTIVE.get()
    return active.get(id(table)) if active else None  # type: ignore[return-value]


def current_hooks() -> dict[int, object] | None:
    """The hooks active here, to activate again later (a decoder that steps outside the block
    where it was made: core/interp/decode.py's FullForwardDecoder)."""
    return _ACTIVE.get()


@contextmanager
def hooks_restored(captured: dict[int, object] | None) -> Iterator[None]:
    """Exactly the hooks `current_hooks()` returned, for this block."""
    token = _ACTIVE.set(captured)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@contextmanager
def hooks_active(hooks: dict[nn.Module, object]) -> Iterator[None]:
    """Activate hooks {module: HeadHook, SublayerHook or StreamEdit} for this block, on top of any already
    active (two models in one comparison each keep their own)."""
    token = _ACTIVE.set({**(_ACTIVE.get() or {}), **{id(m): h for m, h in hooks.items()}})
    try:
        yield
    finally:
        _ACTIVE.reset(token)
