"""The generation settings (core/data/generation.py) act on one step's scores exactly as
transformers' logits processors do, in transformers' order, on random scores and prefixes."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import (
    ForcedBOSTokenLogitsProcessor,
    ForcedEOSTokenLogitsProcessor,
    LogitsProcessorList,
    MinLengthLogitsProcessor,
    NoBadWordsLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    SuppressTokensAtBeginLogitsProcessor,
    SuppressTokensLogitsProcessor,
)

from minitx.core.data.generation import Generation

V = 12


def transformers_processors(g: Generation, max_length: int) -> LogitsProcessorList:
    """The processors transformers' generate builds for the same settings, in its order."""
    processors = LogitsProcessorList()
    eos = list(g.eos)
    if g.no_repeat_ngram_size:
        processors.append(NoRepeatNGramLogitsProcessor(g.no_repeat_ngram_size))
    if g.bad_words:
        processors.append(NoBadWordsLogitsProcessor([list(w) for w in g.bad_words], eos))
    if g.min_length:
        processors.append(MinLengthLogitsProcessor(g.min_length, eos))
    if g.forced_bos is not None:
        processors.append(ForcedBOSTokenLogitsProcessor(g.forced_bos))
    if g.forced_eos is not None:
        processors.append(ForcedEOSTokenLogitsProcessor(max_length, g.forced_eos))
    if g.suppressed:
        processors.append(SuppressTokensLogitsProcessor(list(g.suppressed)))
    if g.begin_suppressed:
        processors.append(SuppressTokensAtBeginLogitsProcessor(list(g.begin_suppressed),
                                                               2 if g.forced_bos is not None else 1))
    return processors


token = st.integers(0, V - 1)
settings_strategy = st.builds(
    Generation,
    start=token, eos=st.tuples(token) | st.tuples(token, token), pad=token,
    suppressed=st.lists(token, max_size=2).map(tuple),
    bad_words=st.lists(st.lists(token, min_size=1, max_size=3).map(tuple), max_size=3).map(tuple),
    forced_bos=st.none() | token, forced_eos=st.none() | token,
    min_length=st.integers(0, 5), no_repeat_ngram_size=st.integers(0, 3),
    begin_suppressed=st.lists(token, max_size=2).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(g=settings_strategy, length=st.integers(1, 7), seed=st.integers(0, 10_000))
def test_the_rules_change_scores_exactly_as_transformers_processors_do(g, length, seed):
    generator = torch.Generator().manual_seed(seed)
    prefix = torch.randint(0, 4, (3, length), generator=generator)  # few ids: n-grams repeat
    prefix[:, 0] = g.start
    scores = torch.randn(3, V, generator=generator).log_softmax(-1)
    max_length = length + int(torch.randint(1, 3, (1,), generator=generator))
    ours = g.process(scores, prefix, max_length=max_length)
    theirs = transformers_processors(g, max_length)(prefix, scores.clone())
    assert torch.equal(ours, theirs)


def test_a_checkpoint_reads_back_the_same_settings_and_refuses_ids_beyond_the_vocabulary():
    g = Generation(start=5, eos=(0,), pad=5, bad_words=((5,), (1, 2)), forced_eos=0, max_length=512,
                   num_beams=4, early_stopping="never")
    assert Generation.from_dict(g.to_dict(), vocab_size=6) == g
    try:
        Generation.from_dict(g.to_dict(), vocab_size=5)
    except ValueError as e:
        assert "below 5" in str(e)
    else:
        raise AssertionError("an id beyond the vocabulary was accepted")
