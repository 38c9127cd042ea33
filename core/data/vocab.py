"""Vocabularies: the tokens a model reads and writes, and how text becomes tokens.

A Vocab belongs to a task and to the model trained on it (it is stored in the checkpoint, so a
checkpoint decodes with no data file at hand). Three tokenisations ("levels"):

- `digits`: the digit tasks' fixed 13-token vocabulary, digits 0-9 are ids 0-9, then PAD, SOS,
  EOS (the reference model's facts); a source is "3 1 4 1 5" or "31415";
- `char`: every Unicode character is a token, space included;
- `word`: the text split on whitespace.

One vocabulary serves both sides of a pair for minitx's own models: the model's source and
target embeddings and its output layer share one id space, so a token that appears on both
sides (a copied name, a digit) has one id, and copying tasks need no mapping between two
vocabularies. An imported model (docs/import.md) keeps the two vocabularies it was trained with:
the task's `src_vocab` and `vocab`.

Specials are known by id (pad/sos/eos/unk), not by spelling: a word "<pad>" in a data file is an
ordinary word (which the vocabulary then leaves out: it becomes UNK). minitx spells them as
RESERVED_TOKENS; an imported vocabulary keeps its own spellings ("<blank>", "<s>", "</s>"), and
may have no unknown token at all (then unknown tokens are refused, never read as UNK).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

LEVELS = ("digits", "char", "word")
RESERVED_TOKENS = ("<pad>", "<sos>", "<eos>", "<unk>")
MAX_TOKENS = 300_000  # a vocabulary read from a file is refused beyond this (NLLB-200 has 256,206)
MAX_TOKEN_CHARS = 64  # longest word kept in a vocabulary; longer words become UNK
MAX_INPUT_CHARS = 2000  # longer typed text is refused before it is split (pastes of 10k chars)


class TaskInputError(ValueError):
    """A typed source the model cannot accept; the message is one sentence for a person."""


class UnknownTokens(TaskInputError):
    """Text holding tokens the vocabulary does not have; `tokens` lists them, first seen first."""

    def __init__(self, message: str, tokens: list[str]) -> None:
        super().__init__(message)
        self.tokens = tokens


@dataclass(frozen=True, eq=False)
class Vocab:
    tokens: tuple[str, ...]  # id -> token (minitx spells its specials as RESERVED_TOKENS)
    pad: int
    sos: int
    eos: int
    unk: int | None  # None: no unknown token (the digit vocabulary, some imported ones)
    level: str
    _ids: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        specials = {self.pad, self.sos, self.eos} | ({self.unk} if self.unk is not None else set())
        ids = {t: i for i, t in enumerate(self.tokens) if i not in specials}
        object.__setattr__(self, "_ids", ids)

    # -- identity --------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.tokens, self.pad, self.sos, self.eos, self.unk, self.level))

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def target_ends(self) -> tuple[int, int]:
        """(the decoder's first input, the last label) a batch puts around a target's row: the
        start and end tokens (a subword vocabulary's language code may take either place)."""
        return self.sos, self.eos

    @property
    def specials(self) -> tuple[int, ...]:
        """The special ids, each once (a subword vocabulary's start token may be its padding)."""
        return tuple(dict.fromkeys(i for i in (self.pad, self.sos, self.eos, self.unk) if i is not None))

    def model_fields(self) -> dict[str, int]:
        """The ModelConfig fields this vocabulary decides."""
        return {"vocab_size": self.size, "pad_id": self.pad, "sos_id": self.sos, "eos_id": self.eos}

    def real_ids(self) -> list[int]:
        """Ids of ordinary tokens (no specials), in id order."""
        return sorted(self._ids.values())

    # -- text <-> tokens -------------------------------------------------------------------
    def split(self, text: str) -> list[str]:
        """Text -> token strings (not yet checked against the vocabulary). Surrounding
        whitespace is dropped at every level, in typed text and in data files alike."""
        stripped = text.strip()
        if self.level == "word":
            return stripped.split()
        if self.level == "digits" and any(c.isspace() for c in stripped):
            return stripped.split()
        return list(stripped)

    def join(self, tokens: Sequence[str]) -> str:
        """Token strings -> text: characters joined, words and digits with spaces."""
        return "".join(tokens) if self.level == "char" else " ".join(tokens)

    def encode(self, tokens: Iterable[str], unknown: str = "error") -> tuple[list[int], int]:
        """Token strings -> (ids, how many were unknown). unknown="error" raises UnknownTokens
        naming them; "unk" maps them to UNK (vocabularies without one refuse)."""
        ids, missing = [], []
        for token in tokens:
            i = self._ids.get(token)
            if i is None:
                missing.append(token)
                if self.unk is not None:
                    i = self.unk
            ids.append(i)
        if missing and (unknown == "error" or self.unk is None):
            raise self._unknown_error(missing)
        return ids, len(missing)

    def encode_text(self, text: str, max_len: int | None = None) -> list[int]:
        """Typed text -> ids, or TaskInputError with one sentence for a person."""
        if not isinstance(text, str):
            raise TaskInputError("the source must be text")
        if len(text) > MAX_INPUT_CHARS:
            raise TaskInputError(f"the source is {len(text):,} characters long; that is far too long")
        tokens = self.split(text)
        if not tokens:
            example = "3 1 4 1 5" if self.level == "digits" else "some text"
            raise TaskInputError(f"the source is empty: type {example}")
        ids, _ = self.encode(tokens)
        if max_len is not None and len(ids) > max_len:
            raise TaskInputError(f"the source has {len(ids)} tokens; this model takes at most {max_len}")
        return ids

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> list[str]:
        """Ids -> token strings. With strip_special, stops at EOS and drops SOS and PAD."""
        out = []
        for i in (int(x) for x in ids):
            if strip_special:
                if i == self.eos:
                    break
                if i in (self.sos, self.pad):
                    continue
            out.append(self.tokens[i] if 0 <= i < self.size else f"?{i}")
        return out

    def text(self, ids: Iterable[int]) -> str:
        """Ids -> the text a person reads: what `decode` prints."""
        return self.join(self.decode(ids))

    def shown_text(self, ids: Iterable[int]) -> str:
        """The text of ids as a header shows it (a subword vocabulary keeps <unk> visible)."""
        return self.text(ids)

    def label(self, i: int) -> str:
        """A token as a grid label or list entry: visible and one cell per character (space as
        ␣, control, invisible and wide characters escaped, e.g. \\t or \\u4e2d)."""
        if not 0 <= i < self.size:
            return f"?{i}"
        token = self.tokens[i]
        if i in self.specials:
            return token
        return "".join(visible_char(c) for c in token)

    def labels(self, ids: Iterable[int]) -> list[str]:
        return [self.label(int(i)) for i in ids]

    def _unknown_error(self, missing: list[str]) -> UnknownTokens:
        distinct = list(dict.fromkeys(missing))
        what = {"char": "character", "word": "word", "digits": "token"}[self.level]
        spelled = {self.tokens[i] for i in self.specials} | set(RESERVED_TOKENS)
        special = next((t for t in distinct if t in spelled), None)
        holds = "digits 0-9 only" if self.level == "digits" else f"ordinary {what}s only"
        if special is not None:
            return UnknownTokens(f"{special} is a special token; the source holds {holds}", distinct)
        shown = ", ".join(repr(t if len(t) <= 12 else t[:12] + "…") for t in distinct[:8])
        more = f" and {len(distinct) - 8} more" if len(distinct) > 8 else ""
        if self.level == "digits":  # the first is enough: every non-digit is wrong alike
            return UnknownTokens(f"{shown.split(', ')[0]} is not a token: the source holds {holds}",
                                 distinct)
        plural = "s" if len(distinct) > 1 else ""
        return UnknownTokens(f"unknown {what}{plural} for this model: {shown}{more} (it knows "
                             f"{self.size - len(self.specials)} {what}s; `minitx inspect` lists them)",
                             distinct)

    # -- files -----------------------------------------------------------------------------
    def files(self) -> dict[str, bytes]:
        """Files the vocabulary is read from, by name, stored beside a checkpoint's weights: none
        here (the tokens are in to_dict); a subword vocabulary's tokeniser files."""
        return {}

    def to_dict(self) -> dict:
        return {"level": self.level, "tokens": list(self.tokens), "pad": self.pad, "sos": self.sos,
                "eos": self.eos, "unk": self.unk}

    @classmethod
    def from_dict(cls, data) -> Vocab:
        """A vocabulary from a file's metadata: everything checked, ValueError (one line) if not."""
        if not isinstance(data, dict):
            raise ValueError("the vocabulary is not an object")
        unknown = sorted(set(data) - {"level", "tokens", "pad", "sos", "eos", "unk"})
        if unknown:
            raise ValueError(f"the vocabulary has an unknown field {unknown[0][:40]!r}")
        level, tokens = data.get("level"), data.get("tokens")
        if level not in LEVELS:
            raise ValueError(f"the vocabulary's level must be one of {', '.join(LEVELS)}")
        if not isinstance(tokens, list) or not 4 <= len(tokens) <= MAX_TOKENS:
            raise ValueError(f"the vocabulary must list 4 to {MAX_TOKENS:,} tokens")
        ids = {}
        for name in ("pad", "sos", "eos", "unk"):
            value = data.get(name)
            if name == "unk" and value is None:
                ids[name] = None
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < len(tokens):
                raise ValueError(f"the vocabulary's {name} id must be a token id below {len(tokens)}")
            ids[name] = value
        specials = [v for v in ids.values() if v is not None]
        if len(set(specials)) != len(specials):
            raise ValueError("the vocabulary gives two specials the same id")
        for i, token in enumerate(tokens):
            if not isinstance(token, str) or not token:
                raise ValueError(f"vocabulary token {i} is not a non-empty string")
            if i in specials:  # any spelling (an imported vocabulary keeps its own), one word
                if not valid_token(token, "word"):
                    raise ValueError(f"vocabulary token {i} is not a valid special token (one word "
                                     f"of at most {MAX_TOKEN_CHARS} characters)")
            elif not valid_token(token, level):
                raise ValueError(f"vocabulary token {i} is not a valid {level} token")
        if len(set(tokens)) != len(tokens):
            raise ValueError("the vocabulary lists a token twice")
        vocab = cls(tuple(tokens), ids["pad"], ids["sos"], ids["eos"], ids["unk"], level)
        if level == "digits" and vocab != DIGITS:
            raise ValueError("a digits vocabulary must be the 13 tokens of the digit tasks")
        return vocab


def valid_token(token: str, level: str) -> bool:
    """Whether an ordinary token can be one of a `level` vocabulary: one character, or one word
    (no whitespace) of at most MAX_TOKEN_CHARS."""
    if level == "char":
        return len(token) == 1
    if len(token) > MAX_TOKEN_CHARS:
        return False
    return not any(c.isspace() for c in token)  # words and digits hold no whitespace


def visible_char(c: str) -> str:
    """A character in one cell: space as ␣; control, invisible and wide characters escaped."""
    if c == " ":
        return "␣"
    category = unicodedata.category(c)
    if category[0] in "CZ" or category in ("Mn", "Me") or unicodedata.east_asian_width(c) in "WF":
        if c in "\t\n\r":
            return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}[c]
        code = ord(c)
        if code < 0x100:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return c


def build_vocab(counts: dict[str, int], level: str, max_tokens: int = 50_000) -> tuple[Vocab, int]:
    """A vocabulary from token counts (the training side of a data file): specials PAD, SOS, EOS,
    UNK at ids 0-3, then the tokens in Unicode order, which reads well in `inspect` and depends
    on nothing but the set of tokens. Beyond max_tokens, the most frequent are kept. Returns the
    vocabulary and how many distinct tokens were left out (they read as UNK)."""
    usable = {t: n for t, n in counts.items()
              if n > 0 and t not in RESERVED_TOKENS and valid_token(t, level)}
    kept = sorted(usable, key=lambda t: (-usable[t], t))[:max_tokens]
    left_out = len(counts) - len(kept)
    tokens = RESERVED_TOKENS + tuple(sorted(kept))
    return Vocab(tokens, 0, 1, 2, 3, level), left_out


DIGITS = Vocab(tuple(str(d) for d in range(10)) + RESERVED_TOKENS[:3], pad=10, sos=11, eos=12,
               unk=None, level="digits")
