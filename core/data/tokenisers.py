"""Hugging Face tokenisers without transformers: a folder's tokenizer.json through the `tokenizers`
library, Marian's sentencepiece models through `sentencepiece`, each computing what transformers
5's own tokeniser class computes for the same files (core/data/subword.py makes a vocabulary of
one; core/importing/hf_tokenisers.py reads them from a folder).

What transformers 5 does, and so what is done here:
- tokenizer.json: read as the `tokenizers` library reads it, except where transformers' class
  for the family rebuilds parts of it from its own code, keeping only the file's vocabulary:
  T5Tokenizer (the file's Precompiled normaliser, if any, and nothing else; whitespace split, then
  "▁" before every word; </s> appended) and BartTokenizer, which is RobertaTokenizer (no
  normaliser; byte-level pieces; <s> … </s>), and the sentencepiece-made ones, NllbTokenizer,
  MBart50Tokenizer, MBartTokenizer and PegasusTokenizer (the file's pieces, the class's own
  normalisers around the file's Precompiled map, Metaspace, text then </s>, a language code
  before it (NLLB, mBART-50) or after it (mBART, NLLB's legacy_behaviour)). Padding and
  truncation stored in the file are off, as `tokenizer(text)` has them. The named special
  tokens are special (skipped by decode).
  `clean_up_tokenization_spaces` is ignored for a BPE model, as transformers 5 ignores it.
- Marian (MarianTokenizer, a Python tokeniser): text is split at the added tokens (</s>, <unk>,
  <pad>: typed, they are those tokens), a leading ">>xx<<" language code is a token of its own,
  the rest is cut by the side's sentencepiece model (source.spm for sources, target.spm for
  targets), each piece looked up in vocab.json (target_vocab.json for targets when the folder
  keeps separate vocabularies), a piece it lacks read as <unk>; </s> is appended. Decoding skips
  every special token and joins the pieces with the SOURCE model when the vocabulary is shared
  (transformers 5's default: `use_source_tokenizer` is `not separate_vocabs`), with the target
  model otherwise.

A tokeniser is built from its files' bytes and the settings resolved from the folder's
configuration (`settings`, plain JSON), so a checkpoint rebuilds it exactly. Every problem with
a file is a TokeniserFileError naming the file.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Sequence
from functools import cached_property

import sentencepiece
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

TOKENIZER_JSON = "tokenizer.json"
# tokenizer.json as it is, or as transformers' class rebuilds it (T5Tokenizer, RobertaTokenizer,
# NllbTokenizer, MBart50Tokenizer, MBartTokenizer, PegasusTokenizer)
PIPELINES = ("file", "t5", "roberta", "nllb", "mbart50", "mbart", "pegasus")
SENTENCEPIECE_LIKE = ("nllb", "mbart50", "mbart", "pegasus")  # Metaspace, the file's pieces, "$A </s>"
LANGUAGE_PLACES = ("prefix", "suffix")  # a language code before the text, or after its </s>
SPIECE_UNDERLINE = "▁"
MAX_ADDED_TOKENS = 10_000
MAX_TOKEN_TEXT = 200


class TokeniserFileError(ValueError):
    """A tokeniser file that cannot be used: `file` names it, `reason` says why (one line, to
    follow the file's name or key)."""

    def __init__(self, file: str, reason: str) -> None:
        self.file, self.reason = file, " ".join(reason.split())
        super().__init__(f"{file} {self.reason}")


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:160]


