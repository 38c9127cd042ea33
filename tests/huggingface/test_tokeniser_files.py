"""A Hugging Face tokeniser's files: read from a folder as transformers 5 reads them whatever the
folder's own settings, stored in a minitx checkpoint and read back identical, and every bad
folder or file refused in one line naming the file (and its line, key or piece)."""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tokenizers import Tokenizer

from minitx.core.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from minitx.core.config import ModelConfig
from minitx.core.data.imported_task import ImportedTask
from minitx.core.data.origin import Origin
from minitx.core.importing.errors import ImportFileError
from minitx.core.importing.hf_tokenisers import read_tokenisers
from minitx.core.model.transformer import Seq2Seq
from tests.huggingface.conftest import model_config, reference_tokeniser
from tests.huggingface.test_tokenisers import SENTENCES
from tests.huggingface.tiny_tokenisers import save_tokeniser


def _copy(tiny, tmp_path):
    folder = tmp_path / tiny.family
    shutil.copytree(tiny.path, folder)
    return folder


def _edit_json(path, change):
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")


# -- read as transformers 5 reads it ----------------------------------------------------------


def test_t5_is_cut_by_transformers_own_pipeline_whatever_its_tokenizer_json_says(tiny_folders, tmp_path):
    """transformers 5's T5Tokenizer keeps only tokenizer.json's vocabulary (and a Precompiled
    normaliser): a file written with an older pipeline is still cut the way transformers cuts it."""
    folder = _copy(tiny_folders["t5"], tmp_path)
    _edit_json(folder / "tokenizer.json", lambda d: d.update(
        normalizer={"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}))
    reference = reference_tokeniser(folder)
    source, _ = read_tokenisers(folder, tiny_folders["t5"].config)
    as_written = Tokenizer.from_file(str(folder / "tokenizer.json"))
    differs = 0
    for text in SENTENCES:
        assert source.encode_text(text) == reference(text)["input_ids"], text
        differs += as_written.encode(text).ids != reference(text)["input_ids"]
    assert differs  # the file's own pipeline would have cut some sentence differently


@pytest.mark.parametrize("family", ["marian", "t5", "bart"])
def test_decoding_cleans_up_spaces_where_the_folder_says_and_the_model_is_not_bpe(family, tiny_folders,
                                                                                  tmp_path):
    folder = _copy(tiny_folders[family], tmp_path)
    _edit_json(folder / "tokenizer_config.json", lambda d: d.update(clean_up_tokenization_spaces=True))
    reference = reference_tokeniser(folder)
    _, target = read_tokenisers(folder, tiny_folders[family].config)
    text = "Wait , what ? Yes ! He 's here , is n't he ?"
    ids = reference(text_target=text)["input_ids"]
    assert target.text(ids) == reference.decode(ids, skip_special_tokens=True)
    assert ("?" in target.text(ids) and " ?" not in target.text(ids)) == (family != "bart")


def test_marian_with_a_vocabulary_per_side_reads_and_decodes_each_with_its_own(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = save_tokeniser(tmp_path, "marian", 200, separate_vocabs=True)
    reference = reference_tokeniser(tmp_path)
    source, target = read_tokenisers(tmp_path, {**model_config(info), "decoder_vocab_size": 200})
    assert source.files().keys() == {"source.spm", "vocab.json"}
    assert target.files().keys() == {"target.spm", "target_vocab.json"}
    for text in SENTENCES:
        assert source.encode_text(text) == reference(text)["input_ids"]
        labels = reference(text_target=text)["input_ids"]
        assert target.encode_text(text) == labels
        assert target.text(labels) == reference.decode(labels, skip_special_tokens=True)
    assert source.tokens != target.tokens


# -- a checkpoint keeps the tokeniser ---------------------------------------------------------


def _checkpoint(tiny, path):
    """A tiny random model of the folder's tokeniser (its start token PAD or EOS), saved."""
    source, target = read_tokenisers(tiny.path, tiny.config)
    task = ImportedTask(target, source, False, Origin({"layout": "huggingface"}), max_len=30)
    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_len=32,
                      **task.model_fields())
    save_checkpoint(path, Seq2Seq(cfg), task)
    return source, target


def test_a_checkpoint_keeps_the_tokeniser_and_reads_back_the_same_ids_and_text(tiny, tmp_path):
    path = tmp_path / "model.safetensors"
    source, target = _checkpoint(tiny, path)
    with safe_open(str(path), framework="pt") as f:
        stored = {k: f.get_tensor(k) for k in f.keys() if k.startswith("tokenizer.")}
        header = json.dumps(f.metadata())
    names = {name for v in (source, target) for name in v.files()}
    assert set(stored) == {f"tokenizer.{name}" for name in names}  # a file both sides read, once
    for name in names:
        assert stored[f"tokenizer.{name}"].dtype == torch.uint8
        assert stored[f"tokenizer.{name}"].numpy().tobytes() == (tiny.path / name).read_bytes()
    assert len(header) < 20_000 and "Äpfel" not in header  # the pieces are in the bytes, not the header
    loaded = load_checkpoint(path)
    assert loaded.model_config.sos_id == tiny.info.decoder_start
    for mine, back in ((source, loaded.task.src_vocab), (target, loaded.task.vocab)):
        assert back == mine and back.side == mine.side
        for text in SENTENCES:
            ids = back.encode_text(text)
            assert ids == mine.encode_text(text)
            assert back.text(ids) == mine.text(ids) and back.labels(ids) == mine.labels(ids)


def _rewrite(path, change_tensors=None, change_vocab=None):
    with safe_open(str(path), framework="pt") as f:
        metadata, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    if change_tensors:
        change_tensors(tensors)
    if change_vocab:
        vocab = json.loads(metadata["vocab"])
        change_vocab(vocab)
        metadata["vocab"] = json.dumps(vocab)
    save_file(tensors, str(path), metadata=metadata)


GARBAGE = b"not a tokeniser \x00\x01"


def _garbage(name):
    """Bytes no library reads, and the vocabulary's size and sha256 made to match them."""
    def change(tensors):
        tensors[f"tokenizer.{name}"] = torch.frombuffer(bytearray(GARBAGE), dtype=torch.uint8)

    def facts(vocab):
        vocab["files"][name] = {"size": len(GARBAGE), "sha256": hashlib.sha256(GARBAGE).hexdigest()}
    return change, facts


def _flip(name):
    def change(tensors):
        t = tensors[f"tokenizer.{name}"].clone()
        t[len(t) // 2] ^= 1
        tensors[f"tokenizer.{name}"] = t
    return change


BAD_CHECKPOINTS = [
    ("t5", "tokenizer.json", lambda n: ({"change_tensors": lambda t: t.pop(f"tokenizer.{n}")}),
     "is missing: the vocabulary lists it"),
    ("marian", "vocab.json", lambda n: {"change_tensors": _flip(n)},
     "does not match the size and sha256 the vocabulary gives"),
    ("bart", "tokenizer.json", lambda n: dict(zip(("change_tensors", "change_vocab"), _garbage(n))),
     "line 1: not valid JSON"),
    ("marian", "target.spm", lambda n: dict(zip(("change_tensors", "change_vocab"), _garbage(n))),
     "is not a sentencepiece model"),
    ("t5", "tokenizer.json", lambda n: {"change_tensors": lambda t: t.update(
        {f"tokenizer.{n}": t[f"tokenizer.{n}"].to(torch.int32)})}, "is not a file's bytes"),
]


@pytest.mark.parametrize(("family", "name", "change", "expected"), BAD_CHECKPOINTS,
                         ids=[f"{f}-{n}-{e.split()[1]}" for f, n, _, e in BAD_CHECKPOINTS])
def test_a_checkpoint_whose_tokeniser_files_are_wrong_is_refused_naming_the_tensor(
        family, name, change, expected, tiny_folders, tmp_path):
    path = tmp_path / "model.safetensors"
    _checkpoint(tiny_folders[family], path)
    _rewrite(path, **change(name))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path)
    message = str(e.value)
    assert f"tensor 'tokenizer.{name}'" in message and expected in message and "\n" not in message


def test_a_checkpoint_with_a_tokeniser_file_no_vocabulary_reads_is_refused(tiny_folders, tmp_path):
    path = tmp_path / "model.safetensors"
    _checkpoint(tiny_folders["t5"], path)
    extra = {"tokenizer.extra.bin": torch.zeros(3, dtype=torch.uint8)}
    _rewrite(path, change_tensors=lambda t: t.update(extra))
    with pytest.raises(CheckpointError, match="holds an unexpected tensor 'tokenizer.extra.bin'"):
        load_checkpoint(path)


# -- a bad folder gets one line ---------------------------------------------------------------


def _remove(name):
    return lambda folder, config: (folder / name).unlink()


def _write(name, text):
    return lambda folder, config: (folder / name).write_text(text, encoding="utf-8")


def _vocab_of_another_model(folder, config):
    _edit_json(folder / "vocab.json", lambda d: (d.clear(), d.update(
        {"</s>": 0, "<unk>": 1, **{f"▁other{i}": i + 2 for i in range(290)}, "<pad>": 299})))


def _two_pieces_one_id(folder, config):
    _edit_json(folder / "vocab.json", lambda d: d.update({"▁twice": d["<unk>"]}))


BAD_FOLDERS = [
    ("t5", _remove("tokenizer.json"), ["has no tokeniser: looked for tokenizer.json"]),
    ("marian", _remove("target.spm"), ["has no target.spm: a Marian tokeniser is source.spm, target.spm and "
                                       "vocab.json"]),
    ("bart", _write("tokenizer_config.json", '{\n  "tokenizer_class": "RobertaTokenizer",\n  oops\n}'),
     ["tokenizer_config.json line 3: not valid JSON"]),
    ("marian", _write("vocab.json", '{"</s>": 0,\n"<unk>": 1\n"x": 2}'),
     ["vocab.json line 3: not valid JSON"]),
    ("t5", _write("tokenizer.json", '{"version": "1.0",\n "model": {"type": "Unigram"}}'),
     ["tokenizer.json is not a tokeniser the tokenizers library reads"]),
    ("marian", _write("source.spm", "no protobuf here"), ["source.spm is not a sentencepiece model"]),
    ("marian", _vocab_of_another_model,
     ["vocab.json does not match source.spm: it lacks source.spm's piece"]),
    ("marian", _two_pieces_one_id, ["vocab.json gives pieces '<unk>' and '▁twice' the same id 1"]),
    ("bart", lambda folder, config: config.update(eos_token_id=7),
     ["config.json: eos_token_id is 7, but the tokeniser's eos token '</s>' is id 2"]),
    ("t5", lambda folder, config: config.update(vocab_size=100),
     ["config.json: vocab_size is 100, but the tokeniser (tokenizer.json) has 300 ids"]),
    ("marian", lambda folder, config: config.pop("decoder_start_token_id"),
     ["config.json gives no decoder_start_token_id"]),
]


@pytest.mark.parametrize(("family", "spoil", "expected"), BAD_FOLDERS,
                         ids=[f"{f}-{n}" for n, (f, _, _) in enumerate(BAD_FOLDERS)])
def test_a_bad_folder_gets_one_line_naming_the_file_and_what_is_wrong(family, spoil, expected, tiny_folders,
                                                                     tmp_path):
    folder = _copy(tiny_folders[family], tmp_path)
    config = dict(tiny_folders[family].config)
    spoil(folder, config)
    with pytest.raises(ImportFileError) as e:
        read_tokenisers(folder, config)
    message = str(e.value)
    assert "\n" not in message and str(folder) in message, message
    for part in expected:
        assert part in message, message
