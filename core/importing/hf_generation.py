"""A Hugging Face folder's generation settings -> minitx's Generation (core/data/generation.py),
read exactly as transformers 5 reads them: from generation_config.json alone when the folder has
one (a key it lacks takes generate()'s default, never config.json's), else from config.json as
GenerationConfig.from_model_config builds them (every generation key config.json sets, then those
of a `decoder` / `generator` / `text_config` block for keys still unset). Each setting keeps the
file it came from (`minitx inspect` shows it).

A setting that changes what generate() computes and that minitx does not compute (sampling,
diverse or constrained beams, contrastive search...) cannot be reproduced: it is kept in the
Generation's not_computed and named by every command that decodes, never applied in silence;
minitx's greedy and beam outputs are then generate()'s under the settings it does compute.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from minitx.core.data.generation import Generation, check_beam_settings
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.hf_weights import read_json

GENERATION_FILE = "generation_config.json"
# A folder that sets no max_length gets transformers' default: 20 new tokens, within the model's
# positions (max_position_embeddings) where config.json has them.
DEFAULT_NEW_TOKENS = 20
# The settings minitx computes, with generate()'s default for each (its _get_default_generation_params).
COMPUTED = {"decoder_start_token_id": None, "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,
            "max_length": 20, "max_new_tokens": None, "min_length": 0, "min_new_tokens": None,
            "num_beams": 1, "length_penalty": 1.0, "early_stopping": False,
            "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "sequence_bias": None,
            "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None,
            "forced_bos_token_id": None, "forced_eos_token_id": None, "remove_invalid_values": False,
            "exponential_decay_length_penalty": None, "suppress_tokens": None,
            "begin_suppress_tokens": None, "renormalize_logits": False}
# Settings that change what generate() computes and that minitx does not compute, each with the
# value at which it changes nothing (None: unset).
NOT_COMPUTED = {"do_sample": False, "num_beam_groups": 1, "diversity_penalty": 0.0, "constraints": None,
                "force_words_ids": None, "guidance_scale": 1.0, "penalty_alpha": None,
                "prompt_lookup_num_tokens": None, "use_mtp": None, "assistant_early_exit": None,
                "dola_layers": None, "watermarking_config": None, "stop_strings": None, "max_time": None,
                "token_healing": None}
# Sampling's settings: generate() reads them only with do_sample true (it ignores them otherwise).
SAMPLING = {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": None, "typical_p": 1.0,
            "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "top_h": None}
# GenerationConfig's other keys: what generate() returns or how fast, never which ids or scores.
NO_EFFECT = {"_from_model_config", "transformers_version", "output_attentions", "output_hidden_states",
             "output_logits", "output_scores", "return_dict_in_generate", "use_cache", "cache_implementation",
             "cache_config", "compile_config", "disable_compile", "max_cache_len", "num_return_sequences",
             "prefill_chunk_size", "continuous_batching_config", "low_memory", "is_assistant",
             "num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold",
             "assistant_lookbehind", "target_lookbehind", "max_matching_ngram_size", "speculation_type",
             "assistant_ensemble_weight"}
DECODER_BLOCKS = ("decoder", "generator", "text_config")  # from_model_config's nested configs, in its order


def generation_settings(folder: Path, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(setting -> value, setting -> the file it came from) as transformers reads them; a setting
    neither file sets is absent (generate's default applies)."""
    path = folder / GENERATION_FILE
    if path.is_file():
        settings = {k: v for k, v in read_json(path).items() if v is not None}
        return settings, dict.fromkeys(settings, GENERATION_FILE)
    # GenerationConfig.from_model_config: config.json's keys less the unset ones...
    settings = {k: v for k, v in config.items() if v is not None and k != "_from_model_config"}
    where = dict.fromkeys(settings, "config.json")
    # ...then a decoder block's, for generation keys still unset
    block = next((config[name] for name in DECODER_BLOCKS if config.get(name)), None)
    if isinstance(block, dict):
        for key in (*COMPUTED, *NOT_COMPUTED, *SAMPLING):
            if key not in settings and block.get(key) is not None:
                settings[key], where[key] = block[key], "config.json (decoder)"
    return settings, where


