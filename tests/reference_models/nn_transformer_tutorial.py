"""The model of PyTorch's tutorial "Language Translation with nn.Transformer and torchtext"
(pytorch/tutorials, beginner_source/translation_transformer.py), restated for the tests.

What a user of that tutorial has, and what `minitx import --layout nn-transformer` reads:
- `Seq2SeqTransformer` holding `transformer` (torch.nn.Transformer itself, sequence-first:
  tensors are (T, B, E)), `generator` (a Linear to the target vocabulary, plain logits),
  `src_tok_emb` / `tgt_tok_emb` (TokenEmbedding: an Embedding times sqrt(E)) and
  `positional_encoding` (one sinusoid buffer `pos_embedding` of shape (maxlen, 1, E) that both
  sides share, then dropout);
- specials UNK=0, PAD=1, BOS=2, EOS=3, and every source and target wrapped as BOS ... EOS;
- masks: a float causal mask (0 where allowed, -inf where not) and boolean padding masks
  (True = padding), as the tutorial's generate_square_subsequent_mask and create_mask make them;
- its greedy decoding: one sentence, BOS first, stop at EOS or after max_len - 1 tokens.

The module and parameter names are the tutorial's, so the state_dict keys are too. Beyond the
tutorial (which decodes one sentence at a time), encode/decode take optional padding masks and
greedy_decode_batch decodes a padded batch; a batch of one is the tutorial's computation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2, 3
SPECIAL_SYMBOLS = ("<unk>", "<pad>", "<bos>", "<eos>")  # at ids 0-3, as the tutorial inserts them

# torch warns when a float attention mask meets a boolean padding mask (the tutorial's forward
# does exactly that), and that a sequence-first encoder cannot use nested tensors. Both are the
# tutorial's behaviour, not a fault of these tests.
_TUTORIAL_WARNINGS = ("Support for mismatched key_padding_mask", "enable_nested_tensor is True")


@contextmanager
def _tutorial_warnings_ignored() -> Iterator[None]:
    with warnings.catch_warnings():
        for message in _TUTORIAL_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        yield


class PositionalEncoding(nn.Module):
    """Adds the sinusoids to a (T, B, E) embedding, then dropout. One table of `maxlen` rows,
    PE[p, 2i] = sin(p / 10000^(2i/E)), PE[p, 2i + 1] = cos(same), stored (maxlen, 1, E) so it
    broadcasts over the batch axis."""

    def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000) -> None:
        super().__init__()
        frequencies = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)  # (E/2,)
        angles = torch.arange(0, maxlen).reshape(maxlen, 1) * frequencies  # (maxlen, E/2)
        table = torch.zeros((maxlen, emb_size))
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", table.unsqueeze(-2))  # (maxlen, 1, E)

    def forward(self, token_embedding: Tensor) -> Tensor:  # (T, B, E) -> (T, B, E)
        return self.dropout(token_embedding + self.pos_embedding[: token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    """Token ids (T, B) -> (T, B, E), scaled by sqrt(E). No padding_idx: the PAD row trains."""

    def __init__(self, vocab_size: int, emb_size: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers: int, num_decoder_layers: int, emb_size: int, nhead: int,
                 src_vocab_size: int, tgt_vocab_size: int, dim_feedforward: int = 512,
                 dropout: float = 0.1) -> None:
        super().__init__()
        with _tutorial_warnings_ignored():
            # Post-norm layers (norm_first=False), ReLU, LayerNorm eps 1e-5, and a final
            # LayerNorm after each stack: nn.Transformer's defaults, which the tutorial keeps.
            self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead,
                                              num_encoder_layers=num_encoder_layers,
                                              num_decoder_layers=num_decoder_layers,
                                              dim_feedforward=dim_feedforward, dropout=dropout)
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src: Tensor, trg: Tensor, src_mask: Tensor, tgt_mask: Tensor,
                src_padding_mask: Tensor, tgt_padding_mask: Tensor,
                memory_key_padding_mask: Tensor) -> Tensor:
        """src (S, B), trg (T, B) -> logits (T, B, V_tgt), the masks as create_mask makes them."""
        src_emb = self.positional_encoding(self.src_tok_emb(src))  # (S, B, E)
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))  # (T, B, E)
        with _tutorial_warnings_ignored():
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask,
                                    tgt_padding_mask, memory_key_padding_mask)  # (T, B, E)
        return self.generator(outs)

    def encode(self, src: Tensor, src_mask: Tensor, src_padding_mask: Tensor | None = None) -> Tensor:
        """(S, B) -> memory (S, B, E), after the encoder's final norm."""
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask,
                                        src_key_padding_mask=src_padding_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor,
               memory_key_padding_mask: Tensor | None = None) -> Tensor:
        """(T, B) decoder input -> (T, B, E), after the decoder's final norm (no generator)."""
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory,
                                        tgt_mask, memory_key_padding_mask=memory_key_padding_mask)


