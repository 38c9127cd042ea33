"""Harvard NLP's Annotated Transformer (harvardnlp/annotated-transformer), restated for the tests.

What a user of that code has, and what `minitx import --layout annotated` reads:
- `EncoderDecoder` with `encoder`, `decoder`, `src_embed` / `tgt_embed` (each
  Sequential(Embeddings: lut(x) * sqrt(d_model), PositionalEncoding: + buffer `pe` of shape
  (1, max_len, d_model), then dropout); the two sides get separate copies of the buffer) and
  `generator` (Generator: log_softmax(proj(x)), so it returns log-probabilities);
- its own LayerNorm, a_2 * (x - mean) / (std + eps) + b_2 with the unbiased std and eps 1e-6,
  used pre-norm: each SublayerConnection is x + dropout(sublayer(norm(x))), and each stack ends
  in a final LayerNorm (`encoder.norm`, `decoder.norm`);
- MultiHeadedAttention with linears[0..3] for queries, keys, values and output, masked scores
  filled with -1e9; PositionwiseFeedForward w_2(dropout(relu(w_1 x)));
- make_model(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout) with Xavier-uniform matrices;
- its vocabularies' specials "<s>", "</s>", "<blank>", "<unk>" (ids 0-3; blank is padding),
  sources and targets wrapped as <s> ... </s>;
- its greedy decoding: no early stop, max_len - 1 tokens after the start symbol.

Batch-first throughout: (B, T, d). Module and parameter names are the original's.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import Tensor, nn
from torch.nn.functional import log_softmax

SPECIALS = ("<s>", "</s>", "<blank>", "<unk>")  # ids 0-3, the order its build_vocabulary gives
BOS_ID, EOS_ID, PAD_ID, UNK_ID = 0, 1, 2, 3


class EncoderDecoder(nn.Module):
    def __init__(self, encoder: nn.Module, decoder: nn.Module, src_embed: nn.Module,
                 tgt_embed: nn.Module, generator: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.generator = generator

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """-> the decoder's output (B, T, d); the generator is applied by the loss, as there."""
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


class Generator(nn.Module):
    """(B, T, d) -> (B, T, V) log-probabilities."""

    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x: Tensor) -> Tensor:
        return log_softmax(self.proj(x), dim=-1)


def clones(module: nn.Module, n: int) -> nn.ModuleList:
    """n independent deep copies of one module."""
    return nn.ModuleList(copy.deepcopy(module) for _ in range(n))


class LayerNorm(nn.Module):
    """a_2 * (x - mean) / (std + eps) + b_2 over the last axis, std unbiased (divides by n - 1)
    and eps added to the std, not inside a square root: not torch's LayerNorm."""

    def __init__(self, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        centred = x - x.mean(-1, keepdim=True)
        return self.a_2 * centred / (x.std(-1, keepdim=True) + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    """Pre-norm residual: x + dropout(sublayer(norm(x)))."""

    def __init__(self, size: int, dropout: float) -> None:
        super().__init__()
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))


class Encoder(nn.Module):
    """N layers, then a final LayerNorm."""

    def __init__(self, layer: nn.Module, n: int) -> None:
        super().__init__()
        self.layers = clones(layer, n)
        self.norm = LayerNorm(layer.size)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class EncoderLayer(nn.Module):
    def __init__(self, size: int, self_attn: nn.Module, feed_forward: nn.Module, dropout: float) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.sublayer[0](x, lambda h: self.self_attn(h, h, h, mask))
        return self.sublayer[1](x, self.feed_forward)


class Decoder(nn.Module):
    """N layers, then a final LayerNorm."""

    def __init__(self, layer: nn.Module, n: int) -> None:
        super().__init__()
        self.layers = clones(layer, n)
        self.norm = LayerNorm(layer.size)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    """Self-attention, attention over the memory (src_attn), feed-forward: three sublayers."""

    def __init__(self, size: int, self_attn: nn.Module, src_attn: nn.Module, feed_forward: nn.Module,
                 dropout: float) -> None:
        super().__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        x = self.sublayer[0](x, lambda h: self.self_attn(h, h, h, tgt_mask))
        x = self.sublayer[1](x, lambda h: self.src_attn(h, memory, memory, src_mask))
        return self.sublayer[2](x, self.feed_forward)


def subsequent_mask(size: int) -> Tensor:
    """(1, size, size) bool: True where query i may see key j (j <= i)."""
    above = torch.triu(torch.ones((1, size, size)), diagonal=1).type(torch.uint8)
    return above == 0


def attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
              dropout: nn.Module | None = None) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(d_k)) v, masked scores (mask == 0) set to -1e9 before the softmax."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (B, h, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = scores.softmax(dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value, weights


class MultiHeadedAttention(nn.Module):
    def __init__(self, h: int, d_model: int, dropout: float = 0.1) -> None:
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)  # queries, keys, values, output
        self.attn: Tensor | None = None  # the last weights, kept as the original keeps them
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        if mask is not None:
            mask = mask.unsqueeze(1)  # (B, 1, Tq or 1, Tk): one mask for every head
        batch = query.size(0)
        q, k, v = (linear(x).view(batch, -1, self.h, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
                   for linear, x in zip(self.linears, (query, key, value)))
        x, self.attn = attention(q, k, v, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(batch, -1, self.h * self.d_k)  # (B, Tq, d)
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.w_1(x).relu()))


class Embeddings(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x: Tensor) -> Tensor:
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    """+ PE[:T], then dropout. PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i + 1] = cos(same),
    computed in log space; stored (1, max_len, d)."""

    def __init__(self, d_model: int, dropout: float, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        positions = torch.arange(0, max_len).unsqueeze(1)  # (max_len, 1)
        rates = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))  # (d/2,)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(positions * rates)
        pe[:, 1::2] = torch.cos(positions * rates)
        self.register_buffer("pe", pe.unsqueeze(0))  # (1, max_len, d)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, d)
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


def make_model(src_vocab: int, tgt_vocab: int, N: int = 6, d_model: int = 512, d_ff: int = 2048,
               h: int = 8, dropout: float = 0.1) -> EncoderDecoder:
    """The original's constructor: N layers in each stack, every block a deep copy of one
    prototype, Xavier-uniform for every matrix."""
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout)
    model = EncoderDecoder(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout), N),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), N),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def make_std_mask(tgt: Tensor, pad: int) -> Tensor:
    """(B, T) decoder input -> (B, T, T): padding of the keys and the subsequent mask, as the
    original's Batch builds it for training."""
    return (tgt != pad).unsqueeze(-2) & subsequent_mask(tgt.size(-1)).type_as(tgt != pad)


@torch.no_grad()
def greedy_decode(model: EncoderDecoder, src: Tensor, src_mask: Tensor, max_len: int,
                  start_symbol: int) -> Tensor:
    """The original's decoding: src (B, S) with src_mask (B, 1, S) -> (B, max_len) ids starting
    with start_symbol. It never stops early; the reader cuts each row at </s>."""
    memory = model.encode(src, src_mask)  # (B, S, d)
    ys = torch.zeros(src.size(0), 1).fill_(start_symbol).type_as(src)  # (B, 1)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src))
        prob = model.generator(out[:, -1])  # (B, V)
        next_word = prob.argmax(dim=1)  # (B,)
        ys = torch.cat([ys, next_word[:, None].type_as(src)], dim=1)
    return ys


def cut_at_end(row: list[int], eos: int = EOS_ID) -> list[int]:
    """One decoded row without its start symbol and without anything from </s> on."""
    ids = row[1:]
    return ids[: ids.index(eos)] if eos in ids else ids
