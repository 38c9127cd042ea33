"""M2M100's own tokeniser files (sentencepiece.bpe.model and vocab.json, `__xx__` language codes,
core/data/m2m100_tokeniser.py) against transformers' M2M100Tokenizer of the same tiny folder
(tests/huggingface/tiny_tokenisers.py): the ids of sources and of text_target in several
language pairs, decoding back to text, the codes as tokens at the ids transformers gives them;
and a tiny M2M100 folder with them opens, decodes as generate() does, scores its pairs with
transformers' labels loss, fine-tunes and exports a tokeniser AutoTokenizer reads the same (the
folder tests are tier 2)."""

from __future__ import annotations

import json
import random
import shutil
import warnings

import pytest

from minitx.core.importing.hf_tokenisers import read_tokenisers
from tests.cli.conftest import run_cli
from tests.huggingface.conftest import model_config
from tests.huggingface.test_tokenisers import SENTENCES
from tests.huggingface.tiny_tokenisers import save_tokeniser

TYPED = [*SENTENCES, "__fr__ typed as text", "Bonjour __de__ </s> là"]
PAIRS = [("en", "en"), ("de", "fr"), ("zh", "ast")]


def transformers_tokeniser(folder, **languages):
    from transformers import AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoTokenizer.from_pretrained(str(folder), **languages)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("m2m100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = save_tokeniser(path, "m2m100")
    (path / "config.json").write_text(json.dumps({**model_config(info), "model_type": "m2m_100"}))
    return path


def vocabs(folder, src_lang: str, tgt_lang: str):
    config = json.loads((folder / "config.json").read_text())
    source, target = read_tokenisers(folder, config)
    return source.with_language(src_lang), target.with_language(tgt_lang)


@pytest.mark.parametrize(("src_lang", "tgt_lang"), PAIRS)
def test_source_and_target_ids_are_m2m100_tokenizers(folder, src_lang, tgt_lang):
    reference = transformers_tokeniser(folder, src_lang=src_lang, tgt_lang=tgt_lang)
    assert type(reference).__name__ == "M2M100Tokenizer"
    source, target = vocabs(folder, src_lang, tgt_lang)
    for text in TYPED:
        expected = reference(text, text_target=text)
        assert source.encode_text(text) == expected["input_ids"], text
        assert target.encode_text(text) == expected["labels"], text
        assert target.row_ids([text])[0] + [target.eos] == expected["labels"]  # a pair file's target row
        assert expected["input_ids"][0] == reference.convert_tokens_to_ids(f"__{src_lang}__")


def test_decoded_text_is_m2m100_tokenizers_decode_skipping_special_tokens(folder):
    reference = transformers_tokeniser(folder, src_lang="de", tgt_lang="fr")
    source, target = vocabs(folder, "de", "fr")
    rng = random.Random(0)
    sequences = [source.encode_text(t) for t in TYPED] + [target.encode_text(t) for t in TYPED]
    sequences += [[rng.randrange(len(reference)) for _ in range(rng.randint(1, 30))] for _ in range(40)]
    for ids in sequences:
        assert target.text(ids) == reference.decode(ids, skip_special_tokens=True), ids


def test_the_language_codes_are_tokens_at_the_ids_m2m100_tokenizer_gives_them(folder):
    reference = transformers_tokeniser(folder)
    source, target = vocabs(folder, "en", "en")
    assert len(source.tokeniser.languages) == 100 and source.tokeniser.settings["language"] == "en"
    for i in range(len(reference)):
        assert target.tokens[i] == reference.convert_ids_to_tokens(i), i
    codes = {t: i for i, t in enumerate(target.tokens) if t.startswith("__") and t.endswith("__")}
    assert len(codes) == 100 and min(codes.values()) == len(json.loads((folder / "vocab.json").read_text()))
    assert codes == {t: reference.convert_tokens_to_ids(t) for t in codes}


@pytest.mark.slow
def test_an_m2m100_folder_with_its_own_tokeniser_decodes_fine_tunes_and_exports(tmp_path):
    """French to German: minitx's greedy output of a typed source is generate()'s with the
    tokeniser's ids and the German code forced first; `train --init` fine-tunes on pairs read by
    the tokeniser, whose file reopens with it, and the export's AutoTokenizer reads sources and
    targets as the base's, with the base folder there and without it."""
    import torch

    from minitx import checkpoints
    from minitx.core.data.languages import with_languages
    from minitx.core.interp.decode import greedy_decode
    from tests.huggingface.changed_folders import write_pairs
    from tests.huggingface.test_export_folder import TUNING_PAIRS, opened
    from tests.huggingface.tiny_folders import load_reference, save_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = save_model(tmp_path / "m2m100", "m2m100")
    reference = transformers_tokeniser(folder, src_lang="fr", tgt_lang="de")
    ckpt = checkpoints.load(str(folder))
    task, ckpt.model.generation = with_languages(ckpt.task, ckpt.model.generation, "fr", "de")
    model = load_reference(folder)
    for text in ("Bonjour, Zoë!", "Le train part à 7:45."):
        src = reference(text, return_tensors="pt").input_ids
        assert task.parse(text) == src[0].tolist()
        theirs = model.generate(src, num_beams=1, do_sample=False,
                                forced_bos_token_id=reference.convert_tokens_to_ids("__de__"))[0, 1:].tolist()
        ours = greedy_decode(ckpt.model, src)[0].tolist()
        assert ours[: len(theirs)] == theirs and theirs[0] == reference.convert_tokens_to_ids("__de__")
    pairs = write_pairs(tmp_path / "pairs.tsv", TUNING_PAIRS)
    tuned = tmp_path / "tuned.safetensors"
    run = run_cli("train", "--init", str(folder), "--data", str(pairs), "--valid", str(pairs), "--steps", "2",
                  "--batch-size", "4", "--out", str(tuned), "--threads", "1", "--quiet")
    assert run.exit_code == 0, run.stderr
    reopened = checkpoints.load(str(tuned))
    assert reopened.task.vocab.tokeniser.kind == "m2m100"
    assert not torch.equal(reopened.model.src_embed.weight, ckpt.model.src_embed.weight)
    out = tmp_path / "exported"
    run = run_cli("export", str(tuned), "--format", "hf", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    _, info, exported = opened(out)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    base = transformers_tokeniser(folder, tgt_lang="en")  # the export names the model's pair: en, en
    for text in TYPED[:6]:
        assert exported(text, text_target=text) == base(text, text_target=text)
    shutil.rmtree(folder)  # tokenizer_config.json written from what the file keeps
    run = run_cli("export", str(tuned), "--format", "hf", "--out", str(tmp_path / "again"))
    assert run.exit_code == 0, run.stderr
    _, _, written = opened(tmp_path / "again")
    assert type(written).__name__ == "M2M100Tokenizer"
    for text in TYPED[:6]:
        assert written(text, text_target=text) == base(text, text_target=text)
        ids = base(text).input_ids
        assert written.decode(ids, skip_special_tokens=True) == base.decode(ids, skip_special_tokens=True)


@pytest.mark.slow
def test_eval_of_an_m2m100_folder_gives_transformers_labels_loss_of_its_pairs(tmp_path):
    """The pairs a fine-tune learns from are read as M2M100Tokenizer(text, text_target=...) reads
    them: `eval --pairs`'s loss is transformers' `labels` loss over the file's target tokens."""
    import torch

    from tests.huggingface.changed_folders import write_pairs
    from tests.huggingface.test_export_folder import TUNING_PAIRS
    from tests.huggingface.tiny_folders import load_reference, save_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = save_model(tmp_path / "m2m100", "m2m100")
    pairs = write_pairs(tmp_path / "pairs.tsv", TUNING_PAIRS)
    got = json.loads(run_cli("eval", str(folder), "--pairs", str(pairs), "--json").stdout)
    tokenizer, model = transformers_tokeniser(folder, tgt_lang="en"), load_reference(folder)
    total, tokens = 0.0, 0
    for source, target in TUNING_PAIRS:
        enc = tokenizer(source, text_target=target, return_tensors="pt")
        with torch.no_grad():
            total += float(model(input_ids=enc.input_ids, labels=enc.labels).loss) * enc.labels.shape[1]
        tokens += enc.labels.shape[1]
    assert got["target_tokens"] == tokens
    assert got["loss"] == pytest.approx(total / tokens, rel=1e-5)
