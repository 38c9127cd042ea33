"""A subword vocabulary: a Hugging Face model's own tokeniser (core/data/tokenisers.py) as a minitx
Vocab, with ids identical to transformers' tokeniser of the same folder.

One vocabulary per side of the model ("source" or "target"): Marian cuts sources with source.spm
and targets with target.spm, T5 and BART use one tokeniser for both. What each side gives:
- `encode_text(text)`: on the source side `tokenizer(text)["input_ids"]`, on the target side
  `tokenizer(text_target=text)["input_ids"]` (the labels transformers trains on); either way
  with the tokeniser's own special tokens (T5 and Marian append </s>, BART wraps in <s> … </s>).
- `row_ids(texts)`: texts as a data file's rows hold them (core/data/pair_ids.py): a source as
  encode_text gives it, a target as its labels without the final end token, which a Batch adds
  (for BART the row starts with <s>: the decoder is fed </s> <s> …, as transformers shifts it).
- `text(ids)`: `tokenizer.decode(ids, skip_special_tokens=True)`.
- `label(i)`: the piece readable in one line of one-cell characters: a space the piece stands
  for (sentencepiece's "▁", byte-level BPE's "Ġ") as WORD_START, byte-level pieces as the text
  they stand for (a piece alone holding part of a UTF-8 character shows those bytes as \\xNN),
  special tokens as spelled. `labels(ids)`, pieces side by side (a grid's columns, a beam's
  header, the app's): a character cut into byte pieces shows whole on the piece where it starts
  and as +it on the rest (row_labels); `shown_text(ids)` keeps <unk> where text() drops it.

The specials are roles, not distinct tokens: `sos` is the decoder's start token (Marian and T5
start from <pad>, BART from </s>), so sos may be pad or eos. Ids beyond the tokeniser's own
(T5's embedding has 28 rows more than its 32,100 pieces) have no piece: decoding drops them and
they are labelled "?ID".

In a checkpoint the tokeniser's files travel as bytes beside the weights (`files()`), and
`to_dict()` names them with their sizes and sha256; `vocab_from_dict` checks all of it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from minitx.core.data.m2m100_tokeniser import M2M100Tokeniser
from minitx.core.data.tokenisers import TOKENISERS, TokeniserFileError
from minitx.core.data.vocab import (
    MAX_INPUT_CHARS,
    MAX_TOKENS,
    TaskInputError,
    UnknownTokens,
    Vocab,
    visible_char,
)

SUBWORD = "subword"
SIDES = ("source", "target")
WORD_START = "·"  # how a space a piece stands for is shown: visible, but quieter than ␣ or ▁
MAX_FILE_BYTES = 256 * 1024 * 1024  # a real tokenizer.json is a few MB
MAX_FILES = 8
BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # sentencepiece's byte-fallback pieces


def _byte_table() -> dict[str, int]:
    """Byte-level BPE's printable stand-in for each byte (GPT-2's bytes_to_unicode), inverted."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    stand_in = {b: chr(b) for b in printable}
    extra = iter(range(256, 512))
    for b in range(256):
        if b not in stand_in:
            stand_in[b] = chr(next(extra))
    return {c: b for b, c in stand_in.items()}


BYTE_OF = _byte_table()


def piece_bytes(piece: str, style: str, marker: str | None, byte_fallback: bool = False) -> bytes:
    """The UTF-8 bytes a piece stands for: a byte-level piece's bytes, a byte-fallback piece's
    one byte, else its text (a sentencepiece marker as the space it stands for)."""
    if style == "bytes" and all(c in BYTE_OF for c in piece):
        return bytes(BYTE_OF[c] for c in piece)
    if byte_fallback and (byte := BYTE_PIECE.fullmatch(piece)):
        return bytes([int(byte.group(1), 16)])
    if style == "metaspace" and marker:
        piece = piece.replace(marker, " ")
    return piece.encode("utf-8")


def _shown(c: str) -> str:
    """A character of a piece's text in one cell: a space as WORD_START (a literal · escaped)."""
    return WORD_START if c == " " else "\\xb7" if c == WORD_START else visible_char(c)


