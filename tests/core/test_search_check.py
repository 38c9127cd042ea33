"""The search check (core/interp/search_check.py) judged blind: on tiny random models that carry no
label minitx writes, its verdicts must match the truth an exhaustive search over every output gives
(tests/core/beam_reference.py): a search error exactly when some output scores above beam K's, a
model error exactly when a wrong output scores above the expected one. Repetition is told apart by
where cross-attention looks, which an intervention pins in the test."""

import pytest
import torch

from minitx import checkpoints
from minitx.core.interp.beam import BeamSearch
from minitx.core.interp.interventions import Head, Interventions
from minitx.core.interp.search_check import MODEL, SEARCH, repeated, search_check
from tests.core.beam_reference import CAP, exhaustive, tiny_model

CASES = [(seed, source) for seed in (2, 4) for source in ([0, 1, 1, 0], [1, 1, 1])]


@pytest.mark.parametrize("seed, source", CASES)
def test_a_search_error_is_reported_exactly_when_an_exhaustive_search_finds_a_better_output(seed, source):
    model = tiny_model(seed)
    best_score = exhaustive(model, source, 1.0)[0][0]
    verdicts = []
    for beams in (1, 2):
        found = BeamSearch(model, source, beams=beams, cap=CAP).run().hypotheses(1)[0]
        check = search_check(model, source, beams=beams, cap=CAP)
        assert (SEARCH in check.errors) == (best_score > found.score + 1e-5)
        assert check.output("beam 64").score == pytest.approx(best_score, abs=1e-5)  # 64 holds them all
        verdicts.append(SEARCH in check.errors)
    assert verdicts[0] or seed == 2 or source == [0, 1, 1, 0]  # the cases hold both kinds


def test_a_model_error_is_reported_exactly_when_a_wrong_output_outscores_the_expected_one():
    model = tiny_model(2)
    ranked = exhaustive(model, [0, 1, 1, 0], 1.0)
    right = search_check(model, [0, 1, 1, 0], beams=3, cap=CAP, expected=list(ranked[0][1]))
    wrong = search_check(model, [0, 1, 1, 0], beams=3, cap=CAP, expected=list(ranked[1][1]))
    assert MODEL not in right.errors and MODEL in wrong.errors
    # without an expected output, only the empty output winning tells a model error
    prefers_nothing = tiny_model(3)
    assert exhaustive(prefers_nothing, [0, 1, 1, 0], 1.0)[0][1] == (4,)
    assert MODEL in search_check(prefers_nothing, [0, 1, 1, 0], beams=2, cap=CAP).errors
    assert MODEL not in search_check(model, [0, 1, 1, 0], beams=3, cap=CAP).errors


def test_repetition_with_attention_held_on_one_source_token_is_told_from_repetition_that_follows_it():
    model = checkpoints.load("reverse").model
    source, output = [2, 1, 2, 1, 3], [3, 1, 2, 1, 2, model.cfg.eos_id]  # "1 2" twice, as the source
    follows = repeated(model, source, output)
    assert follows.ngram == (1, 2) and follows.starts == (1, 3) and not follows.stuck
    pinned = torch.zeros(1, 8, len(source), dtype=torch.bool)
    pinned[:, :, 2] = True  # every cross-attention head reads source position 3 alone
    heads = {Head("cross", layer, head): "expected" for layer in range(2) for head in range(4)}
    stuck = repeated(model, source, output, Interventions(patterns=heads, expected=pinned))
    assert stuck.stuck and set(stuck.attended) == {2}
    assert repeated(model, source, [3, 1, 2, 4, 5, model.cfg.eos_id]) is None
