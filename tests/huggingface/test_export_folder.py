"""`minitx export MODEL --format hf --out DIR`: a folder that transformers opens with no missing or
unexpected keys, holding the weights it came from, whose generate() gives minitx's greedy ids and
whose tokeniser reads text as the original's does; for tiny Marian, T5, Flan-T5 and BART folders
opened in minitx, for files fine-tuned from tiny mBART-50, NLLB (M2M100's network), Pegasus,
UMT5 and Marian-with-a-vocabulary-per-side folders, and for imported files whose folder is gone
(the tokeniser's settings written from what the file keeps). A model no family computes, an
occupied DIR, and a failure while writing leave nothing behind."""

import json
import shutil
import warnings

import pytest
import torch
from safetensors.torch import load_file

from minitx import checkpoints
from minitx.core.importing import hf_export
from minitx.core.interp.decode import greedy_decode
from tests.cli.conftest import assert_one_line_error, run_cli
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.test_exact import generate, generated, sources
from tests.huggingface.tiny_folders import FAMILIES, SEPARATE_MARIAN, save_model

TEXTS = ["Zoë eats 3 cakes in Zürich.", "The house is small.", "Hello, world!"]


@pytest.fixture(scope="module", params=FAMILIES)
def family_folder(request, tmp_path_factory):
    return request.param, save_model(tmp_path_factory.mktemp(request.param) / request.param, request.param)


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    return save_model(tmp_path_factory.mktemp("marian") / "marian", "marian")


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    return save_model(tmp_path_factory.mktemp("bart") / "bart", "bart")


