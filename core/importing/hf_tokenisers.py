"""A Hugging Face model folder's tokeniser, read as transformers 5 reads it: the (source, target)
SubwordVocab pair of a Marian, T5 or BART folder (core/data/subword.py, core/data/tokenisers.py).

Which tokeniser: tokenizer_config.json's `tokenizer_class` (with or without "Fast"), else
config.json's `model_type`. MarianTokenizer reads source.spm, target.spm and vocab.json (and
target_vocab.json with `separate_vocabs`), never a tokenizer.json; M2M100Tokenizer reads
sentencepiece.bpe.model and vocab.json (core/data/m2m100_tokeniser.py), its `__xx__` language
codes numbered after vocab.json in the class's list (`language_codes`), the source in src_lang
(default en), the target in tgt_lang (default the source's); every other class reads
tokenizer.json, T5Tokenizer and BartTokenizer (RobertaTokenizer) with their own pipeline.

The special tokens, as transformers resolves them: each named one (bos, eos, unk, sep, pad, cls,
mask) from tokenizer_config.json, or, in a folder whose tokenizer_config.json has no
`added_tokens_decoder` (written before transformers 4.34), from special_tokens_map.json over it,
or the class's default; the extra ones from `extra_special_tokens` (`additional_special_tokens`
in older folders). The ids a model needs: pad and eos are the tokeniser's (config.json's
pad_token_id and eos_token_id, when it gives them, must agree); the decoder's start token (the
vocabulary's `sos`) is the caller's `start_id`, else config.json's decoder_start_token_id. The
vocabularies are config.json's `vocab_size` ids long (`decoder_vocab_size` for a Marian target
with a vocabulary of its own): T5's embedding has more rows than its tokeniser has pieces.

Every problem is an ImportFileError, one line naming the file (and its line, key or piece).
"""

from __future__ import annotations

import re
from pathlib import Path

from minitx.core.data.m2m100_tokeniser import (
    M2M100_CODES,
    M2M100_LANGUAGE,
    SPM_FILE,
    M2M100Tokeniser,
    code_token,
)
from minitx.core.data.subword import MAX_FILE_BYTES, SubwordVocab
from minitx.core.data.tokenisers import (
    SENTENCEPIECE_LIKE,
    TOKENIZER_JSON,
    JsonTokeniser,
    MarianTokeniser,
    TokeniserFileError,
    spm_pieces,
    vocab_json,
)
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.json_files import read_json_object

TOKENIZER_CONFIG = "tokenizer_config.json"
TOKENS_MAP_FILE = "special_tokens_map.json"
ADDED_TOKENS = "added_tokens.json"
MODEL_CONFIG = "config.json"
MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")
M2M100_FILES = (SPM_FILE, "vocab.json")
TARGET_VOCAB = "target_vocab.json"
NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# transformers' class for a folder -> the tokeniser minitx computes it with
CLASSES = {"T5Tokenizer": "t5", "BartTokenizer": "roberta", "RobertaTokenizer": "roberta",
           "MarianTokenizer": "marian", "NllbTokenizer": "nllb", "MBart50Tokenizer": "mbart50",
           "MBartTokenizer": "mbart", "PegasusTokenizer": "pegasus", "M2M100Tokenizer": "m2m100"}
MODEL_TYPES = {"t5": "t5", "mt5": "t5", "umt5": "t5", "bart": "roberta", "marian": "marian", "mbart": "mbart",
               "pegasus": "pegasus", "m2m_100": "m2m100"}
# The multilingual tokenisers: a language code's spelling (its added tokens that match are the
# codes), the class's default source language, and where the code goes.
LANGUAGE_CODES = {"nllb": re.compile(r"[a-z]{3}_[A-Z][a-z]{3}"), "mbart50": re.compile(r"[a-z]{2}_[A-Z]{2}"),
                  "mbart": re.compile(r"[a-z]{2}_[A-Z]{2}")}
