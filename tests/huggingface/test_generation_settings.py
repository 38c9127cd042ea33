"""Every generation setting a folder carries is read as transformers 5 reads it and computed as
its generate() computes it. One tiny Marian folder (tests/huggingface/tiny_folders.py) is made once;
each setting is written into a generation_config.json of a variant of it, read by minitx
(read_model) and by transformers (GenerationConfig.from_pretrained, as from_pretrained loads it),
and greedy ids and per-step scores, beam ids and sequences_scores are compared with generate's.
The processors alone are also compared with the ones generate builds (_get_logits_processor) on
random scores. Reading: generation_config.json alone when present (a key it drops is not taken
from config.json); without it, config.json's generation keys (from_model_config)."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from transformers import GenerationConfig

from minitx.core.data.generation import Generation
from minitx.core.importing.hf_generation import read_generation
from minitx.core.importing.huggingface import read_model
from minitx.core.interp.beam import beam_search
from minitx.core.interp.decode import Stepper, cut_after_end, greedy_decode
from tests.huggingface.tiny_folders import load_reference, save_model, special_ids, vocab_size

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

IDS = special_ids("marian")
V = vocab_size("marian")
# One setting each (besides the folder's own: PAD a bad word, EOS forced at max_length 24), chosen
# to change this random model's choices: they are checked to change something.
SETTINGS = {
    "repetition_penalty": {"repetition_penalty": 1.8},
    "encoder_repetition_penalty": {"encoder_repetition_penalty": 3.0},
    "sequence_bias": {"sequence_bias": [[[7], 18.0], [[7, 9], 40.0], [[IDS["start"], 5], -3.0]]},
    "exponential_decay_length_penalty": {"exponential_decay_length_penalty": [2, 1.6]},
    "renormalize_logits": {"renormalize_logits": True, "repetition_penalty": 1.8},
    "encoder_no_repeat_ngram_size": {"encoder_no_repeat_ngram_size": 1},
    "remove_invalid_values": {"remove_invalid_values": True, "min_length": 5},
    "no_repeat_ngram_size+min_length": {"no_repeat_ngram_size": 2, "min_length": 6},
    "all": {"repetition_penalty": 1.3, "encoder_repetition_penalty": 1.5, "no_repeat_ngram_size": 3,
            "sequence_bias": [[[7], 2.0]], "exponential_decay_length_penalty": [4, 1.2],
            "renormalize_logits": True, "encoder_no_repeat_ngram_size": 2, "suppress_tokens": [8]},
}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(folder, its generation_config.json, transformers' model) of one tiny Marian folder."""
    folder = save_model(tmp_path_factory.mktemp("settings") / "marian", "marian")
    return folder, json.loads((folder / "generation_config.json").read_text()), load_reference(folder)