def opened(folder):
    """transformers' model of `folder` (with what loading it reported) and its tokeniser."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, info = AutoModelForSeq2SeqLM.from_pretrained(folder, output_loading_info=True)
        return model.eval(), info, AutoTokenizer.from_pretrained(folder)


def test_an_exported_folder_loads_in_transformers_with_the_weights_and_generates_minitxs_ids(
        family_folder, tmp_path):
    family, folder = family_folder
    out = tmp_path / "exported"
    run = run_cli("export", str(folder), "--format", "hf", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json"} <= {
        p.name for p in out.iterdir()}
    reference, info, tokenizer = opened(out)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    theirs, ours = load_file(str(folder / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert set(theirs) == set(ours)
    for name, tensor in theirs.items():
        if name.endswith("embed_positions.weight"):  # BART: rows 0 and 1 are never looked up
            assert torch.equal(ours[name][2:], tensor[2:]) and not ours[name][:2].any()
        else:
            assert torch.equal(ours[name], tensor), name
    minitx_model = checkpoints.load(str(folder)).model
    src, mask = sources(family if family != "flan-t5" else "t5", seed=5)
    assert generate(reference, src, mask) == generated(minitx_model, src)
    _, _, original = opened(folder)
    for text in TEXTS:
        assert tokenizer(text, text_target=text) == original(text, text_target=text)


@pytest.mark.parametrize("family", ["marian", "bart", "nllb", *(
    pytest.param(f, marks=pytest.mark.slow) for f in ("t5", "mbart50", "pegasus", "umt5", SEPARATE_MARIAN))])
def test_an_imported_file_whose_folder_is_gone_exports_a_tokeniser_transformers_reads_the_same(
        family, tmp_path):
    folder = save_model(tmp_path / family, family)
    imported = tmp_path / f"{family}.safetensors"
    assert run_cli("import", str(folder), "--out", str(imported)).exit_code == 0
    kept = tmp_path / "kept"
    shutil.copytree(folder, kept)
    shutil.rmtree(folder)  # only the file's own tokeniser files and settings are left
    run = run_cli("export", str(imported), "--format", "hf", "--out", str(tmp_path / "out"))
    assert run.exit_code == 0, run.stderr
    _, info, tokenizer = opened(tmp_path / "out")
    _, _, original = opened(kept)
    assert type(tokenizer).__name__ == type(original).__name__
    for text in TEXTS:
        assert tokenizer(text, text_target=text) == original(text, text_target=text)
        ids = original(text).input_ids
        assert tokenizer.decode(ids, skip_special_tokens=True) == original.decode(ids,
                                                                                  skip_special_tokens=True)


def test_a_model_no_family_computes_is_refused_naming_the_option_and_nothing_is_written(tmp_path):
    out = tmp_path / "out"
    message = assert_one_line_error(run_cli("export", "reverse", "--format", "hf", "--out", str(out)))
    assert "no Hugging Face family computes this model" in message and "--" in message
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_an_occupied_folder_is_refused_unless_forced(marian, tmp_path):
    folder = marian
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    run = run_cli("export", str(folder), "--format", "hf", "--out", str(out))
    assert run.exit_code == 2 and "not empty (--force replaces it)" in assert_one_line_error(run)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert run_cli("export", str(folder), "--format", "hf", "--out", str(out), "--force").exit_code == 0
    assert not (out / "notes.txt").exists() and (out / "model.safetensors").is_file()


def test_a_failure_while_writing_leaves_neither_the_folder_nor_a_partial_one(marian, tmp_path, monkeypatch):
    checkpoint = checkpoints.load(str(marian))

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(hf_export, "save_file", broken)
    with pytest.raises(OSError, match="disk full"):
        hf_export.export_folder(checkpoint.model, checkpoint.task, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_greedy_ids_of_the_exported_folder_reopened_in_minitx_are_the_originals(bart, tmp_path):
    folder = bart
    out = tmp_path / "out"
    assert run_cli("export", str(folder), "--format", "hf", "--out", str(out)).exit_code == 0
    src, _ = sources("bart", seed=7)
    original, again = checkpoints.load(str(folder)).model, checkpoints.load(str(out)).model
    assert torch.equal(greedy_decode(original, src), greedy_decode(again, src))


BART_LIKE = dict(norm="post", activation="gelu", embedding_norm=True, tie_embeddings=True, tie_output=True)
T5_LIKE = dict(norm="pre", norm_kind="rms", final_norms=True, activation="relu", position_encoding="relative",
               bias=False, scale_scores=False, embed_scale=False, tie_embeddings=True, tie_output=True,
               scale_output=True)


def own_model(task_name: str, **options):
    """A random minitx model of `task_name` with `options`, as `minitx train` would build it."""
    from minitx.core.config import ModelConfig
    from minitx.core.data.tasks import get_task
    from minitx.core.model.transformer import Seq2Seq

    task = get_task(task_name)
    torch.manual_seed(0)
    cfg = ModelConfig(**task.model_fields(), d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2,
                      n_decoder_layers=2, max_len=40, **options)
    return Seq2Seq(cfg).eval(), task


@pytest.mark.parametrize(("task_name", "options", "family", "texts"), [
    ("reverse", dict(BART_LIKE, position_encoding="learned"), "bart", ["3 1 4 1 5", "31415", "9 0 9 0 7"]),
    ("dates", dict(BART_LIKE, position_encoding="sinusoidal"), "bart",
     ["1 dec 26", "Tuesday, 1 December 2026", "12/03/1999"]),
    ("reverse", T5_LIKE, "t5", ["3 1 4 1 5", "2 7 1 8 2 8"]),
])
def test_a_model_of_minitxs_own_is_written_as_the_family_it_matches_with_a_tokeniser_of_its_vocabulary(
        task_name, options, family, texts, tmp_path):
    model, task = own_model(task_name, **options)
    done = hf_export.export_folder(model, task, tmp_path / "out")
    assert done.family == family and done.matched
    reference, info, tokenizer = opened(tmp_path / "out")
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    sources = [task.src_vocab.encode_text(t) for t in texts]
    for text, ids in zip(texts, sources):
        assert tokenizer(text).input_ids == ids
    cap = reference.generation_config.max_length - 1
    for ids in sources:
        src = torch.tensor([ids])
        theirs = reference.generate(src, num_beams=1, do_sample=False)[0, 1:].tolist()
        ours = greedy_decode(model, src, max_new_tokens=cap)[0].tolist()
        assert theirs == ours[: len(theirs)] and set(ours[len(theirs):]) <= {task.vocab.pad}
        assert tokenizer.decode(theirs, skip_special_tokens=True) == task.format(ours)


@pytest.mark.parametrize(("args", "says"), [
    (["--format", "hf"], "give --out DIR"),
    (["--format", "hf", "--out", "x", "--dtype", "float16"], "--dtype does not apply to --format hf"),
    (["--format", "hf", "--out", "x", "--trace", "3 1 4"], "--trace does not apply to --format hf"),
    (["--out", "x.safetensors", "--force"], "--force applies to --format hf"),
])
def test_options_that_do_not_go_with_a_folder_export_are_refused_before_anything_is_read(
        args, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = run_cli("export", "reverse", *args)
    assert run.exit_code == 2 and says in assert_one_line_error(run)
    assert list(tmp_path.iterdir()) == []


def test_a_file_whose_weights_moved_from_its_base_exports_its_own_weights_not_the_bases(marian, tmp_path):
    """What a fine-tune gives: the base's tokeniser and family, weights of its own."""
    from minitx.core.checkpoint import save_checkpoint

    base = checkpoints.load(str(marian))
    with torch.no_grad():
        for p in base.model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    tuned = save_checkpoint(tmp_path / "tuned.safetensors", base.model, base.task, base.summary)
    out = tmp_path / "out"
    assert run_cli("export", str(tuned), "--format", "hf", "--out", str(out)).exit_code == 0
    reference, info, _ = opened(out)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert torch.equal(reference.model.shared.weight, base.model.src_embed.weight)
    assert not torch.equal(load_file(str(out / "model.safetensors"))["model.shared.weight"],
                           load_file(str(marian / "model.safetensors"))["model.shared.weight"])
    src, mask = sources("marian", seed=9)
    assert generate(reference, src, mask) == generated(checkpoints.load(str(tuned)).model, src)


