"""`minitx import` on the command line: the reference models' files become checkpoints; any other
layout goes through an edited mapping; and every kind of bad input is one line naming the key,
file or line, with exit code 2 and nothing written."""

from __future__ import annotations

import json

import pytest
import torch

from minitx.core.checkpoint import load_checkpoint
from minitx.core.importing.mapping import builtin_mapping, parse_mapping
from tests.importing.conftest import import_args, run_import
from tests.reference_models import toy


def one_line_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("kind", ["pt", "safetensors"])
def test_importing_a_reference_model_writes_a_checkpoint_of_its_config_and_vocabularies(
        tutorial_files, tmp_path, kind):
    out = tmp_path / "tut.safetensors"
    weights = tutorial_files.pt if kind == "pt" else tutorial_files.safetensors
    result = run_import(*import_args(tutorial_files, toy.TUTORIAL, out, weights), "--json")
    assert result.exit_code == 0, result.output
    facts = json.loads(result.stdout)
    assert facts["source_wrapping"] == "<bos> … <eos>" and facts["pairs_kept"] == 200
    ckpt = load_checkpoint(out)
    assert ckpt.task.vocab.tokens == toy.vocabulary(toy.TUTORIAL, "reverse", "tgt")
    assert ckpt.model_config.final_norms and ckpt.summary["imported"]["file"] == weights.name


def test_print_mapping_writes_the_built_in_mapping_and_an_edited_copy_imports_the_same_model(
        tutorial_files, tmp_path):
    printed = run_import("import", "--print-mapping", "--layout", "nn-transformer")
    assert printed.exit_code == 0
    assert parse_mapping(json.loads(printed.stdout)) == builtin_mapping("nn-transformer")
    mapping = tmp_path / "map.json"
    mapping.write_text(printed.stdout, encoding="utf-8")
    by_layout, by_mapping = tmp_path / "layout.safetensors", tmp_path / "mapping.safetensors"
    assert run_import(*import_args(tutorial_files, toy.TUTORIAL, by_layout)).exit_code == 0
    args = import_args(tutorial_files, toy.TUTORIAL, by_mapping)
    args[args.index("--layout"): args.index("--layout") + 2] = ["--mapping", str(mapping)]
    assert "--norm" in one_line_error(run_import(*args))  # a mapping does not say how it normalises
    assert run_import(*args, "--norm", "post").exit_code == 0
    a, b = load_checkpoint(by_layout), load_checkpoint(by_mapping)
    assert a.model_config == b.model_config
    pairs = zip(a.model.state_dict().values(), b.model.state_dict().values())
    assert all(torch.equal(x, y) for x, y in pairs)


def test_the_settings_can_come_from_a_json_config(annotated_files, tmp_path):
    config = tmp_path / "import.json"
    config.write_text(json.dumps({"heads": 2, "tokens": "word"}), encoding="utf-8")
    out = tmp_path / "ann.safetensors"
    args = [a for a in import_args(annotated_files, toy.ANNOTATED, out) if a not in ("--heads", "2")]
    args = [a for a in args if a not in ("--tokens", "word")]
    assert run_import(*args, "--config", str(config)).exit_code == 0
    assert load_checkpoint(out).model_config.n_heads == 2
    config.write_text(json.dumps({"heads": "two"}), encoding="utf-8")
    assert "'heads' must be a int" in one_line_error(run_import(*args, "--config", str(config)))


def _saved(state: dict, path) -> str:
    torch.save(state, path)
    return str(path)


def _state(files) -> dict:
    return torch.load(files.pt, weights_only=True)