def parse_json(file: str, data: bytes):
    """A JSON file's content, or TokeniserFileError naming its line."""
    try:
        return json.loads(data.decode("utf-8-sig"))  # a byte order mark first is not an error
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise TokeniserFileError(file, f"line {line}: byte {data[e.start]:#04x} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise TokeniserFileError(file, f"line {e.lineno}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise TokeniserFileError(file, "is nested too deeply to be a tokeniser file") from None


def cleanup(text: str) -> str:
    """transformers' clean_up_tokenization: no space before some punctuation and English clitics."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                          (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


# -- settings (from a folder's configuration, or a checkpoint's metadata: checked either way) ---


def _text(value, what: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TOKEN_TEXT:
        raise ValueError(f"the tokeniser's {what} is not a token's text")
    return value


def _flag(settings: dict, key: str, default: bool) -> bool:
    value = settings.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"the tokeniser's {key} is not true or false")
    return value


def _texts(value, what: str) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_ADDED_TOKENS:
        raise ValueError(f"the tokeniser's {what} are not a list of tokens")
    return [_text(v, what) for v in value]


def _only(settings, allowed: set[str]) -> dict:
    if not isinstance(settings, dict):
        raise ValueError("the tokeniser's settings are not an object")
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise ValueError(f"the tokeniser's settings have an unknown field {unknown[0][:40]!r}")
    return settings


class _Pieces:
    """A vocabulary's view of a tokeniser's pieces, from its table of id -> piece (`_by_id`)."""

    _by_id: dict[int, str]
    languages: tuple[str, ...] = ()  # a multilingual tokeniser's language codes
    language_id: int | None = None  # the code this side's texts get, where it has one
    language_at = "prefix"  # where the code goes (LANGUAGE_PLACES)

    @cached_property
    def size(self) -> int:
        """One more than the highest id (the ids may have holes)."""
        return max(self._by_id, default=-1) + 1

    def pieces(self) -> list[str | None]:
        """id -> piece (None: no piece has the id)."""
        return list(self._table)

    @cached_property
    def _table(self) -> tuple[str | None, ...]:
        """pieces(), made once (both sides of one tokeniser ask; NLLB's has 256,206 ids)."""
        table: list[str | None] = [None] * self.size
        for i, piece in self._by_id.items():
            table[i] = piece
        return tuple(table)


# ---------------------------------------------------------------------------------------------
# tokenizer.json


class JsonTokeniser(_Pieces):
    """A tokenizer.json, with the pipeline transformers' class gives it.

    settings: pipeline (PIPELINES), specials (the named and extra special tokens: special, so
    decoding skips them), cleanup (clean_up_tokenization_spaces), and for "t5" eos, for
    "roberta" cls, sep, add_prefix_space, trim_offsets, for the sentencepiece-made pipelines eos
    and unk, and for a multilingual one languages (its codes), language (the one this side's
    texts are in) and language_at (LANGUAGE_PLACES)."""

    kind = TOKENIZER_JSON
    FIELDS = {"pipeline", "specials", "cleanup", "eos", "cls", "sep", "add_prefix_space", "trim_offsets",
              "unk", "languages", "language", "language_at"}

    def __init__(self, files: dict[str, bytes], settings: dict) -> None:
        settings = _only(settings, self.FIELDS)
        pipeline = settings.get("pipeline")
        if pipeline not in PIPELINES:
            raise ValueError(f"the tokeniser's pipeline must be one of {', '.join(PIPELINES)}")
        data = files.get(TOKENIZER_JSON)
        if data is None:
            raise TokeniserFileError(TOKENIZER_JSON, "is missing")
        spec = parse_json(TOKENIZER_JSON, data)
        if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
            raise TokeniserFileError(TOKENIZER_JSON, "is not a tokenizer.json: it has no model")
        try:
            tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as e:  # the Rust parser raises its own types; all mean "not readable"
            raise TokeniserFileError(TOKENIZER_JSON, f"is not a tokeniser the tokenizers library reads "
                                                     f"({_first_line(e)})") from None
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.files = {TOKENIZER_JSON: data}
        self.settings = dict(settings)
        self.model_type = spec["model"].get("type")
        self.byte_fallback = spec["model"].get("byte_fallback") is True
        self.specials = _texts(settings.get("specials", []), "special tokens")
        self.cleanup = _flag(settings, "cleanup", False) and self.model_type != "BPE"
        self._tokenizer = tokenizer
        self._mark_special(self.specials)
        if pipeline == "t5":
            self._t5(spec, _text(settings.get("eos"), "end token"))
        elif pipeline == "roberta":
            self._roberta(_text(settings.get("cls"), "start token"), _text(settings.get("sep"), "end token"),
                          _flag(settings, "add_prefix_space", False), _flag(settings, "trim_offsets", True))
        elif pipeline in SENTENCEPIECE_LIKE:
            self._sentencepiece(pipeline, spec, _text(settings.get("eos"), "end token"),
                                _text(settings.get("unk"), "unknown token"))
        self.languages = tuple(_texts(settings.get("languages", []), "language codes"))
        self.language_id: int | None = None  # the code this side's texts get, where it has one
        self.language_at = settings.get("language_at", "prefix")
        if self.languages:
            self._language(settings.get("language"))
        self.pieces_style, self.marker = self._style(spec, pipeline)

    def _language(self, language) -> None:
        if self.language_at not in LANGUAGE_PLACES:
            raise ValueError(f"the tokeniser's language_at must be one of {', '.join(LANGUAGE_PLACES)}")
        if language not in self.languages:
            raise ValueError(f"the tokeniser's language {str(language)[:40]!r} is not one of its codes")
        self.language_id = self._id(language)
        self.settings["language"] = language

    def with_language(self, language: str) -> JsonTokeniser:
        """The same tokeniser with its texts in `language` (one of `languages`): what
        transformers' `src_lang` / `tgt_lang` set. ValueError for a code it lacks."""
        return self.with_languages(self.languages, self.language_at, language)

    def with_languages(self, languages: Sequence[str], place: str, language: str) -> JsonTokeniser:
        """The same tokeniser, multilingual: `languages` its codes, each text's code at `place`
        (LANGUAGE_PLACES), its texts in `language`."""
        other = copy.copy(self)  # the tokenizers object is shared: nothing here changes it
        other.settings = {**self.settings, "languages": list(languages), "language_at": place}
        other.languages = tuple(_texts(list(languages), "language codes"))
        other.language_at = place
        other._language(language)
        return other

    def _mark_special(self, specials: list[str]) -> None:
        """transformers makes every named special token an added special token (a new id when
        the vocabulary lacks it)."""
        special = {t.content for t in self._tokenizer.get_added_tokens_decoder().values() if t.special}
        missing = [AddedToken(t, special=True, normalized=False) for t in specials if t not in special]
        if missing:
            self._tokenizer.add_special_tokens(missing)

    def _id(self, token: str) -> int:
        i = self._tokenizer.token_to_id(token)
        if i is None:
            raise TokeniserFileError(TOKENIZER_JSON, f"has no token {token!r}")
        return i

    def _t5(self, spec: dict, eos: str) -> None:
        """T5Tokenizer's pipeline (transformers 5 rebuilds it around the file's vocabulary)."""
        found = spec.get("normalizer") or {}
        chain = found.get("normalizers", []) if found.get("type") == "Sequence" else [found]
        charsmap = next((n for n in chain if isinstance(n, dict) and n.get("type") == "Precompiled"), None)
        tok = self._tokenizer
        tok.normalizer = normalizers.Precompiled(_charsmap(charsmap)) if charsmap else None
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement=SPIECE_UNDERLINE, prepend_scheme="always", split=True)])
        tok.decoder = decoders.Metaspace(replacement=SPIECE_UNDERLINE, prepend_scheme="always", split=True)
        tok.post_processor = processors.TemplateProcessing(single=["$A", eos], pair=["$A", eos, "$B", eos],
                                                           special_tokens=[(eos, self._id(eos))])

    def _roberta(self, cls: str, sep: str, add_prefix_space: bool, trim_offsets: bool) -> None:
        """RobertaTokenizer's pipeline (BartTokenizer is RobertaTokenizer in transformers 5)."""
        tok = self._tokenizer
        tok.normalizer = None
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.RobertaProcessing((sep, self._id(sep)), (cls, self._id(cls)),
                                                          trim_offsets=trim_offsets,
                                                          add_prefix_space=add_prefix_space)

    def _sentencepiece(self, pipeline: str, spec: dict, eos: str, unk: str) -> None:
        """The pipeline NllbTokenizer, MBart50Tokenizer, MBartTokenizer and PegasusTokenizer build
        around the file's pieces (transformers 5 keeps the file's vocabulary, merges and
        Precompiled map, and replaces the rest with its class's own)."""
        found = spec.get("normalizer") or {}
        chain = found.get("normalizers", []) if found.get("type") == "Sequence" else [found]
        node = next((n for n in chain if isinstance(n, dict) and n.get("type") == "Precompiled"), None)
        precompiled = [normalizers.Precompiled(_charsmap(node))] if node else []
        squeeze = normalizers.Replace(Regex(" {2,}"), " ")
        strip = normalizers.Strip(left=False, right=True)
        chain = {"nllb": precompiled + [squeeze] if precompiled else [],
                 "mbart50": [*precompiled, strip, squeeze],
                 "mbart": [*precompiled, strip, normalizers.Replace(Regex(" {2,}"), SPIECE_UNDERLINE)],
                 "pegasus": precompiled + [squeeze] if precompiled else
                 [normalizers.Replace(Regex("\n"), " "), squeeze]}[pipeline]
        tok = self._tokenizer
        model = spec["model"]
        kept = tok.model  # the file's model, kept when it already has the class's settings
        same_bpe = isinstance(kept, models.BPE) and kept.fuse_unk and not kept.byte_fallback \
            and kept.dropout is None and kept.unk_token == unk and not kept.ignore_merges \
            and kept.continuing_subword_prefix is None and kept.end_of_word_suffix is None
        try:
            if pipeline == "nllb" and model.get("type") == "BPE" and not same_bpe:
                merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
                          for m in model.get("merges", [])]
                tok.model = models.BPE(vocab=model.get("vocab"), merges=merges, unk_token=unk, fuse_unk=True,
                                       byte_fallback=False)
            elif model.get("type") == "Unigram":
                vocab = [(str(p), float(score)) for p, score in model.get("vocab", [])]
                unk_id = next((i for i, (p, _) in enumerate(vocab) if p == unk), None) \
                    if pipeline == "pegasus" else 3
                tok.model = models.Unigram(vocab, unk_id=unk_id, byte_fallback=False)
        except Exception as e:  # the Rust constructors raise their own types
            raise TokeniserFileError(TOKENIZER_JSON, f"has a model transformers' class cannot rebuild "
                                                     f"({_first_line(e)})") from None
        tok.normalizer = normalizers.Sequence(chain) if chain else None
        metaspace = pre_tokenizers.Metaspace(replacement=SPIECE_UNDERLINE, prepend_scheme="always",
                                             split=True)
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), metaspace]) \
            if pipeline == "mbart" else metaspace
        tok.decoder = decoders.Metaspace(replacement=SPIECE_UNDERLINE, prepend_scheme="always", split=True)
        # The language code, where there is one, is added around this (encode)
        tok.post_processor = processors.TemplateProcessing(single=["$A", eos], pair=["$A", "$B", eos],
                                                           special_tokens=[(eos, self._id(eos))])

    @staticmethod
    def _style(spec: dict, pipeline: str) -> tuple[str, str | None]:
        """How pieces spell their text: "bytes" (byte-level BPE), "metaspace" (a word-start
        character, returned too) or "plain"."""
        if pipeline == "t5" or pipeline in SENTENCEPIECE_LIKE:
            return "metaspace", SPIECE_UNDERLINE
        if pipeline == "roberta":
            return "bytes", None
        parts = []
        for key in ("decoder", "pre_tokenizer"):
            node = spec.get(key) or {}
            sequence = node.get("type") == "Sequence"
            parts += node.get("decoders", node.get("pretokenizers", [])) if sequence else [node]
        for node in parts:
            if isinstance(node, dict) and node.get("type") == "ByteLevel":
                return "bytes", None
            if isinstance(node, dict) and node.get("type") == "Metaspace":
                return "metaspace", str(node.get("replacement", SPIECE_UNDERLINE))[:1] or SPIECE_UNDERLINE
        return "plain", None

    # -- what a vocabulary asks -------------------------------------------------------------
    @cached_property
    def _by_id(self) -> dict[int, str]:
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)  # 60 ms for 58,000 pieces: once
        return {i: piece for piece, i in vocab.items()}

    def special_tokens(self) -> dict[int, str]:
        """id -> text of every added special token."""
        return {i: t.content for i, t in self._tokenizer.get_added_tokens_decoder().items() if t.special}

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """What decoding skips: every added special token."""
        return frozenset(self.special_tokens())

    def token_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Texts -> ids with the tokeniser's own special tokens: `tokenizer(text)["input_ids"]`
        (and `tokenizer(text_target=text)["input_ids"]`: the same tokeniser for both sides)."""
        encode = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
        rows = [e.ids for e in encode(list(texts), add_special_tokens=True)]
        code = self.language_id
        if code is None:
            return rows
        return [[code, *ids] if self.language_at == "prefix" else [*ids, code] for ids in rows]

    def decode(self, ids: Sequence[int]) -> str:
        """`tokenizer.decode(ids, skip_special_tokens=True)` (ids with no piece are dropped, as
        the tokenizers library drops them)."""
        text = self._tokenizer.decode([i for i in ids if 0 <= i < self.size], skip_special_tokens=True)
        return cleanup(text) if self.cleanup else text

    def join(self, pieces: Sequence[str]) -> str:
        """Pieces -> text: `tokenizer.convert_tokens_to_string`, cleaned up as decode does."""
        decoder = self._tokenizer.decoder
        text = decoder.decode(list(pieces)) if decoder is not None else " ".join(pieces)
        return cleanup(text) if self.cleanup else text


def _charsmap(node: dict) -> bytes:
    try:
        return base64.b64decode(node["precompiled_charsmap"])
    except (KeyError, TypeError, ValueError):
        raise TokeniserFileError(TOKENIZER_JSON, "has a Precompiled normaliser without a valid "
                                                 "precompiled_charsmap") from None


# ---------------------------------------------------------------------------------------------
# Marian: source.spm / target.spm + vocab.json


class MarianTokeniser(_Pieces):
    """One side of a Marian tokeniser.

    settings: side ("source" or "target"), encode_with and decode_with (the .spm files that cut
    and join), vocab (the JSON file of piece -> id), added (the added tokens, each [text, id,
    lstrip, rstrip, single_word]), specials (the special tokens' texts: decoding skips them),
    eos, unk (their texts), cleanup."""

    kind = "marian"
    FIELDS = {"side", "encode_with", "decode_with", "vocab", "added", "specials", "eos", "unk", "cleanup"}

    def __init__(self, files: dict[str, bytes], settings: dict) -> None:
        settings = _only(settings, self.FIELDS)
        if settings.get("side") not in ("source", "target"):
            raise ValueError("the tokeniser's side is not source or target")
        names = {key: settings.get(key) for key in ("encode_with", "decode_with", "vocab")}
        for key, name in names.items():
            if not isinstance(name, str) or name not in files:
                raise ValueError(f"the tokeniser's {key} does not name one of its files")
        self.settings = dict(settings)
        self.files = {name: files[name] for name in names.values()}
        self._cut = _spm(names["encode_with"], files[names["encode_with"]])
        self._join = (self._cut if names["decode_with"] == names["encode_with"]
                      else _spm(names["decode_with"], files[names["decode_with"]]))
        self.vocab = vocab_json(names["vocab"], files[names["vocab"]])
        self.cleanup = _flag(settings, "cleanup", False)
        self.specials = _texts(settings.get("specials", []), "special tokens")
        eos, unk = _text(settings.get("eos"), "end token"), _text(settings.get("unk"), "unknown token")
        if unk not in self.vocab:  # MarianTokenizer refuses such a vocab.json too
            raise TokeniserFileError(names["vocab"], f"has no {unk!r}, which the tokeniser needs")
        self.added = self._added(settings.get("added", []))
        eos_id = self.token_id(eos)
        if eos_id is None:
            raise TokeniserFileError(names["vocab"], f"has no {eos!r}, which the tokeniser needs")
        self.eos_id, self.unk_id = eos_id, self.vocab[unk]  # a piece vocab.json lacks: its <unk>
        by_length = sorted(self.added, key=len, reverse=True)
        self._splitter = re.compile("|".join(map(re.escape, by_length))) if by_length else None
        self.pieces_style, self.marker, self.byte_fallback = "metaspace", SPIECE_UNDERLINE, False

    def _added(self, added) -> dict[str, tuple[int, bool, bool, bool]]:
        """text -> (id, lstrip, rstrip, single_word)."""
        if not isinstance(added, list) or len(added) > MAX_ADDED_TOKENS:
            raise ValueError("the tokeniser's added tokens are not a list")
        out = {}
        for item in added:
            if (not isinstance(item, list) or len(item) != 5 or not isinstance(item[1], int)
                    or isinstance(item[1], bool) or not 0 <= item[1] < 2**31
                    or not all(isinstance(flag, bool) for flag in item[2:])):
                raise ValueError("an added token of the tokeniser is not [text, id, lstrip, rstrip, "
                                 "single_word]")
            out[_text(item[0], "added token")] = (item[1], *item[2:])
        return out

    # -- what a vocabulary asks -------------------------------------------------------------
    @cached_property
    def _by_id(self) -> dict[int, str]:
        """id -> piece: vocab.json reversed (its last piece for an id wins, as a dict comprehension
        over it does in transformers), then the added tokens over it."""
        table = {i: piece for piece, i in self.vocab.items()}
        table.update({a[0]: text for text, a in self.added.items()})
        return table

    @cached_property
    def special_ids(self) -> frozenset[int]:
        return frozenset(i for t in self.specials if (i := self.token_id(t)) is not None)

    def token_id(self, token: str) -> int | None:
        added = self.added.get(token)
        return added[0] if added is not None else self.vocab.get(token)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """`tokenizer(text)["input_ids"]` on the source side, `tokenizer(text_target=text)
        ["input_ids"]` on the target side (MarianTokenizer.tokenize, then </s>)."""
        segments = [self._segments(t) for t in texts]
        plain = [text for parts in segments for text, added in parts if not added]
        cut = iter(self._cut.encode([self._split_code(t)[1] for t in plain], out_type=str) if plain else ())
        get, unk, out = self.vocab.get, self.unk_id, []
        for parts in segments:
            ids = []
            for text, added in parts:
                if added:
                    ids.append(self.added[text][0])
                    continue
                code, _ = self._split_code(text)
                ids.extend(get(p, unk) for p in ([code] if code else []) + next(cut))
            ids.append(self.eos_id)
            out.append(ids)
        return out

    @staticmethod
    def _split_code(text: str) -> tuple[str, str]:
        """(a leading language code that is a token of its own, the rest of the text)."""
        return _language_code(text)

    def _segments(self, text: str) -> list[tuple[str, bool]]:
        """PreTrainedTokenizer.tokenize's split at the added tokens, with their lstrip, rstrip and
        single_word: (text, is an added token) in order, empty pieces left out."""
        if self._splitter is None or self._splitter.search(text) is None:
            return [(text, False)] if text else []
        parts: list[str] = []
        at = 0
        for match in self._splitter.finditer(text):
            parts += [text[at : match.start()], match.group()]
            at = match.end()
        parts.append(text[at:])
        is_added = [i % 2 == 1 for i in range(len(parts))]
        for i in range(1, len(parts), 2):
            _, lstrip, rstrip, single_word = self.added[parts[i]]
            left, right = parts[i - 1], parts[i + 1]
            if rstrip and right:
                parts[i + 1] = right.lstrip()
            if lstrip and left:
                parts[i - 1] = left.rstrip()
            if single_word:
                if left and left[-1] != " ":
                    parts[i - 1] += parts[i]
                    parts[i] = ""
                elif right and right[0] != " ":
                    parts[i + 1] = parts[i] + parts[i + 1]
                    parts[i] = ""
        return [(p, added) for p, added in zip(parts, is_added) if p]

    def decode(self, ids: Sequence[int]) -> str:
        """`tokenizer.decode(ids, skip_special_tokens=True)`; an id neither vocab.json nor the
        joining model has is dropped (transformers would raise)."""
        skip, table, join = self.special_ids, self._by_id, self._join
        pieces = []
        for i in ids:
            if i in skip or i < 0:
                continue
            piece = table.get(i)
            if piece is None and i < join.get_piece_size():
                piece = join.id_to_piece(i) or self.settings["unk"]
            if piece is not None:
                pieces.append(piece)
        return self.join(pieces)

    def join(self, pieces: Sequence[str]) -> str:
        """MarianTokenizer.convert_tokens_to_string: special tokens kept as they are, the rest
        joined by the sentencepiece model, "▁" as a space, the ends stripped."""
        specials = set(self.specials)
        text, run = "", []
        for piece in pieces:
            if piece in specials:
                text += self._join.decode_pieces(run) + piece + " "
                run = []
            else:
                run.append(piece)
        text = (text + self._join.decode_pieces(run)).replace(SPIECE_UNDERLINE, " ").strip()
        return cleanup(text) if self.cleanup else text


def _language_code(text: str) -> tuple[str, str]:
    """MarianTokenizer.remove_language_code: a leading ">>xx<<" (a token of its own) and the rest."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return text[: end + 2], text[end + 2 :]
    return "", text


def _spm(name: str, data: bytes) -> sentencepiece.SentencePieceProcessor:
    try:
        return sentencepiece.SentencePieceProcessor(model_proto=data)
    except Exception:  # the C++ parser raises RuntimeError, OSError, ...: all mean "not a model"
        raise TokeniserFileError(name, "is not a sentencepiece model") from None


def vocab_json(name: str, data: bytes) -> dict[str, int]:
    """A Marian vocab.json: an object of piece -> id, every id a distinct non-negative integer."""
    vocab = parse_json(name, data)
    if not isinstance(vocab, dict) or not vocab:
        raise TokeniserFileError(name, "is not an object of pieces and their ids")
    seen: dict[int, str] = {}
    for piece, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < 2**31:
            raise TokeniserFileError(name, f"gives piece {piece[:40]!r} the id {str(i)[:20]}, which is not a "
                                           "token id")
        if i in seen:
            raise TokeniserFileError(name, f"gives pieces {seen[i][:40]!r} and {piece[:40]!r} the same "
                                           f"id {i}")
        seen[i] = piece
    return vocab


def spm_pieces(name: str, data: bytes) -> list[str]:
    """The ordinary pieces of a sentencepiece model (no control, unknown or byte pieces)."""
    model = _spm(name, data)
    return [model.id_to_piece(i) for i in range(model.get_piece_size())
            if not (model.is_control(i) or model.is_unknown(i) or model.is_byte(i))]


TOKENISERS = {JsonTokeniser.kind: JsonTokeniser, MarianTokeniser.kind: MarianTokeniser}
