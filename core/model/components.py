"""The swappable parts of a layer: norms, feed-forward blocks and position encodings.

Each ModelConfig switch chooses one of them (docs/components.md has the formulas and what each
swap changes): `norm_kind` LayerNorm, RMSNorm or the Annotated Transformer's std-based
LayerNorm (docs/import.md), `activation` a ReLU/GELU/SiLU MLP or a gated block (SwiGLU, GEGLU),
`position_encoding` sinusoids, learned tables, rotary (RoPE), T5's relative position bias or
nothing. Grouped-query attention (`kv_heads`) lives with attention in core/model/transformer.py.
The functional forms here (rms_norm, std_norm, activation_function, gated, rotary_angles,
rotate_pairs) are shared with the KV-cache decoder, core/model/kv_cache.py.

Shapes: B batch, T length, d d_model, f d_ff, k d_k.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from minitx.core.config import GATED_ACTIVATIONS, MODERN_COMPONENTS, NORM_EPS, ModelConfig

# The named swaps (the lab's variants): name -> the ModelConfig fields it sets, which are also
# the option names of `minitx train`. "gqa" assumes the reference's 4 heads.
VARIANTS: dict[str, dict[str, object]] = {
    "baseline": {},
    "pre-norm": {"norm": "pre"},
    "rms": {"norm_kind": "rms"},
    "learned": {"position_encoding": "learned"},
    "rope": {"position_encoding": "rope"},
    "none": {"position_encoding": "none"},
    "gelu": {"activation": "gelu"},
    "swiglu": {"activation": "swiglu"},
    "gqa": {"kv_heads": 2},
    "mqa": {"kv_heads": 1},
    "modern": dict(MODERN_COMPONENTS),
}

RMS_EPS = NORM_EPS["rms"]

# ---------------------------------------------------------------------------------------------
# Norms


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = RMS_EPS) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis: LayerNorm without subtracting the
    mean and without a bias, so rescaling x leaves the output unchanged. (torch >= 2.4 has it
    as one function, a little faster than the ops it is made of.)"""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, weight.shape, weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


class RMSNorm(nn.Module):
    """d parameters (a weight, no bias), where LayerNorm has 2d."""

    def __init__(self, d_model: int, eps: float = RMS_EPS) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., d)
        return rms_norm(x, self.weight, self.eps)


def std_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * (x - mean) / (std + eps) + bias over the last axis, with the unbiased std (it
    divides by d - 1) and eps added to the std, not under a square root: the Annotated
    Transformer's LayerNorm, which no torch LayerNorm computes (docs/import.md)."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return weight * centred / (x.std(dim=-1, keepdim=True) + eps) + bias


class StdNorm(nn.Module):
    """2d parameters, named weight and bias as LayerNorm's (the original calls them a_2, b_2)."""

    def __init__(self, d_model: int, eps: float = NORM_EPS["std"]) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., d)
        return std_norm(x, self.weight, self.bias, self.eps)


def norm_layer(cfg: ModelConfig) -> nn.Module:
    """The norm that stands wherever the model normalises: LayerNorm, RMSNorm or StdNorm, with
    the config's eps."""
    eps = cfg.norm_epsilon
    if cfg.norm_kind == "rms":
        return RMSNorm(cfg.d_model, eps)
    if cfg.norm_kind == "std":
        return StdNorm(cfg.d_model, eps)
    return nn.LayerNorm(cfg.d_model, eps=eps)


# ---------------------------------------------------------------------------------------------
# Feed-forward blocks


def activation_function(name: str):
    """The elementwise function of a plain MLP or of a gated block's gate, by ModelConfig name:
    relu; gelu exact (erf); gelu-tanh and geglu's gate GELU's tanh approximation, which is T5's
    gelu_new formula; silu (Marian's "swish") and swiglu's gate x * sigmoid(x); reglu's gate relu."""
    if name in ("relu", "reglu"):
        return F.relu
    if name == "gelu":
        return F.gelu
    if name in ("gelu-tanh", "geglu"):
        return _gelu_tanh
    return F.silu


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


