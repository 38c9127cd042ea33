"""Beam search (core/interp/beam.py) against an exhaustive search written in tests/ (beam_reference.py):
on a model with two ordinary tokens and a short length cap every hypothesis fits in the beam, so the
search must find exactly the best outputs that scoring every possible output finds. The exhaustive
search scores with full forward passes (no cache), the beam with its cache reordered per step."""

import dataclasses

import pytest

from minitx.core.interp.beam import BeamSearch, score_outputs
from minitx.core.model import kv_cache
from tests.core.beam_reference import CAP, COVERING, SOURCE, exhaustive, tiny_model


@pytest.mark.parametrize("bug, length_penalty, early_stopping, rules", [
    ("", 1.0, "never", {}),
    ("", 0.0, False, {}),
    ("", 2.0, "never", {"no_repeat_ngram_size": 2}),
    ("no-causal-mask", -1.0, "never", {"bad_words": ((1, 1),)}),  # the full-forward decoder
    ("swap-cross", 1.0, "never", {"min_length": 3}),  # cross keys/values cached per row too
])
def test_a_beam_that_holds_every_hypothesis_finds_what_scoring_every_output_finds(
        bug, length_penalty, early_stopping, rules):
    model = tiny_model(1, bug=bug)
    model.generation = dataclasses.replace(model.generation, **rules)
    search = BeamSearch(model, SOURCE, beams=COVERING, length_penalty=length_penalty,
                        early_stopping=early_stopping, cap=CAP).run()
    found = [(h.score, h.tokens) for h in search.hypotheses(3)]
    best = exhaustive(model, SOURCE, length_penalty)[:3]
    assert [tokens for _, tokens in found] == [tokens for _, tokens in best]
    assert [s for s, _ in found] == pytest.approx([s for s, _ in best], abs=1e-5)
    # the pool's sums are the outputs' own scores, re-scored one by one
    again = score_outputs(model, SOURCE, [list(t) for _, t in found], length_penalty=length_penalty, cap=CAP)
    assert [h.score for h in again] == pytest.approx([s for s, _ in found], abs=1e-5)


def test_each_step_feeds_the_cache_one_position_of_k_rows_and_the_tree_holds_the_winner(monkeypatch):
    fed = []
    step = kv_cache.IncrementalDecoder.step

    def counted(self, tokens, maps=None):
        fed.append((self.position, tokens.shape[0]))
        return step(self, tokens, maps)

    monkeypatch.setattr(kv_cache.IncrementalDecoder, "step", counted)
    search = BeamSearch(tiny_model(2), SOURCE, beams=3, cap=CAP).run()
    assert fed == [(t, 3) for t in range(len(search.steps))]  # reordered, never recomputed
    best = search.hypotheses(1)[0]
    path = search.path(best.node)
    assert [n.token for n in path] == list(best.tokens)
    assert [n.step for n in path] == list(range(len(path)))
    assert path[-1].state == "finished" and all(n.state == "kept" for n in path[:-1])
    assert sum(n.logp for n in path) == pytest.approx(best.logp, abs=1e-5)
    for record in search.steps:  # K run on from every step; pruned ones never have children
        assert len(record.running) == 3
        parents = {search.nodes[i].parent for i in record.candidates}
        assert all(p < 0 or search.nodes[p].state == "kept" for p in parents)
