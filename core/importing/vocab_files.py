"""Vocabulary files: one token per line, the line number (from 0) is the token's id, as
torchtext's `vocab.get_itos()` written line by line gives them. And their special tokens.

How a file is read (each rule decided here):
- UTF-8. A byte-order mark at the very start is dropped (Windows editors write one); any other
  byte that is not UTF-8 is an error naming its line.
- A line ends at "\\n"; a "\\r" before it (Windows line endings) is dropped with it. The newline
  after the last token is optional: "a\\nb\\n" and "a\\nb" are both two tokens.
- Otherwise a line is its token verbatim: spaces inside or around it belong to it (a
  character vocabulary has " " as a token). Hence no token can hold a newline.
- An empty line is an error naming it: an empty token cannot be typed, and skipping the line
  would shift every later id by one.
- A token on two lines is an error naming both: its id would be ambiguous.

Specials are found by the usual spellings (USUAL_SPELLINGS: padding <pad> or <blank>, start
<bos>, <s> or <sos>, end <eos> or </s>, unknown <unk>), or named explicitly as
"pad=<blank>,bos=<s>,eos=</s>,unk=<unk>" (a role not named is still looked for by its usual
spellings). Padding, start and end must all be found ("no end token among the specials" is an
error); an unknown token is optional.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from minitx.core.importing.errors import ImportFileError

ROLES = ("pad", "bos", "eos", "unk")
ROLE_WORDS = {"pad": "padding", "bos": "start", "eos": "end", "unk": "unknown"}
USUAL_SPELLINGS = {"pad": ("<pad>", "<blank>"), "bos": ("<bos>", "<s>", "<sos>"), "eos": ("<eos>", "</s>"),
                   "unk": ("<unk>",)}
REQUIRED_ROLES = ("pad", "bos", "eos")
MAX_FILE_BYTES = 64 * 1024 * 1024  # a vocabulary of a million long words is far below this
BOM = "\ufeff"


@dataclass(frozen=True)
class VocabFile:
    path: Path
    tokens: tuple[str, ...]  # id -> token

    def id_of(self, token: str) -> int | None:
        try:
            return self.tokens.index(token)
        except ValueError:
            return None


@dataclass(frozen=True)
class Specials:
    """Ids of the special tokens in one vocabulary (unk None: the vocabulary has none)."""

    pad: int
    bos: int
    eos: int
    unk: int | None


def read_vocab_file(path: str | os.PathLike) -> VocabFile:
    """The file's tokens in id order. Raises ImportFileError naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise ImportFileError(f"no such file: {path}")
    if path.is_dir():
        raise ImportFileError(f"{path} is a folder, not a vocabulary file")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ImportFileError(f"{path} is {path.stat().st_size:,} bytes long; a vocabulary file "
                                  f"is at most {MAX_FILE_BYTES:,}")
        data = path.read_bytes()
    except OSError as e:
        raise ImportFileError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ImportFileError(f"{path} line {line}: byte {data[e.start]:#04x} is not UTF-8 text") from None
    text = text.removeprefix(BOM)
    lines = text.split("\n")
    if lines[-1] == "":  # the newline after the last token, or an empty file
        lines.pop()
    tokens = [line.removesuffix("\r") for line in lines]
    if not tokens:
        raise ImportFileError(f"{path} holds no tokens (one token per line)")
    first_line: dict[str, int] = {}
    for number, token in enumerate(tokens, start=1):
        if token == "":
            raise ImportFileError(f"{path} line {number} is empty; every line is one token, and its "
                                  f"line number (from 0) is its id")
        if token in first_line:
            raise ImportFileError(f"{path} line {number} repeats {token!r} from line {first_line[token]}")
        first_line[token] = number
    return VocabFile(path, tuple(tokens))


def parse_specials(text: str) -> dict[str, str]:
    """"pad=<blank>,eos=</s>" -> {"pad": "<blank>", "eos": "</s>"}. A token is everything after
    the first "=" up to the next comma (so a token holding a comma cannot be named this way)."""
    named: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        role, equals, token = item.partition("=")
        role = role.strip()
        if not equals or not token:
            raise ImportFileError(f"specials: {item!r} is not ROLE=TOKEN (roles: {', '.join(ROLES)})")
        if role not in ROLES:
            raise ImportFileError(f"specials: unknown role {role!r} in {item!r}; the roles are "
                                  f"{', '.join(ROLES)}")
        if role in named:
            raise ImportFileError(f"specials: {role} is named twice")
        named[role] = token
    return named


def find_specials(vocab: VocabFile, explicit: str | dict[str, str] = "") -> Specials:
    """The ids of the specials: the explicitly named tokens, the rest by their usual spellings."""
    named = parse_specials(explicit) if isinstance(explicit, str) else dict(explicit)
    path = vocab.path
    ids: dict[str, int | None] = {}
    for role in ROLES:
        if role in named:
            i = vocab.id_of(named[role])
            if i is None:
                raise ImportFileError(f"{path}: {role}={named[role]!r} is not one of its tokens")
            ids[role] = i
            continue
        found = [(spelling, i) for spelling in USUAL_SPELLINGS[role]
                 if (i := vocab.id_of(spelling)) is not None]
        if len(found) > 1:
            listed = " and ".join(f"{s!r} (line {i + 1})" for s, i in found)
            raise ImportFileError(f"{path}: both {listed} could be the {ROLE_WORDS[role]} token; say "
                                  f"which with {role}=TOKEN")
        ids[role] = found[0][1] if found else None
        if ids[role] is None and role in REQUIRED_ROLES:
            spellings = ", ".join(USUAL_SPELLINGS[role])
            raise ImportFileError(f"{path}: no {ROLE_WORDS[role]} token among the specials (looked for "
                                  f"{spellings}); name it with {role}=TOKEN")
    taken: dict[int, str] = {}
    for role, i in ids.items():
        if i is None:
            continue
        if i in taken:
            raise ImportFileError(f"{path}: {taken[i]} and {role} are both {vocab.tokens[i]!r} (line "
                                  f"{i + 1}); each special needs its own token")
        taken[i] = role
    return Specials(pad=ids["pad"], bos=ids["bos"], eos=ids["eos"], unk=ids["unk"])  # type: ignore[arg-type]