def test_an_exported_folder_keeps_the_score_rules_generate_applies(marian, tmp_path):
    """A folder with penalties and biases exports them to generation_config.json: transformers'
    generate of the exported folder gives minitx's greedy ids under those rules."""
    from transformers import GenerationConfig

    folder = tmp_path / "ruled"
    shutil.copytree(marian, folder)
    settings = json.loads((folder / "generation_config.json").read_text())
    settings.update({"repetition_penalty": 1.8, "encoder_repetition_penalty": 1.5,
                     "sequence_bias": [[[7], 3.0]], "encoder_no_repeat_ngram_size": 2,
                     "exponential_decay_length_penalty": [3, 1.2], "renormalize_logits": True})
    (folder / "generation_config.json").write_text(json.dumps(settings))
    out = tmp_path / "exported"
    run = run_cli("export", str(folder), "--format", "hf", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    written = GenerationConfig.from_pretrained(out)
    assert written.repetition_penalty == 1.8 and written.renormalize_logits
    assert list(written.exponential_decay_length_penalty) == [3, 1.2]
    reference, _, _ = opened(out)
    minitx_model = checkpoints.load(str(folder)).model
    src, mask = sources("marian", seed=5)
    assert generate(reference, src, mask) == generated(minitx_model, src)


FINE_TUNED = [SEPARATE_MARIAN,  # tier 1: the reported refusal; NLLB's export is tier 1 below too
              *(pytest.param(f, marks=pytest.mark.slow) for f in ("nllb", "mbart50", "pegasus", "umt5"))]
TUNING_PAIRS = [("The house is small.", "Das Haus ist klein."), ("Anna has 3 apples.", "Anna hat 3 Äpfel."),
                ("Hello, world!", "Hallo, Welt!"),
                ("On Friday, Zoë drives to Köln.", "Am Freitag fährt Zoë nach Köln.")]


@pytest.mark.parametrize("family", FINE_TUNED)
def test_a_file_fine_tuned_from_each_family_exports_a_folder_transformers_loads_and_generates_from(
        family, tmp_path):
    """`train --init` two steps, then `export --format hf`: no missing or unexpected keys, the
    fine-tuned weights (not the base's), generate() gives minitx's greedy ids, and AutoTokenizer
    reads the written tokeniser as the base's."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = save_model(tmp_path / family, family)
    pairs = write_pairs(tmp_path / "pairs.tsv", TUNING_PAIRS)
    tuned = tmp_path / "tuned.safetensors"
    run = run_cli("train", "--init", str(folder), "--data", str(pairs), "--steps", "2", "--batch-size", "4",
                  "--lr", "0.01", "--out", str(tuned), "--threads", "1", "--quiet")
    assert run.exit_code == 0, run.stderr
    out = tmp_path / "exported"
    run = run_cli("export", str(tuned), "--format", "hf", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    reference, info, tokenizer = opened(out)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    minitx_model = checkpoints.load(str(tuned)).model
    base, written = load_file(str(folder / "model.safetensors")), load_file(str(out / "model.safetensors"))
    moved = [n for n in set(base) & set(written) if not torch.equal(base[n], written[n])]
    assert moved, "the exported weights are the base's, not the fine-tune's"
    src, mask = sources(family, seed=5)
    assert generate(reference, src, mask) == generated(minitx_model, src)
    _, _, original = opened(folder)
    for text in TEXTS:
        assert tokenizer(text, text_target=text) == original(text, text_target=text)


def test_a_multilingual_models_language_pair_is_the_exported_tokenisers(tmp_path):
    """An NLLB model set to translate French to German writes src_lang and tgt_lang: the exported
    tokeniser reads sources and targets as NllbTokenizer(src_lang=fra_Latn, tgt_lang=deu_Latn)
    does, and generate() forces the German code first, as minitx's greedy decoding does."""
    from transformers import AutoTokenizer

    from minitx.core.data.languages import with_languages

    folder = save_model(tmp_path / "nllb", "nllb")
    ckpt = checkpoints.load(str(folder))
    ckpt.task, ckpt.model.generation = with_languages(ckpt.task, ckpt.model.generation, "fra_Latn",
                                                      "deu_Latn")
    hf_export.export_folder(ckpt.model, ckpt.task, tmp_path / "out")
    reference, _, tokenizer = opened(tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        original = AutoTokenizer.from_pretrained(folder, src_lang="fra_Latn", tgt_lang="deu_Latn")
    for text in TEXTS:
        assert tokenizer(text, text_target=text) == original(text, text_target=text)
    src, mask = sources("nllb", seed=5)
    theirs = generate(reference, src, mask)
    assert theirs == generated(ckpt.model, src)
    assert {row[0] for row in theirs} == {original.convert_tokens_to_ids("deu_Latn")}


def test_an_m2m100_model_with_an_output_bias_is_refused_as_its_family_has_none(tmp_path):
    """M2M100/NLLB have no final_logits_bias: a model whose output bias is not zero cannot be
    written as one without changing what it computes; one line, nothing written."""
    folder = save_model(tmp_path / "nllb", "nllb")
    ckpt = checkpoints.load(str(folder))
    with torch.no_grad():
        ckpt.model.output.bias[5] = 0.25
    with pytest.raises(hf_export.ExportError, match="M2M100 has no output bias"):
        hf_export.export_folder(ckpt.model, ckpt.task, tmp_path / "out")
    assert not (tmp_path / "out").exists()
