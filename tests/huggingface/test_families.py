"""The families next door, opened exactly as transformers computes them: on one tiny random folder
of each (tests/huggingface/tiny_folders.py NEW_FAMILIES: mBART-50, NLLB (M2M100's network),
Pegasus, UMT5, T5 gated-relu, BART with a narrower decoder feed-forward, Marian with an odd
d_model), the step view's tokens and probabilities equal generate(num_beams=1)'s tokens and
output_logits, and beam search's sequences and scores generate(num_beams=K)'s. mBART-50's and
NLLB's sources carry the source language's code where their tokenisers put it, and a target
language is the decoder's forced first token, as generate(forced_bos_token_id=...) makes it.

Tier 1 runs NLLB's folder, and mBART-50's for its languages; the rest is tier 2 (slow)."""

from __future__ import annotations

import warnings

import pytest
import torch

from minitx.checkpoints import load
from minitx.core.data.languages import LanguageError, code_of, current, languages, with_languages
from minitx.core.data.tasks import get_task
from minitx.core.interp.beam import BeamSearch
from minitx.core.interp.decode import Stepper, cut_after_end
from tests.huggingface.conftest import reference_tokeniser
from tests.huggingface.tiny_folders import NEW_FAMILIES, load_reference, save_model

MULTILINGUAL = ("mbart50", "nllb")
SOURCES = ["Anna has 3 apples.", "On Friday, Zoë drives to Köln."]
FAMILIES = [pytest.param(f, marks=() if f == "nllb" else pytest.mark.slow) for f in NEW_FAMILIES]
TARGETS = {"mbart50": "fr_XX", "nllb": "fra_Latn"}
EOS_BOOST = {"pegasus": 20.0, "umt5": -4.0, "marian-odd": -4.0}  # outputs that end before the cap (a
# negative factor turns an EOS row the decoder stream points away from)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """family -> (folder, transformers' model, transformers' tokeniser), made when first asked."""
    made = {}

    def get(family: str):
        if family not in made:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                folder = save_model(tmp_path_factory.mktemp(family) / family, family,
                                    eos_boost=EOS_BOOST.get(family, 3.0))
                made[family] = folder, load_reference(folder), reference_tokeniser(folder)
        return made[family]

    return get


def reference_greedy(reference, ids: list[int], **settings):
    """generate's greedy tokens (start token dropped, cut after the end) and each step's
    probabilities, from its raw logits."""
    out = reference.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, **settings)
    eos = reference.generation_config.eos_token_id
    tokens = cut_after_end(out.sequences[0, 1:].tolist(), tuple(eos if isinstance(eos, list) else [eos]))
    return tokens, [logits[0].softmax(-1) for logits in out.logits][: len(tokens)]


def stepped(ckpt, ids: list[int]):
    """The step view's tokens and each step's probabilities (the model's whole distribution)."""
    results = Stepper(ckpt.model, ids, vocab=ckpt.task.vocab).run()
    return [r.token for r in results], [r.log_probs.exp() for r in results]


@pytest.mark.filterwarnings("ignore:Using the model-agnostic default")
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_steps_and_beams_equal_generates(family, folders):
    folder, reference, tokeniser = folders(family)
    ckpt = load(str(folder))
    lengths = set()
    for text in SOURCES:
        ids = ckpt.task.src_vocab.encode_text(text)
        assert ids == tokeniser(text).input_ids  # the source as transformers' tokeniser makes it
        theirs, their_probs = reference_greedy(reference, ids)
        ours, our_probs = stepped(ckpt, ids)
        assert ours == theirs
        for mine, other in zip(our_probs, their_probs):
            assert (mine - other).abs().max() < 1e-5
        out = reference.generate(input_ids=torch.tensor([ids]), num_beams=3, num_return_sequences=3,
                                 do_sample=False, return_dict_in_generate=True, output_scores=True)
        eos = ckpt.model.generation.eos
        their_beams = [tuple(cut_after_end(row, eos)) for row in out.sequences[:, 1:].tolist()]
        hypotheses = BeamSearch(ckpt.model, ids, beams=3).run().hypotheses(3)
        assert [h.tokens for h in hypotheses] == their_beams
        assert [h.score for h in hypotheses] == pytest.approx(out.sequences_scores.tolist(), abs=1e-4)
        lengths |= {len(t) for t in their_beams} | {len(theirs)}
    assert len(lengths) > 1  # outputs that end at different steps, not all at the cap


@pytest.mark.filterwarnings("ignore:Using the model-agnostic default")
@pytest.mark.parametrize("family", MULTILINGUAL)
def test_languages_are_where_the_tokeniser_puts_them_and_the_target_is_forced_first(family, folders):
    folder, reference, tokeniser = folders(family)
    ckpt = load(str(folder))
    codes = languages(ckpt.task)
    assert TARGETS[family] in codes and current(ckpt.task)[0] == tokeniser.src_lang
    source = "deu_Latn" if family == "nllb" else "de_DE"
    task, generation = with_languages(ckpt.task, ckpt.model.generation, source, TARGETS[family])
    tokeniser.src_lang, tokeniser.tgt_lang = source, TARGETS[family]
    text = SOURCES[1]
    ids = task.src_vocab.encode_text(text)
    assert ids == tokeniser(text).input_ids and ids[0] == tokeniser.convert_tokens_to_ids(source)
    assert task.vocab.tokeniser.encode([text])[0] == tokeniser(text_target=text).input_ids
    target = tokeniser.convert_tokens_to_ids(TARGETS[family])
    theirs, their_probs = reference_greedy(reference, ids, forced_bos_token_id=target)
    ckpt.model.generation = generation
    ours, our_probs = stepped(ckpt, ids)
    assert ours == theirs and ours[0] == target
    assert (our_probs[1] - their_probs[1]).abs().max() < 1e-5
    assert task.vocab.text(ours) == tokeniser.decode(theirs, skip_special_tokens=True)
    out = reference.generate(input_ids=torch.tensor([ids]), num_beams=3, num_return_sequences=3,
                             do_sample=False, forced_bos_token_id=target, return_dict_in_generate=True,
                             output_scores=True)
    their_beams = [tuple(cut_after_end(row, generation.eos)) for row in out.sequences[:, 1:].tolist()]
    hypotheses = BeamSearch(ckpt.model, ids, beams=3).run().hypotheses(3)
    assert [h.tokens for h in hypotheses] == their_beams and their_beams[0][0] == target
    assert [h.score for h in hypotheses] == pytest.approx(out.sequences_scores.tolist(), abs=1e-4)


def test_an_unknown_language_code_is_one_line_naming_the_close_ones_and_exit_2(folders):
    from click.testing import CliRunner

    from minitx.tui.cli.main import main

    folder = str(folders("nllb")[0])
    with pytest.raises(LanguageError, match="no language codes"):
        code_of(get_task("reverse"), "fra_Latn")
    result = CliRunner().invoke(main, ["decode", folder, "Anna has 3 apples.", "--tgt-lang", "fra"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--tgt-lang: unknown language code 'fra'; close: fra_Latn" in lines[0], lines
    result = CliRunner().invoke(main, ["decode", folder, "Anna has 3 apples.", "--src-lang", "deu_Latn",
                                       "--tgt-lang", "fra_Latn", "--json"])
    assert result.exit_code == 0, result.output
