"""A Hugging Face folder opens wherever a checkpoint does (a path, or a model id in the local
cache), `minitx import` converts it into a file that computes the same, and every folder that
cannot be used gets one line naming the file and what is wrong, exit 2, with nothing written."""

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from minitx import checkpoints
from minitx.core.interp.decode import greedy_decode
from tests.cli.conftest import assert_one_line_error, run_cli
from tests.huggingface.tiny_folders import load_reference, save_model


@pytest.fixture(scope="module")
def marian(tmp_path_factory) -> Path:
    return save_model(tmp_path_factory.mktemp("hf") / "marian", "marian")


@pytest.fixture
def broken(marian, tmp_path) -> Path:
    """A copy of the tiny Marian folder, for a test to break."""
    return Path(shutil.copytree(marian, tmp_path / "copy"))


def test_decode_of_a_folder_prints_what_transformers_generates_and_decodes(marian):
    from transformers import AutoTokenizer

    text = "Zoë eats 3 cakes in Zürich."
    run = run_cli("decode", str(marian), text)
    assert run.exit_code == 0, run.stderr
    tokenizer = AutoTokenizer.from_pretrained(marian)
    ids = tokenizer(text, return_tensors="pt").input_ids
    generated = load_reference(marian).generate(ids, num_beams=1, do_sample=False)
    assert run.stdout.strip() == tokenizer.decode(generated[0], skip_special_tokens=True).strip()


def test_attribute_labels_a_folders_columns_with_its_tokenisers_pieces(marian):
    """Source attribution on a folder whose source and target tables are one tied table: a column
    per piece the tokeniser gives (its end token included), and ig's rows add up to their change."""
    from transformers import AutoTokenizer

    text = "Zoë eats 3 cakes."
    run = run_cli("attribute", str(marian), text, "--json", "--ig-steps", "256")
    assert run.exit_code == 0, run.stderr
    result = json.loads(run.stdout)["results"][0]
    pieces = AutoTokenizer.from_pretrained(marian).convert_ids_to_tokens(
        AutoTokenizer.from_pretrained(marian)(text).input_ids)
    def bare(piece: str) -> str:  # the word-start mark, as sentencepiece writes it and as minitx shows it
        return piece.replace("▁", "").replace("·", "")

    assert [bare(p) for p in result["source_tokens"]] == [bare(p) for p in pieces]
    for step in result["steps"]:
        assert len(step["attribution"]) == len(pieces)
        assert abs(step["delta"]) <= 0.01 * max(1.0, abs(step["change"]))


def test_patching_typed_text_answers_with_what_transformers_generates_and_its_logit_difference(marian):
    """A translation model's task cannot tell a typed source's answer: the model's own outputs are
    the answers, so both they and the logit difference between them are transformers' own."""
    from transformers import AutoTokenizer

    clean, corrupt = "The house is small.", "The house is large."
    run = run_cli("patch", str(marian), "--clean", clean, "--corrupt", corrupt, "--json", "--method", "exact")
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    tokenizer, reference = AutoTokenizer.from_pretrained(marian), load_reference(marian)
    sources = [tokenizer(text, return_tensors="pt").input_ids for text in (clean, corrupt)]
    said = [reference.generate(ids, num_beams=1, do_sample=False)[0, 1:].tolist() for ids in sources]
    assert data["by_model"] and [data["clean_answer"], data["corrupted_answer"]] == said  # EOS ends each
    start = reference.config.decoder_start_token_id
    fed = torch.tensor([[start, *said[0][:-1]]])  # both runs teacher-forced on the clean answer
    steps = [t for t, (a, b) in enumerate(zip(*said)) if a != b]
    assert data["steps"] == steps
    for ids, key in zip(sources, ("clean_difference", "corrupted_difference")):
        with torch.no_grad():
            logits = reference(input_ids=ids, decoder_input_ids=fed).logits[0]  # (T, V)
        gap = torch.stack([logits[t, said[0][t]] - logits[t, said[1][t]] for t in steps]).mean()
        assert abs(data[key] - float(gap)) < 1e-4