def _broken_cases(files, tmp_path) -> dict:
    """name -> (changed arguments, what the one line must say)."""
    state = _state(files)
    missing = {k: v for k, v in state.items() if k != "generator.bias"}
    extra = {**state, "extra_head.weight": torch.zeros(3, 3)}
    misshapen = {**state, "transformer.decoder.layers.0.linear1.weight": torch.zeros(64, 31)}
    nan = {**state, "generator.weight": state["generator.weight"].clone().fill_(float("nan"))}
    short_vocab = tmp_path / "short.vocab"
    short_vocab.write_text("".join(f"{t}\n" for t in files.src_vocab.read_text().split("\n")[:-2]))
    no_end = tmp_path / "no-end.vocab"
    no_end.write_text(files.tgt_vocab.read_text().replace("<eos>\n", "<end>\n"))
    spaced = tmp_path / "spaced.vocab"
    spaced.write_text(files.tgt_vocab.read_text().replace("\n7\n", "\n7 7\n"))
    return {
        "missing key": ({"weights": _saved(missing, tmp_path / "missing.pt")}, "'generator.bias'"),
        "unexpected key": ({"weights": _saved(extra, tmp_path / "extra.pt")}, "'extra_head.weight'"),
        "shape": ({"weights": _saved(misshapen, tmp_path / "shape.pt")},
                  "'transformer.decoder.layers.0.linear1.weight' has shape (64, 31)"),
        "not finite": ({"weights": _saved(nan, tmp_path / "nan.pt")}, "'generator.weight' holds NaN"),
        "vocabulary length": ({"--src-vocab": str(short_vocab)}, "short.vocab has 13 tokens"),
        "no end token": ({"--tgt-vocab": str(no_end)}, "no end token among the specials"),
        "spaces in a word": ({"--tgt-vocab": str(spaced)}, "spaced.vocab line"),
        "pickled model": ({"weights": str(files.pickled)}, "pickled Python object"),
        "not a weights file": ({"weights": str(files.src_vocab)}, "neither a safetensors file"),
        "heads do not divide": ({"--heads": "3"}, "--heads 3: d_model 32"),
        "missing vocabulary file": ({"--src-vocab": str(tmp_path / "nope.vocab")}, "no such file"),
    }


def test_every_kind_of_bad_input_is_one_line_naming_it_exit_2_and_nothing_written(tutorial_files, tmp_path):
    for name, (changes, fragment) in _broken_cases(tutorial_files, tmp_path).items():
        out = tmp_path / f"{name.replace(' ', '-')}.safetensors"
        args = import_args(tutorial_files, toy.TUTORIAL, out, pairs=False)
        for key, value in changes.items():
            if key == "weights":
                args[1] = value
            else:
                args[args.index(key) + 1] = value
        message = one_line_error(run_import(*args))
        assert fragment in message, (name, message)
        assert not out.exists(), name


def test_what_the_tensors_cannot_tell_is_asked_for_by_name(tutorial_files, tmp_path):
    out = tmp_path / "x.safetensors"
    args = import_args(tutorial_files, toy.TUTORIAL, out, pairs=False)
    no_heads = [a for i, a in enumerate(args) if a != "--heads" and args[i - 1] != "--heads"]
    assert "give --heads N" in one_line_error(run_import(*no_heads))
    no_tokens = [a for i, a in enumerate(args) if a != "--tokens" and args[i - 1] != "--tokens"]
    assert "give --tokens word|char" in one_line_error(run_import(*no_tokens))
    reading_itself = [*args[:-1], str(tutorial_files.pt)]
    assert "one of the files being read" in one_line_error(run_import(*reading_itself))
    assert not out.exists()


def test_a_special_token_of_another_spelling_is_named_with_specials(tutorial_files, tmp_path):
    renamed = tmp_path / "renamed.vocab"
    renamed.write_text(tutorial_files.tgt_vocab.read_text().replace("<eos>\n", "[END]\n"))
    out = tmp_path / "renamed.safetensors"
    args = import_args(tutorial_files, toy.TUTORIAL, out, pairs=False)
    args[args.index("--tgt-vocab") + 1] = str(renamed)
    assert run_import(*args, "--specials", "eos=[END]", "--src-specials", "eos=<eos>").exit_code == 0
    task = load_checkpoint(out).task
    assert task.vocab.tokens[task.vocab.eos] == "[END]"
    assert task.src_vocab.tokens[task.src_vocab.eos] == "<eos>"