DEFAULT_LANGUAGE = {"nllb": "eng_Latn", "mbart50": "en_XX", "mbart": "en_XX"}
_SENTENCEPIECE = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
DEFAULTS = {  # each class's special tokens when the folder names none
    "t5": {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
    "roberta": {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
                "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"},
    "marian": {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
    "nllb": {"bos_token": "<s>", "sep_token": "</s>", "cls_token": "<s>", "mask_token": "<mask>",
             **_SENTENCEPIECE},
    "mbart50": {"sep_token": "</s>", "cls_token": "<s>", "mask_token": "<mask>", **_SENTENCEPIECE},
    "mbart": {"bos_token": "<s>", "sep_token": "</s>", "cls_token": "<s>", "mask_token": "<mask>",
              **_SENTENCEPIECE},
    "pegasus": {"mask_token": "<mask_2>", **_SENTENCEPIECE},
    "m2m100": {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "pad_token": "<pad>",
               "unk_token": "<unk>"},
    "file": {},
}
STRIP_FLAGS = ("lstrip", "rstrip", "single_word")  # an added token's, in the tokeniser's settings
MIN_SHARED_PIECES = 0.5  # a vocab.json holding fewer of a .spm's pieces was made for another model


def read_tokenisers(folder, config: dict, start_id: int | None = None) -> tuple[SubwordVocab, SubwordVocab]:
    """The folder's (source, target) vocabularies; `config` is its parsed config.json, `start_id`
    the decoder's start token when the caller knows better (generation_config.json)."""
    folder = Path(folder)
    tokenizer_config = _object(folder, TOKENIZER_CONFIG, required=False)
    family = _family(tokenizer_config, config)
    named, extra = _specials(folder, tokenizer_config, family)
    if family == "m2m100":
        source, target = _m2m100(folder, tokenizer_config, named, extra)
        files = {"source": M2M100_FILES, "target": M2M100_FILES}
    elif family == "marian":
        source, target = _marian(folder, tokenizer_config, named, extra)
        files = {"source": MARIAN_FILES, "target": MARIAN_FILES}
    else:
        path = folder / TOKENIZER_JSON
        if not path.is_file():
            raise ImportFileError(f"{folder} has no tokeniser: looked for {TOKENIZER_JSON} (minitx reads a "
                                  f"{config.get('model_type', 'model')!s:.40} folder's tokeniser from it)")
        settings = {"pipeline": family, "specials": list(dict.fromkeys([*named.values(), *extra])),
                    "cleanup": _bool(folder, tokenizer_config, "clean_up_tokenization_spaces", False)}
        if family == "t5":
            settings["eos"] = _needed(folder, named, "eos_token")
        elif family == "roberta":
            settings.update(cls=_needed(folder, named, "cls_token"), sep=_needed(folder, named, "sep_token"),
                            add_prefix_space=_bool(folder, tokenizer_config, "add_prefix_space", False),
                            trim_offsets=_bool(folder, tokenizer_config, "trim_offsets", True))
        elif family in SENTENCEPIECE_LIKE:
            settings.update(eos=_needed(folder, named, "eos_token"), unk=_needed(folder, named, "unk_token"))
        source = target = _built(folder, JsonTokeniser, {TOKENIZER_JSON: _read(path)}, settings)
        if family in LANGUAGE_CODES:
            source, target = _languages(folder, tokenizer_config, family, source)
        files = {"source": (TOKENIZER_JSON,), "target": (TOKENIZER_JSON,)}
    start = start_id if start_id is not None else config.get("decoder_start_token_id")
    if not _is_id(start):
        raise ImportFileError(f"{folder / MODEL_CONFIG} gives no decoder_start_token_id (the token the "
                              "decoder starts from)")
    vocab_size = config.get("vocab_size")
    sizes = {"source": vocab_size, "target": config.get("decoder_vocab_size") or vocab_size}
    vocabs = []
    for side, tokeniser in (("source", source), ("target", target)):
        pad = _role(folder, config, named, tokeniser, "pad")
        eos = _role(folder, config, named, tokeniser, "eos")
        unk = tokeniser.token_id(named["unk_token"]) if named.get("unk_token") else None
        size = sizes[side] if _is_id(sizes[side]) else None
        if size is not None and tokeniser.size > size:
            key = "decoder_vocab_size" if side == "target" and sizes["target"] != vocab_size else "vocab_size"
            raise ImportFileError(f"{folder / MODEL_CONFIG}: {key} is {size:,}, but the tokeniser "
                                  f"({', '.join(files[side])}) has {tokeniser.size:,} ids")
        sos = start if side == "target" or source is target or not _separate(tokenizer_config) else pad
        try:
            vocabs.append(SubwordVocab.make(tokeniser, side, pad, sos, eos, unk, size))
        except ValueError as e:
            raise ImportFileError(f"{folder / MODEL_CONFIG}: {e}") from None
    return vocabs[0], vocabs[1]


# -- files -----------------------------------------------------------------------------------


def _read(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ImportFileError(f"{path} is {size:,} bytes long; a tokeniser file is at most "
                                  f"{MAX_FILE_BYTES:,}")
        return path.read_bytes()
    except OSError as e:
        raise ImportFileError(f"cannot read {path}: {e.strerror or e}") from None


def _object(folder: Path, name: str, required: bool = True) -> dict:
    path = folder / name
    if not path.is_file() and not required:
        return {}
    return read_json_object(path, MAX_FILE_BYTES, "a tokeniser file")


def _built(folder: Path, kind, files: dict[str, bytes], settings: dict):
    try:
        return kind(files, settings)
    except TokeniserFileError as e:
        raise ImportFileError(f"{folder / e.file} {e.reason}") from None
    except ValueError as e:  # settings from the folder's tokenizer_config.json
        raise ImportFileError(f"{folder / TOKENIZER_CONFIG}: {e}") from None


# -- what the configuration says ---------------------------------------------------------------


def _family(tokenizer_config: dict, config: dict) -> str:
    name = tokenizer_config.get("tokenizer_class")
    if isinstance(name, str) and name.removesuffix("Fast") in CLASSES:
        return CLASSES[name.removesuffix("Fast")]
    if name is None and config.get("model_type") in MODEL_TYPES:
        return MODEL_TYPES[config["model_type"]]
    return "file"


def _token(folder: Path, file: str, key: str, value) -> str | None:
    """A special token as a file gives it: text, or an AddedToken object with its `content`."""
    if isinstance(value, dict):
        value = value.get("content")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ImportFileError(f"{folder / file}: {key} is not a token")
    return value


def _specials(folder: Path, tokenizer_config: dict, family: str) -> tuple[dict[str, str], list[str]]:
    """The named special tokens (key -> text) and the extra ones, as transformers resolves them."""
    named = dict(DEFAULTS[family])
    sources = [(TOKENIZER_CONFIG, tokenizer_config)]
    if "added_tokens_decoder" not in tokenizer_config and (folder / TOKENS_MAP_FILE).is_file():
        sources.append((TOKENS_MAP_FILE, _object(folder, TOKENS_MAP_FILE)))
    extra: list[str] = []
    for file, data in sources:
        for key in NAMED:
            if key in data:
                token = _token(folder, file, key, data[key])
                if token is None:
                    named.pop(key, None)
                else:
                    named[key] = token
        for key in ("extra_special_tokens", "additional_special_tokens"):
            listed = data.get(key)
            if isinstance(listed, dict):
                listed = list(listed.values())
            if listed is None:
                continue
            if not isinstance(listed, list):
                raise ImportFileError(f"{folder / file}: {key} is not a list of tokens")
            extra += [t for t in (_token(folder, file, key, v) for v in listed) if t is not None]
    return named, list(dict.fromkeys(extra))


def _needed(folder: Path, named: dict[str, str], key: str) -> str:
    if key not in named:
        raise ImportFileError(f"{folder / TOKENIZER_CONFIG} names no {key}, which the tokeniser needs")
    return named[key]


def _bool(folder: Path, data: dict, key: str, default: bool) -> bool:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ImportFileError(f"{folder / TOKENIZER_CONFIG}: {key} is not true or false")
    return value


def _separate(tokenizer_config: dict) -> bool:
    return tokenizer_config.get("separate_vocabs") is True


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _role(folder: Path, config: dict, named: dict[str, str], tokeniser, role: str) -> int:
    """The pad or eos id: the tokeniser's token, which config.json, if it says, must agree with."""
    token = named.get(f"{role}_token")
    mine = tokeniser.token_id(token) if token else None
    theirs = config.get(f"{role}_token_id")
    if isinstance(theirs, list) and mine in theirs:  # generation may stop at several ids
        theirs = mine
    if theirs is not None and not _is_id(theirs):
        raise ImportFileError(f"{folder / MODEL_CONFIG}: {role}_token_id is not a token id")
    if mine is None and theirs is None:
        raise ImportFileError(f"{folder} names no {role} token: neither its {TOKENIZER_CONFIG} nor its "
                              f"{MODEL_CONFIG} ({role}_token_id)")
    if mine is not None and theirs is not None and mine != theirs:
        raise ImportFileError(f"{folder / MODEL_CONFIG}: {role}_token_id is {theirs}, but the tokeniser's "
                              f"{role} token {token!r} is id {mine}")
    return mine if mine is not None else theirs


# -- languages -------------------------------------------------------------------------------


def _languages(folder: Path, tokenizer_config: dict, family: str, tokeniser) -> tuple:
    """(source, target) tokenisers of a multilingual folder: its codes (the special tokens
    spelled as the family spells them), the source in tokenizer_config.json's src_lang (else the
    class's default) and the target in its tgt_lang (else the source's), as transformers sets
    them; the code before the text (NLLB, mBART-50) or after its </s> (mBART, NLLB with
    legacy_behaviour)."""
    pattern = LANGUAGE_CODES[family]
    codes = sorted(t for t in tokeniser.special_tokens().values() if pattern.fullmatch(t))
    if not codes:
        raise ImportFileError(f"{folder / TOKENIZER_JSON} has no language codes, which its tokeniser "
                              f"({family}) puts around every text")
    legacy = _bool(folder, tokenizer_config, "legacy_behaviour", False)
    suffix = family == "mbart" or (family == "nllb" and legacy)
    chosen = {}
    for key, default in (("src_lang", DEFAULT_LANGUAGE[family]), ("tgt_lang", None)):
        value = tokenizer_config.get(key)
        if value is None:
            value = default if default is not None else chosen["src_lang"]
        if value not in codes:
            raise ImportFileError(f"{folder / TOKENIZER_CONFIG}: {key} {str(value)[:40]!r} is not one of the "
                                  f"tokeniser's {len(codes)} language codes")
        chosen[key] = value
    source = tokeniser.with_languages(codes, "suffix" if suffix else "prefix", chosen["src_lang"])
    return source, source.with_language(chosen["tgt_lang"])


# -- M2M100 ----------------------------------------------------------------------------------


def _m2m100(folder: Path, tokenizer_config: dict, named: dict[str, str], extra: list[str]):
    """(source, target) M2M100Tokeniser of a folder with M2M100Tokenizer's own files."""
    missing = [name for name in M2M100_FILES if not (folder / name).is_file()]
    if missing:
        raise ImportFileError(f"{folder} has no {' or '.join(missing)}: M2M100Tokenizer reads "
                              f"{' and '.join(M2M100_FILES)} (or give the folder a {TOKENIZER_JSON})")
    files = {name: _read(folder / name) for name in M2M100_FILES}
    kind = tokenizer_config.get("language_codes", "m2m100")
    if kind not in M2M100_CODES:
        raise ImportFileError(f"{folder / TOKENIZER_CONFIG}: language_codes {str(kind)[:40]!r} is not one of "
                              f"{', '.join(M2M100_CODES)}")
    codes = M2M100_CODES[kind]
    try:
        vocab = vocab_json("vocab.json", files["vocab.json"])
    except TokeniserFileError as e:
        raise ImportFileError(f"{folder / e.file} {e.reason}") from None
    numbered = {**vocab, **{code_token(c): len(vocab) + i for i, c in enumerate(codes)}}
    specials = list(dict.fromkeys([*named.values(), *extra]))
    chosen = {}
    for key, default in (("src_lang", M2M100_LANGUAGE), ("tgt_lang", None)):
        value = tokenizer_config.get(key)
        value = value if value is not None else default if default is not None else chosen["src_lang"]
        if value not in codes:
            raise ImportFileError(f"{folder / TOKENIZER_CONFIG}: {key} {str(value)[:40]!r} is not one of the "
                                  f"tokeniser's {len(codes)} language codes")
        chosen[key] = value
    settings = {"encode_with": SPM_FILE, "decode_with": SPM_FILE, "vocab": "vocab.json", "specials": specials,
                "eos": _needed(folder, named, "eos_token"), "unk": _needed(folder, named, "unk_token"),
                "cleanup": _bool(folder, tokenizer_config, "clean_up_tokenization_spaces", False),
                "added": _added(folder, tokenizer_config, numbered, specials), "languages": list(codes)}
    return tuple(_built(folder, M2M100Tokeniser, files, {**settings, "side": side, "language": chosen[key]})
                 for side, key in (("source", "src_lang"), ("target", "tgt_lang")))


# -- Marian ----------------------------------------------------------------------------------


def _marian(folder: Path, tokenizer_config: dict, named: dict[str, str], extra: list[str]):
    separate = _separate(tokenizer_config)
    needed = MARIAN_FILES + ((TARGET_VOCAB,) if separate else ())
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise ImportFileError(f"{folder} has no {' or '.join(missing)}: a Marian tokeniser is "
                              f"{', '.join(needed[:-1])} and {needed[-1]} (opus-mt folders keep no "
                              f"{TOKENIZER_JSON})")
    files = {name: _read(folder / name) for name in needed}
    target_vocab = TARGET_VOCAB if separate else "vocab.json"
    for spm, vocab in (("source.spm", "vocab.json"), ("target.spm", target_vocab)):
        _check_pieces(folder, files, spm, vocab)
    specials = list(dict.fromkeys([*named.values(), *extra]))
    common = {"specials": specials, "eos": _needed(folder, named, "eos_token"),
              "unk": _needed(folder, named, "unk_token"),
              "cleanup": _bool(folder, tokenizer_config, "clean_up_tokenization_spaces", False)}
    sides = {"source": {"encode_with": "source.spm", "decode_with": "source.spm", "vocab": "vocab.json"},
             "target": {"encode_with": "target.spm", "vocab": target_vocab,
                        "decode_with": "target.spm" if separate else "source.spm"}}
    # one tokeniser for both sides in transformers: its added tokens take their ids from vocab.json
    added = _added(folder, tokenizer_config, vocab_json("vocab.json", files["vocab.json"]), specials)
    built = []
    for side, names in sides.items():
        settings = {"side": side, **names, **common, "added": added}
        built.append(_built(folder, MarianTokeniser, files, settings))
    return built[0], built[1]


def _check_pieces(folder: Path, files: dict[str, bytes], spm: str, vocab: str) -> None:
    """A vocab.json made for another model's .spm: most of the .spm's pieces are not in it."""
    try:
        pieces = spm_pieces(spm, files[spm])
        known = vocab_json(vocab, files[vocab])
    except TokeniserFileError as e:
        raise ImportFileError(f"{folder / e.file} {e.reason}") from None
    absent = [p for p in pieces if p not in known]
    if pieces and len(absent) > (1 - MIN_SHARED_PIECES) * len(pieces):
        raise ImportFileError(f"{folder / vocab} does not match {spm}: it lacks {spm}'s piece {absent[0]!r} "
                              f"and {len(absent) - 1:,} more of its {len(pieces):,}")


def _added(folder: Path, tokenizer_config: dict, vocab: dict[str, int], specials: list[str]) -> list[list]:
    """The added tokens MarianTokenizer splits typed text at, each [text, id, lstrip, rstrip,
    single_word]: tokenizer_config.json's added_tokens_decoder (or the older added_tokens.json),
    then every special token (its vocab.json id, or the next free one, as transformers adds it)."""
    added: dict[str, list] = {}
    decoder = tokenizer_config.get("added_tokens_decoder")
    if decoder is not None:
        if not isinstance(decoder, dict):
            raise ImportFileError(f"{folder / TOKENIZER_CONFIG}: added_tokens_decoder is not an object")
        for key, token in decoder.items():
            text = _token(folder, TOKENIZER_CONFIG, "added_tokens_decoder", token)
            if not key.isdigit() or text is None:
                raise ImportFileError(f"{folder / TOKENIZER_CONFIG}: added_tokens_decoder's entry "
                                      f"{key[:20]!r} is not an id and a token")
            flags = token if isinstance(token, dict) else {}
            added[text] = [text, int(key), *(flags.get(f) is True for f in STRIP_FLAGS)]
    elif (folder / ADDED_TOKENS).is_file():
        for text, i in _object(folder, ADDED_TOKENS).items():
            if not _is_id(i):
                raise ImportFileError(f"{folder / ADDED_TOKENS}: {text[:40]!r} has no token id")
            added[text] = [text, i, False, False, False]
    taken = len({**vocab, **added})
    for text in specials:
        if text not in added:
            i = vocab.get(text)
            if i is None:
                i, taken = taken, taken + 1
            added[text] = [text, i, False, False, False]
    return list(added.values())