class FeedForward(nn.Sequential):
    """Linear -> activation -> dropout -> linear. A Sequential so parameter names stay ff.0 / ff.3
    (checkpoints depend on them); dropout is skipped outside training because at batch 1 every
    module call is a noticeable share of encoding or an uncached decoding step."""

    def __init__(self, cfg: ModelConfig, width: int = 0) -> None:
        width = width or cfg.d_ff
        super().__init__(
            nn.Linear(cfg.d_model, width, bias=cfg.bias),
            _Activation(cfg.activation),
            nn.Dropout(cfg.dropout),
            nn.Linear(width, cfg.d_model, bias=cfg.bias),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        inner, activation, drop, outer = self
        hidden = activation(inner(x))  # (B, T, f)
        return outer(drop(hidden) if self.training else hidden)


class _Activation(nn.Module):
    """activation_function(name) as a module (no parameters), so FeedForward stays a Sequential."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.function = name, activation_function(name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)

    def extra_repr(self) -> str:
        return self.name


def gated(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    """act(W1 x) * W3 x: the gate decides, per hidden unit, how much of W3 x passes (swiglu: silu,
    geglu: the tanh GELU)."""
    return activation_function(activation)(gate) * up


class GatedFeedForward(nn.Module):
    """W2(act(W1 x) * W3 x): W1 and W3 d -> f, W2 f -> d (3fd + 2f + d parameters with biases, half
    as many again as the two-linear block of the same d_ff). SwiGLU, and T5 v1.1's gated GELU."""

    def __init__(self, cfg: ModelConfig, width: int = 0) -> None:
        super().__init__()
        width = width or cfg.d_ff
        self.activation = cfg.activation
        self.w1 = nn.Linear(cfg.d_model, width, bias=cfg.bias)  # the gate
        self.w3 = nn.Linear(cfg.d_model, width, bias=cfg.bias)  # what the gate lets through
        self.w2 = nn.Linear(width, cfg.d_model, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        hidden = gated(self.w1(x), self.w3(x), self.activation)  # (B, T, f)
        return self.w2(self.drop(hidden) if self.training else hidden)


def feed_forward(cfg: ModelConfig, width: int = 0) -> nn.Module:
    """The config's block, `width` wide inside (0: d_ff; the decoder's may differ)."""
    block = GatedFeedForward if cfg.activation in GATED_ACTIVATIONS else FeedForward
    return block(cfg, width)


# ---------------------------------------------------------------------------------------------
# Positions


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d): PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same) (an odd d
    ends in a sine)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (L, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table


def rotary_angles(positions: torch.Tensor, d_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """positions (T,) -> (cos, sin), each (T, k): pair i = (2i, 2i+1) of a query or key at
    position p turns by the angle p / 10000^(2i/k), the sinusoids' frequencies; both
    coordinates of a pair share it. Computed from the positions at hand, so a model has no
    table whose size a config could inflate."""
    inv_freq = torch.exp(torch.arange(0, d_k, 2, dtype=torch.float32, device=positions.device)
                         * (-math.log(10000.0) / d_k))  # (k/2,)
    angles = (positions.to(torch.float32)[:, None] * inv_freq).repeat_interleave(2, dim=-1)  # (T, k)
    return angles.cos(), angles.sin()


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., T, k) with cos/sin (T, k) -> each pair (a, b) turned to (a cos - b sin, a sin + b cos).
    A rotation keeps lengths, and (R_m q).(R_n k) = q.(R_(n-m) k): scores see only the offset."""
    a, b = x.unflatten(-1, (-1, 2)).unbind(-1)  # each (..., T, k/2)
    turned = torch.stack((-b, a), dim=-1).flatten(-2)  # (..., T, k): (-b, a) per pair
    return x * cos + turned * sin


def relative_buckets(relative: torch.Tensor, bidirectional: bool, buckets: int, max_distance: int
                     ) -> torch.Tensor:
    """Key position minus query position (any shape, int64) -> T5's bucket of each, in
    [0, buckets). Bidirectional (the encoder): half the buckets for keys after the query; causal
    (the decoder): only keys at or before it count. Of each half, the first half are exact
    distances 0, 1, ..., the rest logarithmically wider bins up to max_distance, and every distance
    beyond shares the last bucket (Raffel et al. 2020; Mesh TensorFlow's formula)."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        bucket += (relative > 0).long() * buckets
        distance = relative.abs()
    else:
        distance = -torch.clamp(relative, max=0)
    exact = buckets // 2
    far = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                   * (buckets - exact)).long()
    far = torch.clamp(far, max=buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Module):
    """One learned scalar per head and bucket (buckets x h parameters), added to every
    self-attention score of its stack: computed once and shared by all the stack's layers, as
    T5 does in its first layer (UMT5: one per layer, each layer's own)."""

    def __init__(self, cfg: ModelConfig, bidirectional: bool) -> None:
        super().__init__()
        self.bidirectional = bidirectional
        self.buckets, self.max_distance = cfg.relative_buckets, cfg.relative_max_distance
        self.weight = nn.Parameter(torch.zeros(cfg.relative_buckets, cfg.n_heads))

    def forward(self, queries: int, keys: int, offset: int = 0) -> torch.Tensor:
        """-> (1, h, queries, keys): the bias of query positions offset .. offset + queries - 1
        over key positions 0 .. keys - 1."""
        device = self.weight.device
        relative = (torch.arange(keys, device=device)[None, :]
                    - torch.arange(offset, offset + queries, device=device)[:, None])  # (Tq, Tk)
        bucket = relative_buckets(relative, self.bidirectional, self.buckets, self.max_distance)
        return F.embedding(bucket, self.weight).permute(2, 0, 1)[None]  # (1, h, Tq, Tk)


def option_labels(cfg: ModelConfig) -> list[str]:
    """The choices a model's numbers depend on that its shapes do not show, in a few words each
    (the app's header and inspect for an imported model): norm placement, norm kind and eps,
    final norms on post-norm, log-softmax, separate vocabularies."""
    kind = {"layer": "LayerNorm", "rms": "RMSNorm", "std": "std LayerNorm"}[cfg.norm_kind]
    labels = [f"{cfg.norm}-norm" + (" + final norms" if cfg.final_norms and cfg.norm == "post" else ""),
              f"{kind} eps {cfg.norm_epsilon:g}", cfg.activation]
    if cfg.log_softmax:
        labels.append("log-softmax")
    if cfg.separate_vocabularies:
        labels.append(f"{cfg.source_vocab_size}/{cfg.vocab_size} tokens")
    labels += [text for flag, text in _hf_options(cfg) if flag]
    return labels


def _hf_options(cfg: ModelConfig) -> list[tuple[bool, str]]:
    """The Hugging Face families' options that differ from minitx's own, each as a short label."""
    return [(cfg.position_encoding == "relative", "relative positions"),
            (not cfg.bias, "no biases"), (not cfg.scale_scores, "unscaled scores"),
            (not cfg.embed_scale, "unscaled embeddings"), (cfg.embedding_norm, "embedding norm"),
            (cfg.tie_embeddings or cfg.tie_output, "tied embeddings"),
            (cfg.scale_output, "output scaled")]


def short_option_labels(cfg: ModelConfig) -> str:
    """option_labels in a title bar's room: 'pre stdLN 1e-6 log-softmax', 'post+final LN 1e-5'."""
    kind = {"layer": "LN", "rms": "RMS", "std": "stdLN"}[cfg.norm_kind]
    eps = f"{cfg.norm_epsilon:.0e}".replace("e-0", "e-")
    norm = cfg.norm + ("+final" if cfg.final_norms and cfg.norm == "post" else "")
    return " ".join([norm, kind, eps] + (["log-softmax"] if cfg.log_softmax else []))


def components(cfg: ModelConfig) -> dict[str, str]:
    """What each part of this config is, in words (inspect's and the lab's descriptions)."""
    norm = {"layer": "LayerNorm", "rms": "RMSNorm (weight only)",
            "std": "LayerNorm with the unbiased std, eps added to the std"}[cfg.norm_kind]
    if cfg.norm_eps:
        norm += f", eps {cfg.norm_eps:g}"
    if cfg.final_norms and cfg.norm == "post":
        norm += ", and a final norm after each stack"
    ff = {"relu": "ReLU MLP: W2 relu(W1 x)", "gelu": "GELU MLP: W2 gelu(W1 x)",
          "silu": "SiLU MLP: W2 silu(W1 x)", "gelu-tanh": "GELU (tanh approximation) MLP: W2 gelu(W1 x)",
          "swiglu": "SwiGLU: W2(silu(W1 x) * W3 x)",
          "geglu": "GEGLU: W2(gelu(W1 x) * W3 x), GELU's tanh approximation",
          "reglu": "ReGLU: W2(relu(W1 x) * W3 x)"}[cfg.activation]
    if cfg.decoder_d_ff:
        ff += f"; {cfg.d_ff} wide in the encoder, {cfg.decoder_d_ff} in the decoder"
    if not cfg.bias:
        ff += ", no biases"
    positions = {"sinusoidal": "sinusoidal table added to the embeddings (no parameters)",
                 "learned": f"learned tables, {cfg.max_len} positions per side",
                 "rope": "rotary, on self-attention queries and keys (no parameters)",
                 "none": "none: attention sees a set, not a sequence",
                 "relative": f"relative position bias on self-attention scores, {cfg.relative_buckets} "
                             f"buckets up to distance {cfg.relative_max_distance}, "
                             f"{'one per layer' if cfg.relative_per_layer else 'one per stack'}"
                 }[cfg.position_encoding]
    if cfg.kv_heads == cfg.n_heads:
        attention = f"multi-head: {cfg.n_heads} heads, each its own K and V"
    else:
        attention = f"grouped-query: {cfg.n_heads} query heads share {cfg.kv_heads} K/V"
    if not cfg.scale_scores:
        attention += "; scores not divided by sqrt(d_k)"
    if cfg.d_head:
        attention += f"; heads {cfg.d_k} wide ({cfg.attention_width} together)"
    described = {"norm": f"{cfg.norm}-norm, {norm}", "positions": positions, "feed-forward": ff,
                 "attention": attention}
    embedding = ([] if cfg.embed_scale else ["token vectors not scaled by sqrt(d_model)"]) + \
        (["a norm after embeddings and positions"] if cfg.embedding_norm else [])
    tied = ("one table for source, target and output" if cfg.tie_embeddings and cfg.tie_output else
            "source and target share one table" if cfg.tie_embeddings else
            "the output layer shares the target's table" if cfg.tie_output else "")
    if tied:
        embedding.append(tied + (", the decoder stream scaled by d_model^-0.5 before it"
                                 if cfg.scale_output else ""))
    if embedding:
        described["embeddings"] = "; ".join(embedding)
    if cfg.separate_vocabularies:
        described["vocabularies"] = (f"separate: {cfg.source_vocab_size} source tokens (PAD "
                                     f"{cfg.source_pad_id}), {cfg.vocab_size} target tokens "
                                     f"(PAD {cfg.pad_id})")
    if cfg.log_softmax:
        described["output"] = "log-probabilities (log-softmax after the output layer)"
    return described
