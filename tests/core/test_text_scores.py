"""Corpus BLEU and chrF (core/training/text_scores.py): sacrebleu's figures, checked against
BLEU's definition worked by hand, with their signatures, and the lists it refuses."""

import math

import pytest

from minitx.core.training.text_scores import corpus_scores


def test_bleu_is_the_geometric_mean_of_clipped_ngram_precisions_worked_by_hand():
    # hyp vs ref share 5/6 unigrams, 3/5 bigrams, 2/4 trigrams, 1/3 4-grams; equal lengths (BP 1).
    scores = corpus_scores(["the cat sat on the mat"], ["the cat sat on a mat"])
    by_hand = 100 * math.exp(sum(math.log(p) for p in (5 / 6, 3 / 5, 2 / 4, 1 / 3)) / 4)
    assert scores.bleu == pytest.approx(by_hand, abs=1e-9)


def test_corpus_scores_pool_counts_over_sentences_rather_than_averaging_them():
    hyps, refs = ["the cat sat on the mat", "a dog"], ["the cat sat on a mat", "the dog barked loudly"]
    pooled = corpus_scores(hyps, refs)
    each = [corpus_scores([h], [r]) for h, r in zip(hyps, refs)]
    assert pooled.bleu != pytest.approx(sum(s.bleu for s in each) / 2)
    assert 0 < pooled.chrf < 100


def test_perfect_outputs_score_100_and_worse_ones_less():
    refs = ["Das Haus ist klein.", "Ich sehe den Hund."]
    assert corpus_scores(refs, refs).bleu == pytest.approx(100)
    assert corpus_scores(refs, refs).chrf == pytest.approx(100)
    worse = corpus_scores(["Das Haus ist gross.", "Ich sehe die Katze."], refs)
    assert worse.bleu < 100 and worse.chrf < 100


def test_signatures_name_the_tokeniser_smoothing_and_version():
    scores = corpus_scores(["a b c d"], ["a b c d"])
    assert "tok:13a" in scores.bleu_signature and "smooth:exp" in scores.bleu_signature
    assert "version:" in scores.bleu_signature
    assert "nc:6" in scores.chrf_signature and "nw:0" in scores.chrf_signature
    assert set(scores.to_dict()) == {"bleu", "chrf", "bleu_signature", "chrf_signature"}


def test_unequal_or_empty_lists_are_refused():
    with pytest.raises(ValueError, match="2 outputs but 1 references"):
        corpus_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no outputs"):
        corpus_scores([], [])
