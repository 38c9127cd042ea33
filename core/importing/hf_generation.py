"""A Hugging Face folder's generation settings (generation_config.json, or the generation keys of
config.json where a folder has no generation_config.json, as transformers falls back) -> minitx's
Generation (core/data/generation.py), and a note for each setting minitx does not compute.

What transformers' generate() does with a setting minitx does not compute (sampling, repetition
penalties, diverse beams) cannot be reproduced, so it is named once, never applied in silence:
minitx's greedy and beam outputs are then generate()'s under the settings it does compute.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from minitx.core.data.generation import EARLY_STOPPING, Generation
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.hf_weights import read_json

# A folder that sets no max_length gets transformers' default: 20 new tokens, within the model's
# positions (max_position_embeddings) where config.json has them.
DEFAULT_NEW_TOKENS = 20
# Settings that change what generate() computes and that minitx does not compute, each with the
# value at which it changes nothing.
NOT_COMPUTED = {"do_sample": False, "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0,
                "encoder_no_repeat_ngram_size": 0, "num_beam_groups": 1, "diversity_penalty": 0.0,
                "exponential_decay_length_penalty": None, "forced_decoder_ids": None, "sequence_bias": None,
                "constraints": None, "force_words_ids": None, "renormalize_logits": False,
                "guidance_scale": None, "penalty_alpha": None, "prompt_lookup_num_tokens": None}


def read_generation(folder: Path, config: dict[str, Any], vocab_size: int) -> tuple[Generation, list[str]]:
    """The folder's settings and the notes a person should hear once about them."""
    path = folder / "generation_config.json"
    settings = read_json(path) if path.is_file() else config
    source = path if path.is_file() else folder / "config.json"

    def get(key: str, default: Any = None) -> Any:
        value = settings.get(key)
        return config.get(key, default) if value is None and settings is not config else \
            (default if value is None else value)

    def token(key: str, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < vocab_size:
            raise ImportFileError(f"{source}: {key} must be a token id below {vocab_size}, not {value!r}")
        return value

    def tokens(key: str, value: Any) -> tuple[int, ...]:
        if value is None:
            return ()
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list):
            raise ImportFileError(f"{source}: {key} must be a list of token ids, not {str(value)[:40]}")
        return tuple(token(key, v) for v in value)

    def count(key: str, default: int = 0) -> int:
        value = get(key, default)
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ImportFileError(f"{source}: {key} must be a non-negative integer, not {value!r}")
        return value

    eos = tokens("eos_token_id", get("eos_token_id"))
    if not eos:
        raise ImportFileError(f"{source} names no eos_token_id: minitx cannot tell where an output ends")
    start = get("decoder_start_token_id", get("bos_token_id"))
    if start is None:
        raise ImportFileError(f"{source} names no decoder_start_token_id")
    pad = get("pad_token_id")
    words = get("bad_words_ids")
    if words is not None and (not isinstance(words, list)
                              or not all(isinstance(w, list) and w for w in words)):
        raise ImportFileError(f"{source}: bad_words_ids must be a list of token id lists")
    early = get("early_stopping", False)
    if early not in EARLY_STOPPING or (isinstance(early, int) and not isinstance(early, bool)):
        raise ImportFileError(f"{source}: early_stopping must be true, false or \"never\", not {early!r}")
    penalty = get("length_penalty", 1.0)
    if not isinstance(penalty, (int, float)) or isinstance(penalty, bool) or not math.isfinite(penalty):
        raise ImportFileError(f"{source}: length_penalty must be a number, not {penalty!r}")
    max_length = count("max_length")
    if not max_length:
        positions = config.get("max_position_embeddings")
        max_length = DEFAULT_NEW_TOKENS + 1
        if isinstance(positions, int) and not isinstance(positions, bool) and positions > 1:
            max_length = min(max_length, positions)
    min_new = count("min_new_tokens")
    generation = Generation(
        start=token("decoder_start_token_id", start),
        eos=eos,
        pad=token("pad_token_id", pad) if pad is not None else eos[0],
        suppressed=tokens("suppress_tokens", get("suppress_tokens")),
        bad_words=tuple(tokens("bad_words_ids", w) for w in (words or [])),
        forced_bos=token("forced_bos_token_id", get("forced_bos_token_id"))
        if get("forced_bos_token_id") is not None else None,
        forced_eos=token("forced_eos_token_id", get("forced_eos_token_id"))
        if get("forced_eos_token_id") is not None else None,
        max_length=max_length,
        max_new_tokens=count("max_new_tokens"),
        # min_new_tokens counts after the start token, and wins over min_length
        min_length=min_new + 1 if min_new else count("min_length"),
        no_repeat_ngram_size=count("no_repeat_ngram_size"),
        begin_suppressed=tokens("begin_suppress_tokens", get("begin_suppress_tokens")),
        num_beams=count("num_beams", 1) or 1,
        length_penalty=float(penalty),
        early_stopping=early,
    )
    notes = []
    for key, neutral in NOT_COMPUTED.items():
        value = get(key)
        if value is not None and value != neutral and value != []:
            shown = str(value) if not isinstance(value, (list, dict)) else "set"
            notes.append(f"{source.name} sets {key} {shown[:40]}, which minitx does not compute: "
                         "its outputs are generate()'s without it")
    if generation.num_beams > 1:
        notes.append(f"{source.name} searches with a beam of {generation.num_beams}: generate() and "
                     f"pipeline() translate with it; minitx steps greedily unless asked for --beams")
    return generation, notes