def row_labels(pieces: Sequence[bytes | None]) -> list[str | None]:
    """Labels of pieces side by side (a source, an output): the text their bytes stand for, each
    character on the piece that holds its first byte, and a piece holding only the rest of one
    (a byte-level tokeniser cuts é, or an emoji, into bytes) as + and that character. A byte
    that starts no character is \\xNN. None stays None (a special token: labelled as spelled)."""
    data = b"".join(p or b"" for p in pieces)
    owner = [n for n, p in enumerate(pieces) for _ in (p or b"")]  # the piece of each byte
    texts: list[list[str]] = [[] for _ in pieces]
    rest: list[str] = ["" for _ in pieces]  # the character a piece holds the rest of
    j = 0
    while j < len(data):
        lead = data[j]
        size = 1 if lead < 0x80 else 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else \
            4 if 0xF0 <= lead < 0xF8 else 0
        try:
            char = data[j : j + size].decode("utf-8") if size else ""
        except UnicodeDecodeError:
            char = ""
        if not char:  # a byte that does not start a whole character here
            texts[owner[j]].append(f"\\x{lead:02x}")
            j += 1
            continue
        texts[owner[j]].append(_shown(char))
        for k in range(j + 1, j + size):
            if owner[k] != owner[j] and not texts[owner[k]] and not rest[owner[k]]:
                rest[owner[k]] = _shown(char)
        j += size
    return [None if p is None else "".join(t) or (f"+{r}" if r else "")
            for p, t, r in zip(pieces, texts, rest)]


def piece_label(piece: str, style: str, marker: str | None, byte_fallback: bool = False) -> str:
    """A piece alone as the text it stands for, in one-cell characters (row_labels of one piece:
    a part of a character shows its bytes as \\xNN)."""
    return row_labels([piece_bytes(piece, style, marker, byte_fallback)])[0]