def read_generation(folder: Path, config: dict[str, Any], vocab_size: int) -> tuple[Generation, list[str]]:
    """The folder's settings and the notes a person should hear once about them."""
    settings, where = generation_settings(folder, config)
    has_file = (folder / GENERATION_FILE).is_file()

    def get(key: str, default: Any = None) -> Any:
        return settings.get(key, default)

    def fail(key: str, what: str) -> ImportFileError:
        file = folder / where.get(key, GENERATION_FILE).split(" ")[0]
        return ImportFileError(f"{file}: {key} {what}")

    def token(key: str, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < vocab_size:
            raise fail(key, f"must be a token id below {vocab_size}, not {str(value)[:40]}")
        return value

    def tokens(key: str, value: Any) -> tuple[int, ...]:
        if value is None:
            return ()
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list):
            raise fail(key, f"must be a list of token ids, not {str(value)[:40]}")
        return tuple(token(key, v) for v in value)

    def count(key: str, default: int = 0) -> int:
        value = get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise fail(key, f"must be a non-negative integer, not {str(value)[:40]}")
        return value

    def penalty(key: str) -> float:
        value = get(key, 1.0)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 1.0:
            return 1.0  # neutral: generate builds no processor for it
        if not isinstance(value, float) or not math.isfinite(value) or value <= 0:
            raise fail(key, f"must be a positive float (generate() refuses {str(value)[:40]}, as a whole "
                            "number too: 2.0, not 2)")
        return value

    eos = tokens("eos_token_id", get("eos_token_id"))
    if not eos:
        raise ImportFileError(f"{folder / (GENERATION_FILE if has_file else 'config.json')} names no "
                              "eos_token_id: minitx cannot tell where an output ends")
    start = get("decoder_start_token_id", get("bos_token_id"))  # generate's fallback
    if start is None:
        raise ImportFileError(f"{folder / (GENERATION_FILE if has_file else 'config.json')} names no "
                              "decoder_start_token_id (nor bos_token_id)")
    pad = get("pad_token_id")
    words = get("bad_words_ids")
    if words is not None and (not isinstance(words, list)
                              or not all(isinstance(w, list) and w for w in words)):
        raise fail("bad_words_ids", "must be a list of token id lists")
    early, length_penalty = get("early_stopping", False), get("length_penalty", 1.0)
    try:
        check_beam_settings(count("num_beams", 1) or 1, length_penalty, early)
    except ValueError as e:
        raise fail("num_beams", f"/ length_penalty / early_stopping: {e}") from None
    max_length = count("max_length")
    if not max_length:
        positions = config.get("max_position_embeddings")
        max_length = DEFAULT_NEW_TOKENS + 1
        if isinstance(positions, int) and not isinstance(positions, bool) and positions > 1:
            max_length = min(max_length, positions)
    min_new = count("min_new_tokens")
    if get("max_new_tokens") == 0:
        raise fail("max_new_tokens", "must be above 0 (GenerationConfig refuses 0)")
    forced_bos, forced_eos = get("forced_bos_token_id"), get("forced_eos_token_id")
    suppressed = tokens("suppress_tokens", get("suppress_tokens"))
    for key, forced in (("forced_bos_token_id", forced_bos), ("forced_eos_token_id", forced_eos)):
        if forced is not None and forced in suppressed:  # GenerationConfig.validate refuses it too
            raise fail(key, f"{forced} is also in suppress_tokens: every score would be -inf at its step")
    generation = Generation(
        start=token("decoder_start_token_id", start),
        eos=eos,
        pad=token("pad_token_id", pad) if pad is not None else eos[0],
        suppressed=suppressed,
        bad_words=tuple(tokens("bad_words_ids", w) for w in (words or [])),
        forced_bos=token("forced_bos_token_id", forced_bos) if forced_bos is not None else None,
        forced_eos=token("forced_eos_token_id", forced_eos) if forced_eos is not None else None,
        max_length=max_length,
        max_new_tokens=count("max_new_tokens"),
        # min_new_tokens counts after the start token, and wins over min_length
        min_length=min_new + 1 if min_new else count("min_length"),
        no_repeat_ngram_size=count("no_repeat_ngram_size"),
        begin_suppressed=tokens("begin_suppress_tokens", get("begin_suppress_tokens")),
        num_beams=count("num_beams", 1) or 1,
        length_penalty=float(length_penalty),
        early_stopping=early,
        repetition_penalty=penalty("repetition_penalty"),
        encoder_repetition_penalty=penalty("encoder_repetition_penalty"),
        sequence_bias=_sequence_bias(get("sequence_bias"), lambda what: fail("sequence_bias", what), token),
        encoder_no_repeat_ngram_size=count("encoder_no_repeat_ngram_size"),
        exponential_decay_length_penalty=_decay(get("exponential_decay_length_penalty"),
                                                lambda what: fail("exponential_decay_length_penalty", what)),
        remove_invalid_values=get("remove_invalid_values") is True,
        renormalize_logits=get("renormalize_logits") is True,
        not_computed=tuple(not_computed(settings)),
        sources=tuple(_sources(settings, where)),
    )
    notes = []
    if generation.not_computed:
        notes.append(generation.not_computed_line)
    unknown = unknown_keys(settings) if has_file else []
    if unknown:
        notes.append(f"{GENERATION_FILE} has {', '.join(unknown)[:80]}, which generate() does not read "
                     "(not a GenerationConfig setting); nor does minitx")
    if generation.num_beams > 1:
        notes.append(f"{where.get('num_beams', GENERATION_FILE)} searches with a beam of "
                     f"{generation.num_beams}: generate() and pipeline() translate with it; minitx steps "
                     "greedily unless asked for --beams")
    return generation, notes


