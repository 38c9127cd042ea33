"""The encoder-decoder Transformer: attention blocks, post-/pre-norm layers and the Seq2Seq model.

Attention itself, with its masks, is core/model/attention.py; the swappable parts (norms,
feed-forward blocks, position encodings) are core/model/components.py.

Shapes: B batch, S source length, T target length, h heads, g K/V heads (h with multi-head
attention, fewer with grouped-query attention), d d_model, k d_k = d / h (or the config's d_head).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from minitx.core.config import ModelConfig
from minitx.core.data.generation import Generation
from minitx.core.model.attention import attention, padding_mask_or_none
from minitx.core.model.components import (
    RelativePositionBias,
    feed_forward,
    norm_layer,
    rotary_angles,
    rotate_pairs,
    sinusoidal_table,
)
from minitx.core.model.hooks import embedding_hook, head_hook, stream_hook, sublayer_hook

Rotary = tuple[torch.Tensor, torch.Tensor]  # (cos, sin), each (T, k): rotary_angles() of a stream

def project_per_head(linear: nn.Linear, x: torch.Tensor, slices: int) -> torch.Tensor:
    """x (B, h, T, d), one input per query head -> (B, h, T, k): query head j through its own
    slice of `linear`'s output, the slice j // (h / slices) (K/V slices are shared by groups)."""
    B, h, T, d = x.shape
    weight = linear.weight.view(slices, -1, d)  # (slices, k, d)
    if slices < h:
        weight = weight.repeat_interleave(h // slices, 0)
    out = torch.einsum("bhtd,hkd->bhtk", x, weight)
    if linear.bias is None:
        return out
    bias = linear.bias.view(slices, -1)  # (slices, k)
    if slices < h:
        bias = bias.repeat_interleave(h // slices, 0)
    return out + bias[None, :, None, :]


class MultiHeadAttention(nn.Module):
    """Q and output d x d, K and V d -> g * d_k, all with bias: 4d^2 + 4d parameters with one
    K/V head per query head (g = h), fewer with grouped-query attention (g < h). Without biases
    (T5) 4d^2; with d_head set, the heads together are h * d_head wide instead of d."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, width, kv_width = cfg.d_model, cfg.attention_width, cfg.kv_heads * cfg.d_k
        self.n_heads, self.kv_heads = cfg.n_heads, cfg.kv_heads
        self.dropout = cfg.dropout
        self.fused = cfg.attention == "fused"
        # None: sqrt(d_k). The no-scale variant divides by 1 (the classic missing scaling); so does
        # a T5 model, whose initialisation took the scaling in instead.
        self.score_divisor: float | None = 1.0 if cfg.bug == "no-scale" or not cfg.scale_scores else None
        self.q_proj = nn.Linear(d, width, bias=cfg.bias)
        self.k_proj = nn.Linear(d, kv_width, bias=cfg.bias)
        self.v_proj = nn.Linear(d, kv_width, bias=cfg.bias)
        self.out_proj = nn.Linear(width, d, bias=cfg.bias)

    def split_heads(self, x: torch.Tensor, heads: int | None = None) -> torch.Tensor:
        """(B, T, heads * k) -> (B, heads, T, k); heads defaults to the query heads."""
        B, T, width = x.shape
        heads = heads or self.n_heads
        return x.view(B, T, heads, width // heads).transpose(1, 2)

    def queries(self, x: torch.Tensor, rotary: Rotary | None = None) -> torch.Tensor:
        """(B, T, d) -> Q (B, h, T, k), turned by position when rotary is given. A hook may give
        each head an input of its own (path patching, core/model/hooks.py)."""
        hook = head_hook(self)
        per_head = hook.query_input(x, 0) if hook is not None and hook.query_input is not None else None
        q = self.split_heads(self.q_proj(x)) if per_head is None else \
            project_per_head(self.q_proj, per_head, self.n_heads)
        return q if rotary is None else rotate_pairs(q, *rotary)

    def keys_values(self, x: torch.Tensor, rotary: Rotary | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, d) -> K, V each (B, g, T, k), K turned by position when rotary is given (values
        never are); computed once per memory when decoding. When a hook gives each query head an
        input of its own, K and V come per query head: (B, h, T, k)."""
        hook = head_hook(self)
        per_head = hook.key_value_input(x, 0) if hook is not None and hook.key_value_input is not None \
            else None
        if per_head is None:
            k = self.split_heads(self.k_proj(x), self.kv_heads)
            v = self.split_heads(self.v_proj(x), self.kv_heads)
        else:
            k = project_per_head(self.k_proj, per_head, self.kv_heads)
            v = project_per_head(self.v_proj, per_head, self.kv_heads)
        return (k if rotary is None else rotate_pairs(k, *rotary)), v

    def forward(
        self,
        query: torch.Tensor,  # (B, Tq, d)
        keys_values: tuple[torch.Tensor, torch.Tensor],  # from keys_values()
        mask: torch.Tensor | None,
        need_weights: bool = False,
        causal: bool = False,
        rotary: Rotary | None = None,  # the queries' positions (self-attention of a rope model)
        bias: torch.Tensor | None = None,  # (1, h, Tq, Tk) added to the scores: relative positions
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        k, v = keys_values
        hook = head_hook(self)  # an intervention's (core/interp/interventions.py), usually None
        out, weights = attention(
            self.queries(query, rotary),  # (B, h, Tq, k)
            k,
            v,
            mask,
            causal=causal,
            dropout=self.dropout if self.training else 0.0,
            divisor=self.score_divisor,
            # `explicit` is how training computes attention; outside training, when no weights
            # are asked for, the fused kernel computes the same in one call.
            fused=self.fused or not self.training,
            need_weights=need_weights,
            edit_weights=hook.weights if hook is not None else None,
            bias=bias,
        )
        if hook is not None and hook.output is not None:
            out = hook.output(out, 0)  # (B, h, Tq, k): the per-head outputs, before out_proj
        B, h, Tq, dk = out.shape
        out = out.transpose(1, 2).reshape(B, Tq, h * dk)  # (B, Tq, h k)
        return self.out_proj(out), weights


# ---------------------------------------------------------------------------------------------
# Layers


class Residual(nn.Module):
    """One sublayer connection: post-norm LN(x + Drop(f(x))) or pre-norm x + Drop(f(LN(x)))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.norm = norm_layer(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def input(self, x: torch.Tensor) -> torch.Tensor:
        """What the sublayer reads: x itself (post-norm) or LN(x) (pre-norm)."""
        return self.norm(x) if self.pre else x

    def output(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        """x (B, T, d) the stream, sublayer_out (B, T, d) -> the stream after this connection."""
        hook = sublayer_hook(self)  # a measurement's (core/interp/numerics.py), usually None
        if hook is not None and hook.output is not None:
            sublayer_out = hook.output(sublayer_out, 0)
        x = x + (self.drop(sublayer_out) if self.training else sublayer_out)
        if hook is not None and hook.residual is not None:
            x = hook.residual(x, 0)
        return x if self.pre else self.norm(x)


def own_position_bias(cfg: ModelConfig, bidirectional: bool) -> RelativePositionBias | None:
    """A layer's own relative position bias (UMT5's layers each have one); None where the stack
    shares one (T5) or has none."""
    if cfg.position_encoding == "relative" and cfg.relative_per_layer:
        return RelativePositionBias(cfg, bidirectional)
    return None


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg)
        self.ff = feed_forward(cfg)
        self.attn_res = Residual(cfg)
        self.ff_res = Residual(cfg)
        self.position_bias = own_position_bias(cfg, bidirectional=True)

    def forward(self, x, mask, need_weights=False, rotary: Rotary | None = None,
                position_bias: torch.Tensor | None = None):
        if self.position_bias is not None:  # (1, h, S, S): this layer's own
            position_bias = self.position_bias(x.shape[1], x.shape[1])
        h = self.attn_res.input(x)
        a, weights = self.self_attn(h, self.self_attn.keys_values(h, rotary), mask, need_weights,
                                    rotary=rotary, bias=position_bias)
        x = self.attn_res.output(x, a)
        x = self.ff_res.output(x, self.ff(self.ff_res.input(x)))
        return x, weights


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        # Cross-attention reads the encoder's memory; the swap-cross variant reads the decoder
        # stream instead, masked like self-attention (the KV cache asks, to know what to cache).
        self.cross_reads_decoder = cfg.bug == "swap-cross"
        self.self_attn = MultiHeadAttention(cfg)
        self.cross_attn = MultiHeadAttention(cfg)
        self.ff = feed_forward(cfg, cfg.decoder_ff_width)
        self.self_res = Residual(cfg)
        self.cross_res = Residual(cfg)
        self.ff_res = Residual(cfg)
        self.position_bias = own_position_bias(cfg, bidirectional=False)

    def cross_inputs(self, h, memory, src_mask, tgt_mask, causal):
        """What cross-attention attends over: (keys/values, mask, causal)."""
        if self.cross_reads_decoder:
            return self.cross_attn.keys_values(h), tgt_mask, causal
        return self.cross_attn.keys_values(memory), src_mask, False

    def forward(self, y, memory, src_mask, tgt_mask, causal=False, need_weights=False,
                rotary: Rotary | None = None, position_bias: torch.Tensor | None = None):
        """y (B, T, d) decoder stream; memory (B, S, d); tgt_mask: padding of the decoder input
        (or None), causal: hide later positions too; rotary: the decoder positions' angles, for
        self-attention only (source and target positions share no coordinate, so cross-attention
        is never rotated), as is position_bias (1, h, T, T), T5's relative positions. (Decoding
        one position at a time against cached keys/values is core/model/kv_cache.py.)"""
        if self.position_bias is not None:  # (1, h, T, T): this layer's own
            position_bias = self.position_bias(y.shape[1], y.shape[1])
        h = self.self_res.input(y)
        a, self_w = self.self_attn(h, self.self_attn.keys_values(h, rotary), tgt_mask, need_weights,
                                   causal, rotary, position_bias)
        y = self.self_res.output(y, a)

        h = self.cross_res.input(y)
        cross_kv, cross_mask, cross_causal = self.cross_inputs(h, memory, src_mask, tgt_mask, causal)
        a, cross_w = self.cross_attn(h, cross_kv, cross_mask, need_weights, cross_causal)
        y = self.cross_res.output(y, a)
        y = self.ff_res.output(y, self.ff(self.ff_res.input(y)))
        return y, self_w, cross_w


# ---------------------------------------------------------------------------------------------
# The model


@dataclass
class AttentionMaps:
    """Weights per layer, each (B, h, T_query, T_key); rows sum to one over allowed keys."""

    encoder_self: list[torch.Tensor] = field(default_factory=list)  # (B, h, S, S)
    decoder_self: list[torch.Tensor] = field(default_factory=list)  # (B, h, T, T)
    cross: list[torch.Tensor] = field(default_factory=list)  # (B, h, T, S)


def on_meta() -> bool:
    """Whether tensors are being made on the meta device: a model built for its shapes, or to
    take a file's tensors as its weights. There a few ops (normal_, arange) run through torch's
    reference implementations, whose first use imports torch._dynamo: seconds of every load, so
    the model skips them (their values are never read)."""
    return torch.empty(0).device.type == "meta"


def token_table(rows: int, d: int, padding_idx: int | None) -> nn.Embedding:
    """nn.Embedding(rows, d) (reset_parameters gives it its values); on the meta device without
    nn.Embedding's own normal_ init. Elsewhere exactly as before, so seeded models draw the same
    weights."""
    if on_meta():
        return nn.Embedding(rows, d, padding_idx=padding_idx, _weight=torch.empty(rows, d))
    return nn.Embedding(rows, d, padding_idx=padding_idx)


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.src_embed = token_table(cfg.source_vocab_size, d, cfg.source_pad_id)
        self.tgt_embed = token_table(cfg.vocab_size, d, cfg.pad_id)
        if cfg.position_encoding == "sinusoidal":  # a buffer: saved and moved, never trained
            table = torch.empty(cfg.max_len, d) if on_meta() else sinusoidal_table(cfg.max_len, d)
            self.register_buffer("positional", table)  # (max_len, d)
        elif cfg.position_encoding == "learned":  # one table per side: their positions differ
            self.src_positions = token_table(cfg.max_len, d, None)
            self.tgt_positions = token_table(cfg.max_len, d, None)
        elif cfg.position_encoding == "relative" and not cfg.relative_per_layer:  # one per stack
            self.src_position_bias = RelativePositionBias(cfg, bidirectional=True)
            self.tgt_position_bias = RelativePositionBias(cfg, bidirectional=False)
        if cfg.embedding_norm:
            self.src_embed_norm = norm_layer(cfg)
            self.tgt_embed_norm = norm_layer(cfg)
        self.embed_drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        final = cfg.with_final_norms  # pre-norm always; post-norm as torch.nn.Transformer has them
        self.encoder_norm = norm_layer(cfg) if final else nn.Identity()
        self.decoder_norm = norm_layer(cfg) if final else nn.Identity()
        self.output = nn.Linear(d, cfg.vocab_size, bias=cfg.bias)  # the decoder stream -> logits
        self._tie()
        # Decoder self-attention hides later positions; the no-causal-mask variant lets it see them.
        self.causal = cfg.bug != "no-causal-mask"
        # How outputs are generated (core/data/generation.py): minitx's rule, or a folder's settings
        # (set by whoever loads the model: the checkpoint, the Hugging Face reader).
        self.generation = Generation.minitx(cfg.sos_id, cfg.eos_id, cfg.pad_id)
        # Gradient checkpointing (TrainConfig.gradient_checkpointing; the Trainer sets it): while
        # training, each layer's activations are recomputed in backward instead of kept (_layer)
        self.checkpoint_layers = False
        self.reset_parameters()

    def _tie(self) -> None:
        """Tied tables are one Parameter under several names (the modules stay apart, so a hook on
        the source's table never touches the target's); files keep it once (tied_names)."""
        if self.cfg.tie_embeddings:
            self.tgt_embed.weight = self.src_embed.weight
        if self.cfg.tie_output:
            self.output.weight = self.tgt_embed.weight

    def tied_names(self) -> dict[str, str]:
        """state_dict names that are another name's tensor (the tied tables): alias -> owner.
        A checkpoint stores only the owners; loading gives each alias its owner's tensor."""
        tied = {"tgt_embed.weight": "src_embed.weight"} if self.cfg.tie_embeddings else {}
        if self.cfg.tie_output:
            tied["output.weight"] = tied.get("tgt_embed.weight", "tgt_embed.weight")
        return tied

    def own_state_dict(self) -> dict[str, torch.Tensor]:
        """state_dict() without the aliases of tied tables: what a file holds."""
        tied = self.tied_names()
        return {k: t for k, t in self.state_dict().items() if k not in tied}

    def load_own_state_dict(self, weights: dict[str, torch.Tensor], assign: bool = False) -> None:
        """load_state_dict() of what own_state_dict() gave (strict: every other name present).
        assign: the tensors become the weights themselves, no copy (a model built on the meta
        device, which allocates and initialises nothing: how a large folder loads in the time and
        memory its file takes)."""
        aliases = {alias: weights[owner] for alias, owner in self.tied_names().items()}
        self.load_state_dict({**weights, **aliases}, assign=assign)
        if assign:
            self._tie()

    def reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        with torch.no_grad():  # xavier overwrote the PAD rows; keep them zero as padding_idx says
            self.src_embed.weight[self.cfg.source_pad_id].zero_()
            self.tgt_embed.weight[self.cfg.pad_id].zero_()

    def position_table(self, side: str) -> torch.Tensor | None:
        """(max_len, d) added to the `side` ("src" or "tgt") embeddings: the sinusoids (both
        sides), that side's learned table, or None (rope acts inside self-attention; none)."""
        if self.cfg.position_encoding == "sinusoidal":
            return self.positional
        if self.cfg.position_encoding == "learned":
            return (self.src_positions if side == "src" else self.tgt_positions).weight
        return None

    def rotary(self, length: int, device: torch.device, offset: int = 0) -> Rotary | None:
        """The angles of positions offset .. offset + length - 1 for a rope model's
        self-attention; None for every other position encoding."""
        if self.cfg.position_encoding != "rope":
            return None
        return rotary_angles(torch.arange(offset, offset + length, device=device), self.cfg.d_k)

    def embed(self, tokens: torch.Tensor, side: str, offset: int = 0) -> torch.Tensor:
        """(B, T) -> (B, T, d): token * sqrt(d) + position (positions offset.. offset+T-1), the
        token unscaled where the config says, then the embedding norm where there is one."""
        T = tokens.shape[1]
        self.check_length(offset + T)
        table = self.src_embed if side == "src" else self.tgt_embed
        x = table(tokens)  # (B, T, d): the token vectors, what gradient attribution differentiates
        if (hook := embedding_hook(table)) is not None:
            x = hook(x, offset)
        if self.cfg.embed_scale:
            x = x * math.sqrt(self.cfg.d_model)
        positions = self.position_table(side)
        if positions is not None:
            x = x + positions[offset : offset + T]
        if self.cfg.embedding_norm:
            x = (self.src_embed_norm if side == "src" else self.tgt_embed_norm)(x)
        return self.embed_drop(x) if self.training else x

    def position_bias(self, side: str, queries: int, keys: int, offset: int = 0) -> torch.Tensor | None:
        """(1, h, queries, keys) added to the `side` stack's self-attention scores (T5's relative
        positions; query positions from offset), or None for every other position encoding."""
        if self.cfg.position_encoding != "relative" or self.cfg.relative_per_layer:
            return None  # (a layer with its own table computes its own)
        table = self.src_position_bias if side == "src" else self.tgt_position_bias
        return table(queries, keys, offset)

    def check_length(self, length: int) -> None:
        """Raise a clear ValueError when `length` positions exceed the positional table."""
        if length > self.cfg.max_len:
            raise ValueError(f"sequence of length {length} exceeds the model's max_len={self.cfg.max_len}")

    def _layer(self, layer: nn.Module, *args, **kwargs):
        """A layer's forward; with checkpoint_layers, in any pass with gradients (a step, and
        the watching's numerics), through torch.utils.checkpoint (non-reentrant): only the
        layer's inputs are kept for backward, which runs the layer again (dropout's random state
        replayed) for the same gradients, one layer's activations alive at a time instead of
        every layer's."""
        if self.checkpoint_layers and torch.is_grad_enabled():
            return checkpoint(layer, *args, use_reentrant=False, **kwargs)
        return layer(*args, **kwargs)

    def encode(self, src: torch.Tensor, maps: AttentionMaps | None = None):
        """(B, S) -> memory (B, S, d) and the source mask (B, 1, 1, S), None if nothing is padded."""
        src_mask = padding_mask_or_none(src, self.cfg.source_pad_id)
        x = self.embed(src, "src")
        S = src.shape[1]
        rotary = self.rotary(S, src.device)
        bias = self.position_bias("src", S, S)  # (1, h, S, S) or None
        for layer in self.encoder:
            x, w = self._layer(layer, x, src_mask, need_weights=maps is not None, rotary=rotary,
                               position_bias=bias)
            if (hook := stream_hook(layer)) is not None:
                x = hook(x, 0)  # (B, S, d)
            if maps is not None:
                maps.encoder_self.append(w)
        return self.encoder_norm(x), src_mask

    def decode(self, tgt_in, memory, src_mask, maps: AttentionMaps | None = None):
        """(B, T) decoder input -> logits (B, T, V)."""
        return self.stream_logits(self.decoder_stream(tgt_in, memory, src_mask, maps))

    def decoder_stream(self, tgt_in, memory, src_mask, maps: AttentionMaps | None = None):
        """(B, T) decoder input -> (B, T, d) the stream leaving the last decoder layer: what
        `decode` turns into logits, for a caller that needs the logits of a few positions only
        (stream_logits of those: a (B, T, V) tensor of a big vocabulary is gigabytes)."""
        # Padding only ever follows a target's end, so a causal decoder's real positions never see
        # it: only a decoder that sees later positions masks it. (A Hugging Face model's output
        # may hold PAD mid-sequence, which its own code never masks either.)
        tgt_mask = None if self.causal else target_padding_mask(tgt_in, self.cfg.pad_id)
        y = self.embed(tgt_in, "tgt")
        T = tgt_in.shape[1]
        rotary = self.rotary(T, tgt_in.device)
        bias = self.position_bias("tgt", T, T)  # (1, h, T, T) or None
        for layer in self.decoder:
            y, self_w, cross_w = self._layer(
                layer, y, memory, src_mask, tgt_mask, causal=self.causal, need_weights=maps is not None,
                rotary=rotary, position_bias=bias,
            )
            if (hook := stream_hook(layer)) is not None:
                y = hook(y, 0)  # (B, T, d)
            if maps is not None:
                maps.decoder_self.append(self_w)
                maps.cross.append(cross_w)
        return y

    def stream_logits(self, y: torch.Tensor) -> torch.Tensor:
        """(..., d) decoder stream -> (..., V) logits: the final norm (if the model has one) and
        the output layer (then log-softmax, for a model whose output layer ends in one). On a
        stream leaving an earlier layer this is the logit lens."""
        y = self.decoder_norm(y)
        if self.cfg.scale_output:  # T5 v1.0: its output layer is the token table, rescaled
            y = y * self.cfg.d_model**-0.5
        logits = self.output(y)
        return logits.log_softmax(dim=-1) if self.cfg.log_softmax else logits

    @property
    def device(self) -> torch.device:
        """Where the weights are (every parameter is on one device)."""
        return self.src_embed.weight.device

    def forward(self, src, tgt_in, return_attention: bool = False):
        """src (B, S), tgt_in (B, T) -> logits (B, T, V) [, AttentionMaps]."""
        maps = AttentionMaps() if return_attention else None
        memory, src_mask = self.encode(src, maps)
        logits = self.decode(tgt_in, memory, src_mask, maps)
        return (logits, maps) if return_attention else logits


def target_padding_mask(tgt_in: torch.Tensor, pad_id: int) -> torch.Tensor | None:
    """padding_mask_or_none() of a decoder input, whose first position is always the start
    token, never padding, even where the start token is PAD itself (T5, Marian)."""
    mask = tgt_in != pad_id  # (B, T)
    mask[:, 0] = True
    return None if bool(mask.all()) else mask[:, None, None, :]


def set_training(model: nn.Module, training: bool) -> None:
    """model.train(training) without nn.Module.train's recursion through __setattr__, which
    training pays twice at every probe snapshot and evaluation (docs/performance.md). Same
    effect: every module's `training` flag (no module here overrides train())."""
    for module in model.modules():
        module.__dict__["training"] = training


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Eval mode for a block, then the mode the model had (a model already in eval mode is
    left as it is)."""
    was_training = model.training
    if was_training:
        set_training(model, False)
    try:
        yield model
    finally:
        if was_training:
            set_training(model, True)


# top-level module -> its row in the parameter table
_GROUPS = {"src_embed": "embeddings", "tgt_embed": "embeddings", "src_embed_norm": "embeddings",
           "tgt_embed_norm": "embeddings", "src_positions": "learned positions",
           "tgt_positions": "learned positions", "src_position_bias": "relative positions",
           "tgt_position_bias": "relative positions", "encoder": "encoder layers",
           "decoder": "decoder layers", "encoder_norm": "final norms", "decoder_norm": "final norms",
           "output": "output"}
_OPTIONAL_GROUPS = ("learned positions", "relative positions", "final norms")


def parameter_breakdown(model: Seq2Seq) -> dict[str, int]:
    """Parameter counts per component in the order of docs/model.md's table (rows a config
    does not have, learned positions or final norms, left out), then the total."""
    groups = dict.fromkeys(dict.fromkeys(_GROUPS.values()), 0)
    for name, p in model.named_parameters():
        groups[_GROUPS[name.split(".")[0]]] += p.numel()
    groups = {k: v for k, v in groups.items() if v or k not in _OPTIONAL_GROUPS}
    groups["total"] = sum(groups.values())
    return groups


def block_parameters(model: Seq2Seq) -> dict[str, int]:
    """Parameters of one attention block (and its Q + output and K + V projections, which
    grouped-query attention shrinks), one feed-forward block, one norm and one whole layer of
    each stack (the per-block lines of the parameter table), counted on each stack's first layer."""

    def count(*modules: nn.Module) -> int:
        return sum(p.numel() for module in modules for p in module.parameters())

    encoder, decoder = model.encoder[0], model.decoder[0]
    attn = encoder.self_attn
    return {
        "attention block": count(attn),
        "queries and output": count(attn.q_proj, attn.out_proj),
        "keys and values": count(attn.k_proj, attn.v_proj),
        "feed-forward block": count(encoder.ff),
        "norm": count(encoder.ff_res.norm),
        "encoder layer": count(encoder),
        "decoder layer": count(decoder),
    }