@dataclass(frozen=True, eq=False)
class SubwordVocab(Vocab):
    """A side of a Hugging Face tokeniser as a Vocab (level "subword"); build with `make`."""

    tokeniser: object = field(default=None, repr=False)  # a core.data.tokenisers tokeniser
    side: str = "target"

    @classmethod
    def make(cls, tokeniser, side: str, pad: int, sos: int, eos: int, unk: int | None,
             size: int | None = None) -> SubwordVocab:
        """The vocabulary of `tokeniser` on `side`, `size` ids long (the model's embedding rows;
        default the tokeniser's own). ValueError (one line) when an id does not fit."""
        size = tokeniser.size if size is None else size
        if side not in SIDES:
            raise ValueError(f"a subword vocabulary's side is source or target, not {side!r}")
        if not 1 <= size <= MAX_TOKENS:
            raise ValueError(f"a vocabulary of {size:,} ids is more than minitx reads ({MAX_TOKENS:,})")
        if tokeniser.size > size:
            raise ValueError(f"the tokeniser has {tokeniser.size:,} ids; a vocabulary of {size:,} cannot "
                             "hold them")
        for name, i in (("pad", pad), ("sos", sos), ("eos", eos), ("unk", unk)):
            if (i is not None or name != "unk") and not (isinstance(i, int) and 0 <= i < size):
                raise ValueError(f"the vocabulary's {name} id {i} is not an id below {size:,}")
        pieces = tokeniser.pieces()
        tokens = tuple(p if p is not None else "" for p in pieces) + ("",) * (size - len(pieces))
        return cls(tokens, pad, sos, eos, unk, SUBWORD, tokeniser, side)

    def __post_init__(self) -> None:
        ids: dict[str, int] = {}
        for i, piece in enumerate(self.tokens):
            if piece:
                ids.setdefault(piece, i)
        object.__setattr__(self, "_ids", ids)
        object.__setattr__(self, "_labels", {})
        skipped = set(self.tokeniser.special_ids) | set(self.specials)
        object.__setattr__(self, "_special", frozenset(skipped))
        object.__setattr__(self, "_real", [i for i, p in enumerate(self.tokens) if p and i not in skipped])
        facts = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                 for name, data in self.tokeniser.files.items()}
        object.__setattr__(self, "_facts", facts)  # once: equality compares to_dict()

    def __hash__(self) -> int:
        return hash((self.side, self.pad, self.sos, self.eos, self.unk,
                     tuple(sorted((k, v["sha256"]) for k, v in self._facts.items()))))

    # -- what every Vocab gives ------------------------------------------------------------
    def real_ids(self) -> list[int]:
        """Ids of ordinary pieces: not a special token of the tokeniser, not a role, not a hole."""
        return list(self._real)

    def added_ids(self) -> frozenset[int]:
        """Ids the tokeniser may add around a text (its special tokens: Marian's and T5's </s>,
        BART's <s> and </s>), padding excluded: what kept pairs may hold beside real pieces."""
        return self._special - {self.pad}

    def encode_text(self, text: str, max_len: int | None = None) -> list[int]:
        """Typed text -> the ids transformers' tokeniser gives it (see the module's docstring),
        or TaskInputError with one sentence for a person."""
        what = self.side
        if not isinstance(text, str):
            raise TaskInputError(f"the {what} must be text")
        if len(text) > MAX_INPUT_CHARS:
            raise TaskInputError(f"the {what} is {len(text):,} characters long; that is far too long")
        if not text.strip():
            raise TaskInputError(f"the {what} is empty: type some text")
        ids = self.tokeniser.encode([text])[0]
        if max_len is not None and len(ids) > max_len:
            raise TaskInputError(f"the {what} has {len(ids)} tokens; this model takes at most {max_len}")
        return ids

    @property
    def target_ends(self) -> tuple[int, int]:
        """(the decoder's first input, the last label) of a target: where the tokeniser writes
        the language code after the text's </s> (mBART, NLLB's legacy_behaviour) the labels end
        with the code, `X </s> code`, and mBART's decoder starts from it too (its
        shift_tokens_right moves the last label to the front); else the start and end tokens."""
        t = self.tokeniser
        if self.side != "target" or t.language_at != "suffix" or t.language_id is None:
            return self.sos, self.eos
        return (t.language_id if t.settings.get("pipeline") == "mbart" else self.sos), t.language_id

    def row_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Texts as a data file's rows hold them: sources as encode_text gives them, targets as
        their labels without the last one (the end token, or a language code after it), which a
        Batch adds (target_ends)."""
        rows = self.tokeniser.encode(texts)
        if self.side == "target":
            end = self.target_ends[1]
            rows = [r[:-1] if r and r[-1] == end else r for r in rows]
        return rows

    def split(self, text: str) -> list[str]:
        """Text -> the pieces of its row (row_ids), spelled as the vocabulary spells them."""
        return [self.tokens[i] for i in self.row_ids([text])[0]]

    def join(self, tokens: Sequence[str]) -> str:
        """Pieces -> text, as transformers' convert_tokens_to_string joins them."""
        return self.tokeniser.join([t for t in tokens if t])

    def encode(self, tokens: Iterable[str], unknown: str = "error") -> tuple[list[int], int]:
        """Pieces (any piece, special tokens included) -> ids, and how many were unknown."""
        ids, missing = [], []
        for token in tokens:
            i = self._ids.get(token)
            if i is None:
                missing.append(token)
                i = self.unk
            ids.append(i)
        if missing and (unknown == "error" or self.unk is None):
            shown = ", ".join(repr(t[:12]) for t in dict.fromkeys(missing))
            raise UnknownTokens(f"not pieces of this tokeniser: {shown}", list(dict.fromkeys(missing)))
        return ids, len(missing)

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> list[str]:
        """Ids -> pieces. With strip_special: a leading start token dropped (it may be the end
        token, as BART's is), stopping at the end token, every special token and every id
        without a piece dropped, as transformers' decode drops them."""
        out = []
        for n, i in enumerate(int(x) for x in ids):
            if not strip_special:
                out.append(self.tokens[i] or f"?{i}" if 0 <= i < self.size else f"?{i}")
                continue
            if n == 0 and i == self.sos:
                continue
            if i == self.eos:
                break
            if 0 <= i < self.size and self.tokens[i] and i not in self._special:
                out.append(self.tokens[i])
        return out

    def text(self, ids: Iterable[int]) -> str:
        """`tokenizer.decode(ids, skip_special_tokens=True)`: every special token skipped (the
        end token too, wherever it is)."""
        return self.tokeniser.decode([int(i) for i in ids if 0 <= int(i) < self.size])

    def label(self, i: int) -> str:
        """A piece in one line of one-cell characters (computed once per id, when first asked)."""
        label = self._labels.get(i)
        if label is None:
            if self._ordinary(i):
                t = self.tokeniser
                label = piece_label(self.tokens[i], t.pieces_style, t.marker, t.byte_fallback) or "?"
            elif self._known(i):  # a special token: its spelling, made visible
                label = "".join(visible_char(c) for c in self.tokens[i])
            else:
                label = f"?{i}"
            self._labels[i] = label
        return label

    def _known(self, i: int) -> bool:
        """An id of the vocabulary that has a spelling."""
        return 0 <= i < self.size and bool(self.tokens[i])

    def _ordinary(self, i: int) -> bool:
        """A piece of text (not a special token): labelled from its bytes."""
        return self._known(i) and i not in self._special

    def labels(self, ids: Iterable[int]) -> list[str]:
        """Labels of pieces side by side: row_labels, so a character cut into byte pieces shows
        on the piece where it starts (and +it on the rest), not as \\xNN escapes."""
        ids = [int(i) for i in ids]
        t = self.tokeniser
        pieces = [piece_bytes(self.tokens[i], t.pieces_style, t.marker, t.byte_fallback) if self._ordinary(i)
                  else None for i in ids]
        return [self.label(i) if shown is None else shown or "?" for i, shown in zip(ids, row_labels(pieces))]

    def shown_text(self, ids: Iterable[int]) -> str:
        """The text of ids as a header shows it: text(), but with <unk> (as the tokeniser spells
        it) where a piece was unknown, as transformers' decode keeps it, rather than nothing."""
        ids = [int(i) for i in ids]
        if self.unk is None or self.unk not in ids:
            return self.text(ids)
        keep = [self.tokens[i] for i in ids
                if 0 <= i < self.size and (i not in self._special or i == self.unk)]
        return self.join(keep).strip()

    def with_language(self, language: str) -> SubwordVocab:
        """The same vocabulary with its texts in `language` (a multilingual tokeniser's code:
        core/data/languages.py); ValueError for a code the tokeniser lacks."""
        return dataclasses.replace(self, tokeniser=self.tokeniser.with_language(language))

    # -- files -----------------------------------------------------------------------------
    def files(self) -> dict[str, bytes]:
        """The tokeniser's files by name: a checkpoint stores them beside the weights."""
        return dict(self.tokeniser.files)

    def to_dict(self) -> dict:
        return {"level": SUBWORD, "kind": self.tokeniser.kind, "side": self.side, "size": self.size,
                "pad": self.pad, "sos": self.sos, "eos": self.eos, "unk": self.unk,
                "files": {name: dict(fact) for name, fact in self._facts.items()},
                "settings": self.tokeniser.settings}

    @classmethod
    def from_dict(cls, data, files: dict[str, bytes] | None = None) -> SubwordVocab:
        """From a checkpoint's metadata and the files' bytes: every field, size and sha256
        checked. ValueError (one line) if not; TokeniserFileError for a file at fault."""
        files = files or {}
        if not isinstance(data, dict):
            raise ValueError("the vocabulary is not an object")
        fields = {"level", "kind", "side", "size", "pad", "sos", "eos", "unk", "files", "settings"}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ValueError(f"the vocabulary has an unknown field {unknown[0][:40]!r}")
        kind = data.get("kind")
        kinds = {**TOKENISERS, M2M100Tokeniser.kind: M2M100Tokeniser}
        if kind not in kinds:
            raise ValueError(f"the vocabulary's tokeniser kind must be one of {', '.join(kinds)}")
        facts = data.get("files")
        if not isinstance(facts, dict) or not 1 <= len(facts) <= MAX_FILES:
            raise ValueError("the vocabulary does not list its tokeniser's files")
        found = {}
        for name, fact in facts.items():
            if not isinstance(fact, dict) or set(fact) != {"size", "sha256"}:
                raise ValueError(f"the vocabulary's entry for file {name[:60]!r} is not its size and sha256")
            if name not in files:
                raise TokeniserFileError(name, "is missing: the vocabulary lists it")
            if len(files[name]) != fact["size"] or hashlib.sha256(files[name]).hexdigest() != fact["sha256"]:
                raise TokeniserFileError(name, "does not match the size and sha256 the vocabulary gives")
            found[name] = files[name]
        tokeniser = kinds[kind](found, data.get("settings"))
        if set(tokeniser.files) != set(found):
            raise ValueError("the vocabulary lists files its tokeniser does not read")
        size = data.get("size")
        if not isinstance(size, int) or isinstance(size, bool):
            raise ValueError("the vocabulary's size is not a number")
        return cls.make(tokeniser, data.get("side"), data.get("pad"), data.get("sos"), data.get("eos"),
                        data.get("unk"), size)


def vocab_from_dict(data, files: dict[str, bytes] | None = None) -> Vocab:
    """Any vocabulary from a checkpoint's metadata: a subword one with its files' bytes."""
    if isinstance(data, dict) and data.get("level") == SUBWORD:
        return SubwordVocab.from_dict(data, files)
    return Vocab.from_dict(data)