def init_parameters(model: nn.Module) -> None:
    """The tutorial's initialisation: Xavier-uniform for every matrix, biases and norms as torch
    made them."""
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)


def generate_square_subsequent_mask(sz: int, device: torch.device | str = "cpu") -> Tensor:
    """(sz, sz) float: 0 where query i may see key j (j <= i), -inf above the diagonal."""
    allowed = torch.ones((sz, sz), device=device).triu() == 1  # (sz, sz): [j, i] True for j <= i
    allowed = allowed.transpose(0, 1)
    return torch.zeros((sz, sz), device=device).masked_fill(~allowed, float("-inf"))


def create_mask(src: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """src (S, B), tgt (T, B) -> the four masks of the tutorial's training step: no source mask
    (all False), the float causal mask, and (B, S) / (B, T) padding masks, True at PAD."""
    src_len, tgt_len = src.shape[0], tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_len, src.device)
    src_mask = torch.zeros((src_len, src_len), device=src.device).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


@torch.no_grad()
def greedy_decode(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor, max_len: int,
                  start_symbol: int) -> Tensor:
    """The tutorial's decoding of one sentence: src (S, 1) -> (n, 1) ids starting with
    start_symbol, ending at EOS (or after max_len - 1 new tokens). The causal mask is the float
    mask turned boolean: True (masked) where it held -inf."""
    memory = model.encode(src, src_mask)  # (S, 1, E)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)  # (1, 1)
    for _ in range(max_len - 1):
        tgt_mask = generate_square_subsequent_mask(ys.size(0)).type(torch.bool)
        out = model.decode(ys, memory, tgt_mask).transpose(0, 1)  # (1, t, E)
        prob = model.generator(out[:, -1])  # (1, V)
        next_word = int(prob.argmax(dim=1).item())
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src).fill_(next_word)], dim=0)
        if next_word == EOS_IDX:
            break
    return ys


def translate_ids(model: Seq2SeqTransformer, src_ids: list[int]) -> list[int]:
    """The tutorial's `translate` without text: the source ids wrapped as BOS ... EOS, decoded
    with a budget of (wrapped length + 5), returned without BOS and without anything from EOS on."""
    src = torch.tensor([BOS_IDX, *src_ids, EOS_IDX]).view(-1, 1)  # (S, 1)
    num_tokens = src.shape[0]
    src_mask = torch.zeros(num_tokens, num_tokens).type(torch.bool)
    out = greedy_decode(model, src, src_mask, max_len=num_tokens + 5, start_symbol=BOS_IDX).flatten()
    ids = out[1:].tolist()
    return ids[: ids.index(EOS_IDX)] if EOS_IDX in ids else ids


@torch.no_grad()
def greedy_decode_batch(model: Seq2SeqTransformer, src: Tensor, max_new_tokens: int) -> Tensor:
    """The same decoding for a padded batch: src (S, B) wrapped sources, PAD after each ->
    (n, B) new ids (no BOS), PAD after each sequence's EOS. Padding masks keep each sequence's
    result what it would be alone."""
    S, B = src.shape
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)  # (B, S)
    src_mask = torch.zeros(S, S, dtype=torch.bool)
    memory = model.encode(src, src_mask, src_padding_mask)  # (S, B, E)
    ys = torch.full((1, B), BOS_IDX, dtype=torch.long)  # (1, B)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_new_tokens):
        tgt_mask = generate_square_subsequent_mask(ys.size(0)).type(torch.bool)
        out = model.decode(ys, memory, tgt_mask, src_padding_mask)  # (t, B, E)
        next_word = model.generator(out[-1]).argmax(dim=-1).masked_fill(done, PAD_IDX)  # (B,)
        ys = torch.cat([ys, next_word[None]], dim=0)
        done |= next_word == EOS_IDX
        if bool(done.all()):
            break
    return ys[1:]