def variant(base, tmp_path, generation: dict | None, config: dict | None = None):
    """A copy of the base folder with this generation_config.json (None: none) and config.json
    keys added -> (folder, minitx's model, transformers' model with the folder's settings)."""
    folder, _, reference = base
    copy = tmp_path / "variant"
    shutil.copytree(folder, copy)
    if generation is None:
        (copy / "generation_config.json").unlink()
    else:
        (copy / "generation_config.json").write_text(json.dumps(generation))
    if config:
        cfg = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps({**cfg, **config}))
    if generation is None:  # from_pretrained builds the settings from config.json: its own path
        return copy, read_model(copy).model, load_reference(copy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference.generation_config = GenerationConfig.from_pretrained(copy)  # as from_pretrained reads it
    return copy, read_model(copy).model, reference


def sources(rows: int = 3, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 60, (rows, 7), generator=generator)  # few ids: sources repeat some
    src[:, 2:5] = torch.tensor([245, 202, 72])  # what this model likes to say: the source's rules act
    src[:, -1] = IDS["eos"]
    return src


def greedy_of(reference, src) -> tuple[list[list[int]], list[torch.Tensor]]:
    out = reference.generate(input_ids=src, num_beams=1, do_sample=False, return_dict_in_generate=True,
                             output_scores=True)
    return out.sequences, list(out.scores)


def check_greedy(model, reference, src) -> list[list[int]]:
    """minitx's greedy ids equal generate's, and its processed scores at each step of generate's
    sequences equal generate's scores (-inf at the same ids, the rest within 1e-4)."""
    sequences, scores = greedy_of(reference, src)
    eos = model.generation.eos
    theirs = [cut_after_end(row, eos) for row in sequences[:, 1:].tolist()]
    ours = [cut_after_end(row, eos) for row in greedy_decode(model, src).tolist()]
    assert ours == theirs
    with torch.no_grad():
        logits = model(src, sequences[:, :-1])  # (B, T, V): every step's logits, teacher-forced
    max_length = model.generation.cap(1, model.cfg.max_len) + 1  # the folder's, the start included
    for t, step_scores in enumerate(scores):
        mine = model.generation.process(logits[:, t], sequences[:, : t + 1], max_length=max_length, src=src)
        finite = torch.isfinite(step_scores)
        assert torch.equal(finite, torch.isfinite(mine)), t
        # logits of size ~20 through a full forward (ours) and a cached one (generate): float32 apart
        assert torch.allclose(mine[finite], step_scores[finite], atol=5e-4), t
    stepped = Stepper(model, src[0].tolist(), vocab=_Vocab()).run()
    assert [r.token for r in stepped] == theirs[0]  # the step view decodes the same
    return theirs


def check_beam(model, reference, src, beams: int = 3):
    eos = model.generation.eos
    out = reference.generate(input_ids=src[:1], num_beams=beams, num_return_sequences=beams, do_sample=False,
                             return_dict_in_generate=True, output_scores=True)
    theirs = [tuple(cut_after_end(row, eos)) for row in out.sequences[:, 1:].tolist()]
    ours = beam_search(model, src[0].tolist(), nbest=beams, beams=beams)
    assert [h.tokens for h in ours] == theirs
    assert [h.score for h in ours] == pytest.approx(out.sequences_scores.tolist(), abs=1e-4)
    return theirs


class _Vocab:
    """The labels the Stepper shows (ids as text): enough for a folder without its tokeniser."""

    size = V

    @staticmethod
    def label(token: int) -> str:
        return str(token)


@pytest.mark.parametrize("name", [pytest.param(name, marks=[] if name == "all" else pytest.mark.slow)
                                  for name in SETTINGS])  # each alone: tier 2; together: tier 1
def test_each_setting_decodes_as_generate_greedy_and_beam(name, base, tmp_path):
    _, own, _ = base
    folder, model, reference = variant(base, tmp_path, {**own, **SETTINGS[name]})
    src = sources()
    greedy, beam = check_greedy(model, reference, src), check_beam(model, reference, src)
    plain = read_model(base[0]).model
    without = [cut_after_end(r, plain.generation.eos) for r in greedy_decode(plain, src).tolist()]
    plain_beam = [h.tokens for h in beam_search(plain, src[0].tolist(), nbest=3, beams=3)]
    if name not in ("renormalize_logits", "remove_invalid_values"):  # these change scores, not choices
        assert greedy != without or beam != plain_beam, f"{name} changed nothing: the test proves nothing"


def test_a_folder_without_generation_config_reads_config_jsons_generation_keys(base, tmp_path):
    """An older folder: no_repeat_ngram_size, min_length and a penalty only in config.json, which
    from_model_config turns into the settings generate() uses."""
    folder, model, reference = variant(base, tmp_path, None, {"no_repeat_ngram_size": 2, "min_length": 6,
                                                              "repetition_penalty": 1.5, "max_length": 20})
    g = model.generation
    assert (g.no_repeat_ngram_size, g.min_length, g.repetition_penalty, g.max_length) == (2, 6, 1.5, 20)
    assert dict((k, f) for k, _, f in g.sources)["no_repeat_ngram_size"] == "config.json"
    src = sources(seed=1)
    check_greedy(model, reference, src)
    check_beam(model, reference, src)


def test_a_key_generation_config_drops_is_not_taken_from_config_json(base, tmp_path):
    """A folder whose forced EOS was switched off: config.json keeps forced_eos_token_id, and
    generation_config.json (read alone) leaves it out; generate() forces no end, nor does minitx.
    config.json's no_repeat_ngram_size is not applied either."""
    _, own, _ = base
    dropped = {k: v for k, v in own.items() if k != "forced_eos_token_id"}
    folder, model, reference = variant(base, tmp_path, dropped, {"no_repeat_ngram_size": 2})
    assert model.generation.forced_eos is None and model.generation.no_repeat_ngram_size == 0
    assert dict((k, f) for k, _, f in model.generation.sources)["forced_eos_token_id"] == "default"
    src = sources(seed=2)
    ids = check_greedy(model, reference, src)
    check_beam(model, reference, src)
    assert any(row[-1] not in model.generation.eos for row in ids)  # an output runs to the cap unended


def test_settings_minitx_does_not_compute_are_named_and_ignored_sampling_is_not(base, tmp_path):
    _, own, _ = base
    _, model, _ = variant(base, tmp_path, {**own, "temperature": 0.5, "top_k": 5})
    assert model.generation.not_computed == ()  # generate ignores them without do_sample
    sources_ = {k: f for k, _, f in model.generation.sources}
    assert sources_["temperature"] == "generation_config.json, ignored: do_sample is off"
    shutil.rmtree(tmp_path / "variant")
    _, model, _ = variant(base, tmp_path, {**own, "do_sample": True, "temperature": 0.5,
                                           "num_beam_groups": 2})
    line = model.generation.not_computed_line
    assert "do_sample true" in line and "temperature 0.5" in line and "num_beam_groups 2" in line
    assert "top_k 50" in line  # sampling's default, which generate would apply


def test_a_value_generate_refuses_is_refused_in_one_line_naming_the_file(base, tmp_path):
    from minitx.core.importing.errors import ImportFileError

    _, own, _ = base
    (tmp_path / "generation_config.json").write_text(json.dumps({**own, "repetition_penalty": 2}))
    with pytest.raises(ImportFileError, match=r"generation_config.json: repetition_penalty must be a pos"):
        read_generation(tmp_path, {}, V)
    clash = {**own, "suppress_tokens": [own["forced_eos_token_id"]]}  # GenerationConfig refuses it too
    with pytest.raises(ValueError, match="is also in `suppress_tokens`"):
        GenerationConfig(**clash)
    (tmp_path / "generation_config.json").write_text(json.dumps(clash))
    with pytest.raises(ImportFileError, match=r"forced_eos_token_id 0 is also in suppress_tokens"):
        read_generation(tmp_path, {}, V)


# -- the processors alone, against the ones generate builds ------------------------------------

PROCESSOR_SETTINGS = [
    dict(repetition_penalty=1.7), dict(repetition_penalty=0.6), dict(encoder_repetition_penalty=1.9),
    dict(sequence_bias=(((3,), 2.5), ((1, 2), -1.5), ((0, 1, 2), 4.0))),
    dict(exponential_decay_length_penalty=(1, 1.5)), dict(renormalize_logits=True),
    dict(encoder_no_repeat_ngram_size=1), dict(encoder_no_repeat_ngram_size=2),
    dict(encoder_no_repeat_ngram_size=3), dict(remove_invalid_values=True, min_length=4, forced_bos=2),
    dict(repetition_penalty=1.3, encoder_repetition_penalty=0.7, sequence_bias=(((4,), 1.0),),
         no_repeat_ngram_size=2, encoder_no_repeat_ngram_size=2, bad_words=((5,), (1, 3)), min_length=3,
         exponential_decay_length_penalty=(0, 2.0), suppressed=(6,), begin_suppressed=(7,),
         renormalize_logits=True, forced_eos=0),
]


def transformers_config(g: Generation, max_length: int) -> GenerationConfig:
    config = GenerationConfig(
        eos_token_id=list(g.eos), max_length=max_length, min_length=g.min_length or None,
        repetition_penalty=g.repetition_penalty, encoder_repetition_penalty=g.encoder_repetition_penalty,
        sequence_bias=[[list(w), b] for w, b in g.sequence_bias] or None,
        no_repeat_ngram_size=g.no_repeat_ngram_size,
        encoder_no_repeat_ngram_size=g.encoder_no_repeat_ngram_size,
        bad_words_ids=[list(w) for w in g.bad_words] or None, forced_bos_token_id=g.forced_bos,
        forced_eos_token_id=g.forced_eos, remove_invalid_values=g.remove_invalid_values,
        exponential_decay_length_penalty=g.exponential_decay_length_penalty,
        suppress_tokens=list(g.suppressed) or None, begin_suppress_tokens=list(g.begin_suppressed) or None,
        renormalize_logits=g.renormalize_logits)
    config._eos_token_tensor = torch.tensor(g.eos)
    return config


@pytest.fixture(scope="module")
def tiny_generator():
    """A transformers encoder-decoder, only for its _get_logits_processor (generate's own list)."""
    from transformers import MarianConfig, MarianMTModel

    return MarianMTModel(MarianConfig(vocab_size=12, d_model=8, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=1, decoder_attention_heads=1, encoder_ffn_dim=8,
                                      decoder_ffn_dim=8, pad_token_id=11, eos_token_id=0,
                                      decoder_start_token_id=11))


@pytest.mark.parametrize("settings", PROCESSOR_SETTINGS, ids=lambda s: "+".join(s))
@pytest.mark.parametrize("length", [1, 3, 6])
def test_the_rules_change_scores_as_the_processors_generate_builds(settings, length, tiny_generator):
    g = Generation(start=11, eos=(0,), pad=11, **settings)
    generator = torch.Generator().manual_seed(length)
    beams, max_length = 2, 7
    prefix = torch.randint(0, 5, (2 * beams, length), generator=generator)  # (N, t): few ids, n-grams repeat
    prefix[:, 0] = 11
    src = torch.randint(0, 5, (2, 6), generator=generator)  # (B, S): two sources of two beams each
    scores = torch.randn(2 * beams, 12, generator=generator).log_softmax(-1)
    scores[1, 3] = float("-inf")
    processors = tiny_generator._get_logits_processor(transformers_config(g, max_length),
                                                      input_ids_seq_length=1, encoder_input_ids=src,
                                                      device="cpu")
    theirs = processors(prefix, scores.clone())
    ours = g.process(scores, prefix, max_length=max_length, src=src)
    assert torch.equal(ours, theirs)


def test_the_step_names_the_rule_that_changed_the_choice_and_what_it_would_have_been():
    g = Generation(start=5, eos=(0,), pad=5, repetition_penalty=5.0, suppressed=(4,))
    scores = torch.tensor([[0.0, 0.1, 3.0, 2.9, 9.0, 0.2]])  # 4 first, suppressed; then 2, penalised
    changes: list[tuple[str, int]] = []
    out = g.process(scores, torch.tensor([[5, 2]]), max_length=10, changes=changes)
    assert int(out.argmax()) == 3
    assert changes == [("suppress_tokens", 4)]  # the penalty moved 2 below 3, but 4 led until suppressed
    changes.clear()
    g.process(scores.index_fill(1, torch.tensor([4]), -1.0), torch.tensor([[5, 2]]), max_length=10,
              changes=changes)
    assert changes == [("repetition_penalty", 2)]


# -- what commands say -------------------------------------------------------------------------

def test_decode_names_what_it_does_not_compute_and_which_rule_changed_a_step(base, tmp_path):
    """decode (plain, --json, --beams --json) names do_sample and what sampling would read, every
    time, on stderr and in the JSON; each step of --json says which rule changed its choice and
    what the model's scores alone would have chosen."""
    from click.testing import CliRunner

    from minitx.tui.cli.main import main

    _, own, _ = base
    folder, _, _ = variant(base, tmp_path, {**own, "repetition_penalty": 1.8, "do_sample": True,
                                                "temperature": 0.7})
    line = "note: not computed: do_sample true, temperature 0.7, top_k 50 (generate() applies them"
    runs = {flags: CliRunner().invoke(main, ["decode", str(folder), "hello world", *flags],
                                      catch_exceptions=False)
            for flags in ((), ("--json",), ("--beams", "2", "--json"))}
    for flags, run in runs.items():
        assert run.exit_code == 0 and line in run.stderr, flags
    for flags in (("--json",), ("--beams", "2", "--json")):
        named = json.loads(runs[flags].stdout)["not_computed"]
        assert named == ["do_sample true", "temperature 0.7", "top_k 50"]
    steps = json.loads(runs[("--json",)].stdout)["results"][0]["steps"]
    ruled = [s["ruled"] for s in steps if s["ruled"]]
    assert ruled and all(r[0]["rule"] == "repetition_penalty" for r in ruled)
    assert all(s["ruled"][0]["instead"] != s["token"] for s in steps if s["ruled"])
    inspected = CliRunner().invoke(main, ["inspect", str(folder), "--json"], catch_exceptions=False)
    sources_ = {k: (v, f) for k, v, f in json.loads(inspected.stdout)["huggingface"]["generation"]["sources"]}
    assert sources_["repetition_penalty"] == ("1.8", "generation_config.json")
    assert sources_["min_length"] == ("0", "default")
    assert sources_["max_length"] == ("24", "generation_config.json")


def test_a_converted_file_keeps_every_setting_and_what_is_not_computed():
    """`minitx import` of a folder keeps its settings in the file's metadata (to_dict, from_dict)."""
    g = Generation(start=5, eos=(0,), pad=5, repetition_penalty=1.2, encoder_repetition_penalty=0.8,
                   sequence_bias=(((1, 2), -1.5), ((3,), 2.0)), encoder_no_repeat_ngram_size=2,
                   exponential_decay_length_penalty=(3, 1.1), remove_invalid_values=True,
                   renormalize_logits=True, not_computed=("do_sample true",),
                   sources=(("repetition_penalty", "1.2", "generation_config.json"),))
    back = Generation.from_dict(json.loads(json.dumps(g.to_dict())), vocab_size=6)
    assert back == g and (back.not_computed, back.sources) == (g.not_computed, g.sources)
    with pytest.raises(ValueError, match="below 3"):
        Generation.from_dict(g.to_dict(), vocab_size=3)  # sequence_bias's id 3 beyond the vocabulary


token = st.integers(0, 11)
every_setting = st.builds(
    Generation, start=st.just(11), eos=st.tuples(token) | st.tuples(token, token), pad=st.just(11),
    repetition_penalty=st.sampled_from([1.0, 0.5, 1.7]),
    encoder_repetition_penalty=st.sampled_from([1.0, 2.5]),
    sequence_bias=st.lists(st.tuples(st.lists(token, min_size=1, max_size=3).map(tuple),
                                     st.sampled_from([-2.0, 1.5, 4.0])), max_size=3)
    .map(lambda pairs: tuple(dict(pairs).items())),
    no_repeat_ngram_size=st.integers(0, 3), encoder_no_repeat_ngram_size=st.integers(0, 3),
    bad_words=st.lists(st.lists(token, min_size=1, max_size=2).map(tuple), max_size=2).map(tuple),
    min_length=st.integers(0, 4), forced_bos=st.none() | token, forced_eos=st.none() | token,
    remove_invalid_values=st.booleans(),
    exponential_decay_length_penalty=st.none() | st.tuples(st.integers(0, 3), st.sampled_from([1.3, 0.8])),
    suppressed=st.lists(token, max_size=2).map(tuple),
    begin_suppressed=st.lists(token, max_size=2).map(tuple),
    renormalize_logits=st.booleans(),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(g=every_setting, length=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_any_mix_of_settings_changes_scores_as_generates_processors_in_its_order(g, length, seed,
                                                                                 tiny_generator):
    assume(g.forced_bos not in g.suppressed and g.forced_eos not in g.suppressed)  # refused by both
    generator = torch.Generator().manual_seed(seed)
    prefix = torch.randint(0, 5, (4, length), generator=generator)  # (N, t): two sources' two beams
    prefix[:, 0] = 11
    src = torch.randint(0, 5, (2, 5), generator=generator)  # (B, S)
    scores = torch.randn(4, 12, generator=generator).log_softmax(-1)
    max_length = length + int(torch.randint(1, 3, (1,), generator=generator))
    processors = tiny_generator._get_logits_processor(transformers_config(g, max_length),
                                                      input_ids_seq_length=1, encoder_input_ids=src,
                                                      device="cpu")
    torch.testing.assert_close(g.process(scores, prefix, max_length=max_length, src=src),
                               processors(prefix, scores.clone()), rtol=0, atol=0, equal_nan=True)
