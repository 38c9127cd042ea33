"""M2M100's own tokeniser (facebook/m2m100_*: sentencepiece.bpe.model and vocab.json, no
tokenizer.json), computing what transformers 5's M2M100Tokenizer computes for the same files
(core/importing/hf_tokenisers.py reads them from a folder; core/data/subword.py makes a
vocabulary of one).

M2M100Tokenizer is a Python tokeniser like MarianTokenizer (core/data/tokenisers.py), and this
is Marian's machinery with M2M100's differences:
- one sentencepiece model for both sides, its pieces looked up in vocab.json (a piece it lacks
  is <unk>); typed text is split at the added tokens first (the special tokens);
- the language codes are `__xx__` tokens numbered after vocab.json, in the order of the class's
  list (`language_codes`: "m2m100", 100 codes, or "wmt21"), whether or not the folder makes them
  special; a text is `__src__ pieces </s>` (the target's code for targets). No ">>xx<<" prefix
  is read as Marian's is;
- decoding skips the special tokens and joins the rest with the sentencepiece model, special
  tokens kept verbatim where asked, the ends stripped.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import cached_property

from minitx.core.data.tokenisers import MarianTokeniser, _texts

SPM_FILE = "sentencepiece.bpe.model"
VOCAB_FILE = "vocab.json"
# transformers' FAIRSEQ_LANGUAGE_CODES: a code's token is __code__, its id len(vocab.json) + its place
M2M100_CODES = {
    "m2m100": ("af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy",
               "da", "de", "el", "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu",
               "ha", "he", "hi", "hr", "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja", "jv", "ka",
               "kk", "km", "kn", "ko", "lb", "lg", "ln", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr",
               "ms", "my", "ne", "nl", "no", "ns", "oc", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sd",
               "si", "sk", "sl", "so", "sq", "sr", "ss", "su", "sv", "sw", "ta", "th", "tl", "tn", "tr",
               "uk", "ur", "uz", "vi", "wo", "xh", "yi", "yo", "zh", "zu"),
    "wmt21": ("en", "ha", "is", "ja", "cs", "ru", "zh", "de"),
}
M2M100_LANGUAGE = "en"  # M2M100Tokenizer's src_lang when none is given


def code_token(code: str) -> str:
    return f"__{code}__"


class M2M100Tokeniser(MarianTokeniser):
    """One side of an M2M100 tokeniser.

    settings: as MarianTokeniser's (encode_with and decode_with the sentencepiece model, vocab
    vocab.json), and languages (the class's codes in order, `en` not `__en__`) and language (the
    code this side's texts get)."""

    kind = "m2m100"
    FIELDS = MarianTokeniser.FIELDS | {"languages", "language"}

    def __init__(self, files: dict[str, bytes], settings: dict) -> None:
        listed = settings.get("languages") if isinstance(settings, dict) else None
        self.languages = tuple(_texts(listed, "language codes"))  # before the ids are looked up
        super().__init__(files, settings)
        if not self.languages:
            raise ValueError("the tokeniser's language codes are empty")
        self.language_at = "prefix"
        self._language(self.settings.get("language"))

    @staticmethod
    def _split_code(text: str) -> tuple[str, str]:
        return "", text  # no Marian-style ">>xx<<" prefix

    def _language(self, language) -> None:
        if language not in self.languages:
            raise ValueError(f"the tokeniser's language {str(language)[:40]!r} is not one of its codes")
        self.language_id = len(self.vocab) + self.languages.index(language)
        self.settings["language"] = language

    def with_language(self, language: str) -> M2M100Tokeniser:
        """The same tokeniser with its texts in `language` (transformers' src_lang / tgt_lang)."""
        other = copy.copy(self)
        other.settings = dict(self.settings)
        other._language(language)
        return other

    @cached_property
    def _codes(self) -> dict[str, int]:
        """__xx__ -> its id, after vocab.json's."""
        return {code_token(c): len(self.vocab) + i for i, c in enumerate(self.languages)}

    @cached_property
    def _by_id(self) -> dict[int, str]:
        table = {i: piece for piece, i in self.vocab.items()}
        table.update({i: token for token, i in self._codes.items()})
        table.update({a[0]: text for text, a in self.added.items()})
        return table

    def token_id(self, token: str) -> int | None:
        code = self._codes.get(token)
        return code if code is not None else super().token_id(token)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """`tokenizer(text)["input_ids"]` (src_lang) or `tokenizer(text_target=text)["input_ids"]`
        (tgt_lang): the code, the pieces, </s>."""
        return [[self.language_id, *ids] for ids in super().encode(texts)]

    def join(self, pieces: Sequence[str]) -> str:
        """M2M100Tokenizer.convert_tokens_to_string: special tokens kept as they are, the runs
        between them joined by the sentencepiece model, the ends stripped."""
        specials = set(self.specials)
        text, run = "", []
        for piece in pieces:
            if piece in specials:
                text += self._join.decode_pieces(run) + piece
                run = []
            else:
                run.append(piece)
        text = (text + self._join.decode_pieces(run)).strip()
        return text