def not_computed(settings: dict[str, Any]) -> list[str]:
    """Each set value minitx does not compute, as "key value": sampling's settings only with
    do_sample true (generate ignores them otherwise), and any key GenerationConfig does not know
    in a generation_config.json (what it does is not known here)."""
    out = [f"{key} {_shown(settings[key])}" for key, neutral in NOT_COMPUTED.items()
           if key in settings and settings[key] != neutral and settings[key] != []]
    if settings.get("do_sample") is True:  # each sampling setting that changes what is drawn
        out += [f"{key} {_shown(settings.get(key, default))}" for key, default in SAMPLING.items()
                if settings.get(key, default) not in (None, 0 if key == "top_k" else default)]
    return out


def unknown_keys(settings: dict[str, Any]) -> list[str]:
    """Keys of a generation_config.json that GenerationConfig does not know (generate ignores them)."""
    return sorted(set(settings) - set(COMPUTED) - set(NOT_COMPUTED) - set(SAMPLING) - NO_EFFECT)


def _sources(settings: dict[str, Any], where: dict[str, str]) -> list[tuple[str, str, str]]:
    """(setting, value, file) for every generation setting: the file that set it, or "default"
    (generate's own); sampling's settings say when generate ignores them."""
    rows = []
    sampling = settings.get("do_sample") is True
    for key, default in (*COMPUTED.items(), *NOT_COMPUTED.items(), *SAMPLING.items()):
        if key in settings:
            file = where[key]
            if key in SAMPLING and not sampling:
                file += ", ignored: do_sample is off"
            rows.append((key, _shown(settings[key]), file))
        elif key in COMPUTED or (sampling and key in SAMPLING and default not in (None, 0)):
            rows.append((key, _shown(default), "default"))
    return rows


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:59] + "…"


def _sequence_bias(value: Any, fail, token) -> tuple[tuple[tuple[int, ...], float], ...]:
    """[[ids, bias], ...] (generation_config.json's form) -> ((ids, bias), ...), a later pair for the
    same ids replacing an earlier one's bias in the earlier one's place, as transformers' dict does."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise fail("must be a non-empty list of [token ids, bias] pairs")
    biases: dict[tuple[int, ...], float] = {}
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], list) and pair[0]):
            raise fail(f"must be a list of [token ids, bias] pairs, not {str(pair)[:40]}")
        if not isinstance(pair[1], float) or not math.isfinite(pair[1]):
            raise fail(f"biases must be floats (generate() refuses {str(pair[1])[:20]}: write 1.0, not 1)")
        biases[tuple(token("sequence_bias", t) for t in pair[0])] = pair[1]
    return tuple(biases.items())


def _decay(value: Any, fail) -> tuple[int, float] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], int)
            and not isinstance(value[0], bool) and value[0] >= 0
            and isinstance(value[1], (int, float)) and not isinstance(value[1], bool)
            and math.isfinite(value[1])):
        raise fail(f"must be [start, factor], not {str(value)[:40]}")
    return value[0], float(value[1])