def test_inspect_of_a_folder_without_pairs_scores_each_head_on_its_example_source(marian):
    """A folder keeps no example pairs: inspect still shows every head (sharpness on the example
    source, said so), rather than stopping at the pairs it lacks."""
    run = run_cli("inspect", str(marian), "--json")
    assert run.exit_code == 0, run.stderr
    alignment = json.loads(run.stdout)["alignment"]
    assert alignment["measure"] == "sharpness"
    assert alignment["measured_on"].startswith("the example source alone")
    assert len(alignment["scores"]) == 2 and all(len(row) == 4 for row in alignment["scores"])
    assert all(0.0 < s <= 1.0 for row in alignment["scores"] for s in row)
    text = run_cli("inspect", str(marian))
    assert text.exit_code == 0 and "keeps no" in " ".join(text.stdout.split())


def test_a_model_id_opens_from_the_cache_its_environment_names(marian, tmp_path):
    repo = tmp_path / "hub" / "models--Helsinki-NLP--opus-mt-tiny"
    shutil.copytree(marian, repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    by_id = run_cli("decode", "Helsinki-NLP/opus-mt-tiny", "Hello world", env=env)
    by_path = run_cli("decode", str(marian), "Hello world")
    assert by_id.exit_code == 0, by_id.stderr
    assert by_id.stdout == by_path.stdout
    missing = run_cli("decode", "Helsinki-NLP/opus-mt-en-xx", "Hello", env=env)
    line = assert_one_line_error(missing)
    assert missing.exit_code == 2 and str(tmp_path / "hub") in line and "hf download" in line


def test_import_writes_a_file_that_decodes_exactly_as_the_folder_and_keeps_its_settings(marian, tmp_path):
    out = tmp_path / "en-de.safetensors"
    run = run_cli("import", str(marian), "--out", str(out))
    assert run.exit_code == 0, run.stderr
    folder, converted = checkpoints.load(marian), checkpoints.load(out)
    assert converted.model.generation == folder.model.generation
    text = "Grüße aus Köln"
    assert converted.task.src_vocab.encode_text(text) == folder.task.src_vocab.encode_text(text)
    src = torch.tensor([folder.task.parse("We eat cake in Malmö.")])
    assert torch.equal(greedy_decode(converted.model, src), greedy_decode(folder.model, src))
    with torch.no_grad():
        tgt = torch.tensor([[folder.model.generation.start, 5, 6, 7]])
        assert torch.equal(converted.model(src, tgt), folder.model(src, tgt))
    # the tied table is stored once, not three times
    assert out.stat().st_size < 1.5 * (marian / "model.safetensors").stat().st_size + 3e6


@pytest.mark.parametrize("family", ["marian", "bart"])  # </s> after the source; <s> on both sides
def test_a_folder_imported_with_pairs_opens_and_measures_on_them_as_the_folder_given_them_does(
        family, marian, tmp_path):
    """The pairs an import keeps were read by the model's tokeniser, its special tokens included:
    the file must open again (it did not: its kept pairs held </s> or <s>, and were read at the
    tokeniser's level, which a data file's checks refused) and measure what the folder given the
    pairs measures."""
    folder = marian if family == "marian" else save_model(tmp_path / family, family)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("I have 4 cats.\tIch habe 4 Katzen.\nWe eat cake.\tWir essen Kuchen.\n",
                     encoding="utf-8")
    out = tmp_path / "kept.safetensors"
    assert run_cli("import", str(folder), "--pairs", str(pairs), "--out", str(out)).exit_code == 0
    kept = checkpoints.load(out)
    assert kept.task.heldout is not None and len(kept.task.heldout) == 2
    from_file = run_cli("eval", str(out), "--json")
    from_folder = run_cli("eval", str(folder), "--pairs", str(pairs), "--json")
    assert from_file.exit_code == 0 and from_folder.exit_code == 0, from_file.stderr + from_folder.stderr
    measured = [{k: json.loads(run.stdout)[k] for k in ("n", "accuracy", "count_by_length")}
                for run in (from_file, from_folder)]
    assert measured[0] == measured[1] and measured[0]["n"] == 2
    text = "We eat cake."
    assert run_cli("decode", str(out), text).stdout == run_cli("decode", str(folder), text).stdout


def _break(case: str, folder: Path) -> str:
    """Break the folder as `case` says; returns what its one-line error must name."""
    config = json.loads((folder / "config.json").read_text())
    if case == "an encoder-only model":
        config["model_type"] = "bert"
        (folder / "config.json").write_text(json.dumps(config))
        return "bert"
    if case == "an unknown activation":
        config["activation_function"] = "sigmoid-ish"
        (folder / "config.json").write_text(json.dumps(config))
        return "activation_function"
    if case == "no tokeniser":
        for name in ("source.spm", "target.spm", "vocab.json"):
            (folder / name).unlink()
        return "source.spm"
    if case == "a pickled object in the weights":
        (folder / "model.safetensors").unlink()
        (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Path("x"), protocol=2))
        return "pytorch_model.bin"
    if case == "a shard that is missing":
        from safetensors.torch import load_file, save_file

        weights = load_file(str(folder / "model.safetensors"))
        (folder / "model.safetensors").unlink()
        moved = "model.encoder.layers.0.fc1.weight"  # into the second shard, which is missing
        first = {k: t for k, t in weights.items() if k != moved}
        save_file(first, str(folder / "model-00001-of-00002.safetensors"))
        index = {"weight_map": {k: f"model-0000{1 + (k == moved)}-of-00002.safetensors" for k in weights}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
        return "model-00002-of-00002.safetensors"
    if case == "a cache's weights link to a blob never downloaded":
        (folder / "model.safetensors").unlink()
        (folder / "model.safetensors").symlink_to("../../blobs/5d1e")  # as a snapshot links its files
        return "model.safetensors links to ../../blobs/5d1e, which is missing: the download is incomplete"
    if case == "a config with fewer layers than the weights":
        config["encoder_layers"] = 1
        (folder / "config.json").write_text(json.dumps(config))
        return "encoder.layers.1"
    if case == "a config of another width":
        config["d_model"] = 64
        (folder / "config.json").write_text(json.dumps(config))
        return "shape"
    if case == "one value that is not a number":
        from safetensors.torch import load_file, save_file

        weights = load_file(str(folder / "model.safetensors"))
        weights["model.decoder.layers.1.fc2.weight"][5, 17] = float("nan")
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return "'model.decoder.layers.1.fc2.weight' holds NaN"
    assert case == "config.json that is not JSON"
    (folder / "config.json").write_text('{"model_type": "marian",\n  "d_model": 32,,\n}')
    return "config.json line 2"


CASES = ["an encoder-only model", "an unknown activation", "no tokeniser", "a pickled object in the weights",
         "a shard that is missing", "a config with fewer layers than the weights",
         "a config of another width", "one value that is not a number", "config.json that is not JSON",
         "a cache's weights link to a blob never downloaded"]


@pytest.mark.parametrize("case", CASES)
def test_a_folder_that_cannot_be_used_is_one_line_naming_the_file_exit_2_and_nothing_written(
        case, broken, tmp_path):
    named = _break(case, broken)
    out = tmp_path / "out.safetensors"
    run = run_cli("import", str(broken), "--out", str(out))
    line = assert_one_line_error(run)
    assert run.exit_code == 2
    assert named in line, line
    assert not out.exists()
    decode = run_cli("decode", str(broken), "Hello")  # every command that opens it says the same
    assert decode.exit_code == 2 and assert_one_line_error(decode) == line


def test_a_beam_header_shows_unknown_pieces_as_transformers_decode_keeps_them(marian):
    from transformers import AutoTokenizer

    text = "Ünïcødé 😀 test"  # the tiny Marian tokeniser knows neither Ü, ï nor the emoji
    tokenizer = AutoTokenizer.from_pretrained(marian)
    ids = tokenizer(text).input_ids
    assert tokenizer.unk_token_id in ids
    run = run_cli("decode", str(marian), text, "--beams", "2")
    assert run.exit_code == 0, run.stderr
    header = run.stdout.splitlines()[0].split(" · beam 2")[0]
    assert header == tokenizer.decode(ids, skip_special_tokens=False).removesuffix("</s>").strip()
    assert header.count("<unk>") == ids.count(tokenizer.unk_token_id)
