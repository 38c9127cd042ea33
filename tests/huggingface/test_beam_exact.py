"""Beam search (core/interp/beam.py) is generate(num_beams=K)'s: on a tiny random folder of each
family (tests/huggingface/tiny_folders.py), under the folder's own generation settings (Marian's
banned PAD and forced EOS, BART's forced BOS), every returned sequence and its sequences_score
equal transformers' (scores within 1e-4), for several beams, length penalties and early-stopping
modes, no_repeat_ngram_size included."""

import dataclasses

import pytest
import torch

from minitx.core.importing.huggingface import read_model
from minitx.core.interp.beam import BeamSearch
from minitx.core.interp.decode import cut_after_end
from tests.huggingface.tiny_folders import load_reference, save_model, special_ids

SETTINGS = [  # (beams, length_penalty, early_stopping, no_repeat_ngram_size)
    (2, 1.0, False, 0),
    (3, 2.0, "never", 0),
    (4, 0.5, True, 0),
    (4, 1.0, False, 2),
]


@pytest.mark.filterwarnings("ignore:Using the model-agnostic default")
@pytest.mark.parametrize("family", ["marian", "t5", "bart"])
def test_every_returned_sequence_and_score_equal_generates(family, tmp_path):
    folder = save_model(tmp_path / family, family)
    reference, model = load_reference(folder), read_model(folder).model
    eos, own = model.generation.eos, model.generation
    generator = torch.Generator().manual_seed(4)
    lengths = set()
    for source in range(2):
        src = torch.randint(4, 250, (1, 5 + 2 * source), generator=generator)
        src[0, -1] = special_ids(family)["eos"]
        for beams, penalty, stopping, ngrams in SETTINGS:
            out = reference.generate(input_ids=src, num_beams=beams, num_return_sequences=beams,
                                     length_penalty=penalty, early_stopping=stopping,
                                     no_repeat_ngram_size=ngrams, do_sample=False,
                                     return_dict_in_generate=True, output_scores=True)
            theirs = [tuple(cut_after_end(row, eos)) for row in out.sequences[:, 1:].tolist()]
            model.generation = dataclasses.replace(own, no_repeat_ngram_size=ngrams)
            try:
                ours = BeamSearch(model, src[0].tolist(), beams=beams, length_penalty=penalty,
                                  early_stopping=stopping).run().hypotheses(beams)
            finally:
                model.generation = own
            assert [h.tokens for h in ours] == theirs, (beams, penalty, stopping, ngrams)
            assert [h.score for h in ours] == pytest.approx(out.sequences_scores.tolist(), abs=1e-4)
            lengths |= {len(t) for t in theirs}
    assert len(lengths) > 1  # outputs that end at different steps, not all at the cap
