"""A multilingual model's languages (mBART-50, NLLB-200, mBART): the codes its tokeniser knows,
the source language's code around every source, and the target language as the decoder's
forced first token, as transformers' `tokenizer.src_lang`, `tokenizer.tgt_lang` and
`generate(forced_bos_token_id=tokenizer.convert_tokens_to_ids(tgt_lang))` set them
(docs/huggingface.md). Where the source's code goes is the tokeniser's (core/data/tokenisers.py):
before the text (NLLB, mBART-50) or after its </s> (mBART, NLLB's legacy_behaviour).
"""

from __future__ import annotations

import dataclasses
import difflib

from minitx.core.data.generation import Generation
from minitx.core.data.subword import SubwordVocab
from minitx.core.data.task import Task


class LanguageError(ValueError):
    """A language code the model lacks, or a model without any: one line for a person."""


def languages(task: Task) -> tuple[str, ...]:
    """The task's language codes (its source tokeniser's), () for a model without them."""
    vocab = task.src_vocab
    return tuple(vocab.tokeniser.languages) if isinstance(vocab, SubwordVocab) else ()


def current(task) -> tuple[str | None, str | None]:
    """(the source's language, the target texts' language) the task's tokenisers are set to."""
    if not languages(task):
        return None, None
    return task.src_vocab.tokeniser.settings.get("language"), task.vocab.tokeniser.settings.get("language")


def code_of(task, code: str, flag: str = "the language") -> str:
    """`code` when the task knows it; LanguageError naming the close codes otherwise."""
    codes = languages(task)
    if not codes:
        raise LanguageError(f"{flag}: this model has no language codes (mBART-50, NLLB-200 and mBART have "
                            "them)")
    if code in codes:
        return code
    lowered = code.lower()
    close = [c for c in codes if c.lower().startswith(lowered) or lowered.startswith(c.lower().split("_")[0])]
    close = list(dict.fromkeys(close + difflib.get_close_matches(code, codes, n=3, cutoff=0.6)))[:3]
    hint = f"; close: {', '.join(close)}" if close else ""
    raise LanguageError(f"{flag}: unknown language code {code[:40]!r}{hint} (minitx inspect lists the "
                        f"model's {len(codes)} codes)")


def with_languages(task, generation: Generation, src_lang: str | None = None, tgt_lang: str | None = None,
                   ) -> tuple[object, Generation]:
    """(task, generation) with the source in `src_lang` (its code where the tokeniser puts it)
    and the output in `tgt_lang` (the target texts' code, and the decoder's forced first token:
    Generation.forced_bos). None leaves a side as it is; LanguageError for a code the model lacks."""
    if src_lang is None and tgt_lang is None:
        return task, generation
    src_lang = code_of(task, src_lang, "--src-lang") if src_lang is not None else None
    tgt_lang = code_of(task, tgt_lang, "--tgt-lang") if tgt_lang is not None else None
    src_vocab = task.src_vocab.with_language(src_lang) if src_lang is not None else task.src_vocab
    vocab = task.vocab.with_language(tgt_lang) if tgt_lang is not None else task.vocab
    if tgt_lang is not None:
        generation = dataclasses.replace(generation, forced_bos=vocab.tokeniser.language_id)
    return task.with_vocabularies(vocab, src_vocab), generation
