"""A Hugging Face folder of opus-mt's shape for the benchmarks, made offline: transformers'
MarianConfig and MarianMTModel (random weights) saved with save_pretrained, and a Marian
tokeniser of the same vocabulary size (tests/huggingface/tiny_tokenisers.py's save_wide_marian:
its source.spm and target.spm are tiny, its vocab.json fills every id).

OPUS_MT is Helsinki-NLP/opus-mt-en-de's shape: 6+6 layers, 8 heads, d_model 512, d_ff 2048,
58,101 pieces, 512 positions, SiLU, scaled embeddings, tied tables (73.9M parameters). Its
generation settings are an opus-mt folder's (PAD never produced, EOS forced at the last
position, `num_beams`) with max_length `new_tokens` + 1; with `fixed_length`, min_length too:
every greedy decode, minitx's and transformers', then makes exactly `new_tokens` tokens (the
last the forced EOS), so two decodes do the same work whatever the random model prefers.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tokeniser builder lives with the tests that check it
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@dataclass(frozen=True)
class Shape:
    layers: int  # encoder and decoder each
    heads: int
    d_model: int
    d_ff: int
    vocab: int
    positions: int = 512


OPUS_MT = Shape(layers=6, heads=8, d_model=512, d_ff=2048, vocab=58_101)
SMOKE = Shape(layers=1, heads=2, d_model=32, d_ff=64, vocab=1_000, positions=128)


def quiet_transformers() -> None:
    """No progress bars or advice on stderr from transformers (a benchmark prints its table)."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def make_folder(folder: Path, shape: Shape, new_tokens: int = 40, num_beams: int = 1,
                fixed_length: bool = True, seed: int = 0) -> Path:
    """Save a random Marian model of `shape` with its tokeniser into `folder`; returns it."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    from tests.huggingface.tiny_tokenisers import save_wide_marian

    quiet_transformers()
    pad, eos = shape.vocab - 1, 0  # opus-mt's numbering: </s> 0, <unk> 1, …, <pad> last
    config = MarianConfig(vocab_size=shape.vocab, decoder_vocab_size=shape.vocab, d_model=shape.d_model,
                          encoder_layers=shape.layers, decoder_layers=shape.layers,
                          encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads,
                          encoder_ffn_dim=shape.d_ff, decoder_ffn_dim=shape.d_ff,
                          max_position_embeddings=shape.positions, activation_function="swish",
                          scale_embedding=True, share_encoder_decoder_embeddings=True, pad_token_id=pad,
                          eos_token_id=eos, bos_token_id=eos, decoder_start_token_id=pad,
                          forced_eos_token_id=eos)
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    generation = model.generation_config
    generation.bad_words_ids = [[pad]]
    generation.max_length = new_tokens + 1  # the start token counts
    if fixed_length:
        generation.min_length = new_tokens + 1
    generation.num_beams = num_beams
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MarianTokenizer recommends sacremoses, which it does not use
        save_wide_marian(folder, shape.vocab)
    return folder


def weights_bytes(folder: Path) -> int:
    return (folder / "model.safetensors").stat().st_size
