"""What a new user measures first on a Hugging Face folder fits the model and says what it was
measured on: the doctor's made-up inputs, a source that fills the model's positions (held to
transformers' generate), compare on a pairs file whose targets outrun its sources, and the
sample sizes heads and compare report (the pairs given, not the number asked for)."""

import json
from pathlib import Path

import pytest
import torch

from minitx import checkpoints
from tests.cli.conftest import assert_one_line_error, run_cli
from tests.huggingface.tiny_folders import load_reference, save_model

POSITIONS = 16
WORDS = ("the", "weather", "is", "nice", "today", "a", "b", "x", "7", "and")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """One small folder per family, of POSITIONS positions; the Marian one generates at most as
    many tokens as its positions hold, so transformers' generate runs on it."""
    root = tmp_path_factory.mktemp("hf-positions")
    made = {family: save_model(root / family, family, positions=POSITIONS)
            for family in ("marian", "t5", "bart")}
    settings = made["marian"] / "generation_config.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "max_length": POSITIONS}))
    return made


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> Path:
    """Four pairs, every target longer in pieces than the longest source."""
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    path.write_text("hi\tHallo Welt\nyes\tja ja ja\na b\tguten Morgen Welt\nhi\tja ja\n", encoding="utf-8")
    return path


def _text_of(tokenizer, length: int) -> str:
    """A text the tokeniser reads as exactly `length` ids (its </s> included)."""
    words: list[str] = []
    while len(tokenizer(" ".join(words)).input_ids) < length:
        fits = [w for w in WORDS if len(tokenizer(" ".join([*words, w])).input_ids) <= length]
        assert fits, words
        words.append(max(fits, key=lambda w: len(tokenizer(" ".join([*words, w])).input_ids)))
    return " ".join(words)


def test_doctor_without_pairs_runs_its_code_checks_on_made_up_inputs(folders):
    run = run_cli("doctor", str(folders["marian"]), "--json")
    assert run.exit_code == 0, run.stderr
    checks = {c["name"]: c["status"] for c in json.loads(run.stdout)["checks"]}
    assert checks["future-leakage-values"] == "pass" and checks["future-leakage-gradients"] == "pass"


@pytest.mark.parametrize("family", ["marian", "t5", "bart"])
def test_made_up_inputs_at_the_tasks_full_length_fit_the_model(folders, family):
    """What the doctor's future-leakage checks ask for (a source and a target of the task's
    longest length): the source within the positions, the target after its start token too."""
    ckpt = checkpoints.load(str(folders[family]))
    task = ckpt.task
    batch = task.input_batch(4, torch.Generator().manual_seed(0), length=task.max_len)
    assert batch.src.shape[1] <= POSITIONS and batch.decoder_input.shape[1] <= POSITIONS
    with torch.no_grad():
        ckpt.model(batch.src, batch.decoder_input)  # raised "exceeds the model's max_len" before


def test_a_source_filling_a_marian_models_positions_decodes_as_transformers_generates(folders, tmp_path):
    from transformers import AutoTokenizer

    folder = folders["marian"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = _text_of(tokenizer, POSITIONS)  # pieces and </s>: every position the model has
    run = run_cli("decode", str(folder), text)
    assert run.exit_code == 0, run.stderr
    ids = tokenizer(text, return_tensors="pt").input_ids
    assert ids.shape[1] == POSITIONS
    generated = load_reference(folder).generate(ids, num_beams=1, do_sample=False)
    assert run.stdout.strip() == tokenizer.decode(generated[0], skip_special_tokens=True).strip()
    longer = _text_of(tokenizer, POSITIONS + 1)
    line = assert_one_line_error(run_cli("decode", str(folder), longer))
    assert f"the source has {POSITIONS + 1} tokens; this model takes at most {POSITIONS}" in line
    pairs = tmp_path / "full.tsv"  # a pairs file holds to the same limit
    pairs.write_text(f"{text}\tja\n{longer}\tja\n", encoding="utf-8")
    measured = json.loads(run_cli("eval", str(folder), "--pairs", str(pairs), "--json").stdout)
    assert measured["n"] == 1 and measured["skipped_too_long"] == 1


@pytest.mark.parametrize("other", ["marian", "t5"])
def test_compare_on_pairs_whose_targets_outrun_the_sources_measures_every_pair(folders, pairs_file, other):
    run = run_cli("compare", str(folders["marian"]), str(folders[other]), "--pairs", str(pairs_file),
                  "--json")
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["n"] == 4 and data["examples"] == "4 pairs of pairs.tsv"
    assert (data["agreement"] == 1.0) == (other == "marian")


def test_heads_on_a_pairs_file_measures_the_pairs_given_and_says_how_many(tmp_path):
    pairs = tmp_path / "four.tsv"
    pairs.write_text("3 1 4 1\t1 4 1 3\n2 7 1 8\t8 1 7 2\n5 9 2 6\t6 2 9 5\n1 2 3 4\t4 3 2 1\n")
    run = run_cli("heads", "reverse", "--pairs", str(pairs), "--json")
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["n"] == 4
    told = run_cli("heads", "reverse", "--pairs", str(pairs), "--n", "3")
    assert "each head zero-ablated alone, 3 of the 4 pairs of four.tsv" in told.stdout.replace("\n", " ")
    assert "500" not in told.stdout
