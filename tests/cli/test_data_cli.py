"""Your own pairs through every command: train, eval, decode, inspect, export, compare, doctor."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest

from tests.cli.conftest import assert_one_line_error, run_cli

SMALL = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--batch-size", "32",
         "--lr", "5e-3", "--warmup", "20", "--device", "cpu", "--seed", "0"]


def letters_file(path, n=800, seed=1, extra=()):
    """Lower-case letters -> the same in upper case: a copy task across two alphabets."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        word = "".join(rng.choice("abcdef") for _ in range(rng.randint(2, 5)))
        lines.append(f"{word}\t{word.upper()}")
    path.write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    data = letters_file(folder / "letters.tsv")
    out = folder / "letters.safetensors"
    run = run_cli("train", "--data", str(data), "--expect", "diagonal", *SMALL, "--steps", "300",
                  "--eval-every", "0", "--json", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    return {"ckpt": str(out), "data": data, "result": json.loads(run.stdout), "folder": folder}


def test_training_on_a_tsv_of_ones_own_reaches_high_held_out_accuracy(trained):
    result = trained["result"]
    assert result["train_config"]["task"] == "data" and result["summary"]["accuracy"] >= 0.9
    assert result["model_config"]["vocab_size"] == 4 + 12  # specials, a-f, A-F
    run = run_cli("eval", trained["ckpt"], "--json")  # no data file: the held-out pairs it keeps
    data = json.loads(run.stdout)
    assert data["n"] == 100 and data["accuracy"] == result["summary"]["accuracy"]
    assert "held-out pairs of letters.tsv" in data["evaluated_on"]
    # text pairs: BLEU and chrF of the held-out outputs, high where nearly all are exact
    assert data["chrf"] > 90 and "tok:13a" in data["bleu_signature"] and 0 <= data["loss"] < 0.5


def test_decode_prints_text_and_names_the_characters_it_never_saw(trained):
    run = run_cli("decode", trained["ckpt"], "abcd", "fed")
    assert run.exit_code == 0 and run.stdout.split() == ["ABCD", "FED"]
    message = assert_one_line_error(run_cli("decode", trained["ckpt"], "abz q"))
    assert "'z'" in message and "' '" in message and "'q'" in message and "unknown characters" in message


def test_eval_on_a_file_counts_unknowns_and_skipped_pairs_and_shows_where_each_failure_starts(trained):
    path = trained["folder"] / "test.tsv"
    path.write_text("abc\tABC\nabz\tABZ\ncab\tCAB\n" + "ab" * 40 + "\tAB\n", encoding="utf-8")
    data = json.loads(run_cli("eval", trained["ckpt"], "--data", str(path), "--failures", "5",
                              "--json").stdout)
    assert data["n"] == 3 and data["skipped_too_long"] == 1
    assert data["unknown_tokens"] == 2  # the z of the source and the Z of the target
    failure = next(f for f in data["failures"] if f["line"] == 2)
    assert failure["expected_text"] == "AB<unk>" and failure["first_wrong"] == 2  # wrong from the Z
    text = run_cli("eval", trained["ckpt"], "--data", str(path), "--failures", "5").stdout
    assert "test.tsv: 3 pairs (1 skipped" in text and "read as <unk>" in text
    assert "line 2: ab<unk>  wrong from step 3" in text and "expected AB[<unk>]" in text


def test_inspect_shows_the_vocabulary_and_where_the_data_came_from(trained):
    info = json.loads(run_cli("inspect", trained["ckpt"], "--json").stdout)
    assert info["vocab"]["level"] == "char" and info["vocabulary"][4:] == list("ABCDEFabcdef")
    data = info["task"]["provenance"]["data"]
    assert data["file"] == "letters.tsv" and len(data["sha256"]) == 64 and data["pairs"] == 800
    assert info["task"]["counts"]["heldout"] == 100 and "heldout" not in info["task"]
    text = run_cli("inspect", trained["ckpt"], env={"COLUMNS": "200"}).stdout
    assert "trained on letters.tsv" in text and "700 trained on" in text
    assert "12 characters" in text and "A B C D E F a b c d e f" in text


def test_export_trace_labels_rows_and_columns_with_the_characters(trained):
    run = run_cli("export", trained["ckpt"], "--trace", "abc", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert {r["source_token"] for r in rows} == set("abc")
    first_column = [r for r in rows if (r["layer"], r["head"], r["source_position"]) == ("1", "1", "0")]
    assert [r["token"] for r in first_column] == ["A", "B", "C", "<eos>"]


def test_compare_runs_on_held_out_pairs_and_refuses_models_of_other_vocabularies(trained):
    data = json.loads(run_cli("compare", trained["ckpt"], trained["ckpt"], "--json").stdout)
    assert data["agreement"] == 1.0 and data["n"] == 100
    message = assert_one_line_error(run_cli("compare", trained["ckpt"], "reverse"))
    assert "different vocabularies" in message


def test_doctor_checks_a_data_model_on_its_held_out_pairs(trained):
    run = run_cli("doctor", trained["ckpt"], "--quick", "--json")
    data = json.loads(run.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert data["examples"] == "held-out pairs"
    assert checks["initial-loss"]["status"] == "pass"  # the band follows ln 16, not ln 13
    assert checks["alignment"]["status"] == "pass"  # --expect diagonal: scored
    assert checks["accuracy"]["status"] == "pass" and "held-out pairs" in checks["accuracy"]["description"]


def test_word_level_pairs_decode_to_words_joined_by_spaces(tmp_path):
    rng = random.Random(2)
    words = ["red", "green", "blue", "cat", "dog"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(300)]
    data = tmp_path / "words.jsonl"
    data.write_text("".join(json.dumps({"source": s, "target": s}) + "\n" for s in lines))
    out = tmp_path / "words.safetensors"
    run = run_cli("train", "--data", str(data), "--tokens", "word", *SMALL, "--steps", "20",
                  "--eval-every", "0", "--quiet", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    info = json.loads(run_cli("inspect", str(out), "--json").stdout)
    assert info["vocab"]["level"] == "word" and info["vocabulary"][4:] == sorted(words)
    decoded = run_cli("decode", str(out), "red   cat").stdout.strip()
    assert all(word in words for word in decoded.split())  # whatever it says, it says words
    assert "unknown word for this model: 'pig'" in assert_one_line_error(run_cli("decode", str(out), "pig"))


@pytest.mark.parametrize("content, fragment", [
    (b"ab\tAB\nno tab here\n", "line 2: no tab"),
    (b"ab\tAB\n\xff\xfe\tx\n", "line 2: not UTF-8"),
    (b"", "is empty"),
])
def test_a_bad_data_file_is_one_line_naming_file_and_line_with_exit_code_2(tmp_path, content, fragment):
    path = tmp_path / "bad.tsv"
    path.write_bytes(content)
    run = run_cli("train", "--data", str(path), *SMALL, "--steps", "5",
                  "--out", str(tmp_path / "x.safetensors"))
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and fragment in message and str(path) in message


def test_options_that_need_a_data_file_or_clash_with_one_are_usage_errors(tmp_path, trained):
    for args, fragment in ((["--tokens", "word"], "--tokens"), (["--valid", "v.tsv"], "--valid"),
                           (["--data", str(trained["data"]), "--lengths", "3-5"], "--lengths"),
                           (["--data", str(trained["data"]), "--task", "copy"], "--task")):
        run = run_cli("train", *args, "--steps", "5", "--out", str(tmp_path / "x.safetensors"))
        assert run.exit_code == 2 and fragment in assert_one_line_error(run), args


def test_resuming_on_another_file_is_refused_in_one_line(trained, tmp_path):
    other = letters_file(tmp_path / "other.tsv", seed=7)
    run = run_cli("train", "--resume", trained["ckpt"], "--data", str(other), "--steps", "400",
                  "--out", str(tmp_path / "r.safetensors"))
    message = assert_one_line_error(run)
    assert "trained on letters.tsv" in message and "holds other data" in message


def test_a_digit_model_is_evaluated_on_a_file_of_digit_pairs_and_refuses_other_tokens(tmp_path):
    good = tmp_path / "digits.tsv"
    good.write_text("3 1 4 1 5\t5 1 4 1 3\n27182\t28172\n9 9 0 1\t1 0 9 9\n", encoding="utf-8")
    data = json.loads(run_cli("eval", "reverse", "--data", str(good), "--json").stdout)
    assert data["n"] == 3 and data["accuracy"] == 1.0 and data["unknown_tokens"] == 0
    bad = tmp_path / "letters.tsv"
    bad.write_text("3 1 4\t4 1 3\n3 x 4\t4 x 3\n", encoding="utf-8")
    run = run_cli("eval", "reverse", "--data", str(bad))
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "letters.tsv, line 2: 'x' is not a token" in message


def test_decode_notes_a_source_character_the_training_sources_never_held(trained):
    run = run_cli("decode", trained["ckpt"], "aBc")  # B occurs in targets only
    assert run.exit_code == 0
    note = [line for line in run.stderr.splitlines() if "only in targets" in line]
    assert len(note) == 1 and "'B'" in note[0] and "'aBc'" in note[0]
    assert "only in targets" not in run_cli("decode", trained["ckpt"], "abc").stderr
    data = json.loads(run_cli("decode", trained["ckpt"], "aBc", "abc", "--json").stdout)
    assert [r["unseen_in_training_sources"] for r in data["results"]] == [["B"], []]


def test_attribute_labels_a_data_models_characters_and_agrees_on_its_held_out_pairs(trained):
    run = run_cli("attribute", trained["ckpt"], "abc", "--method", "occlusion", "--target", "A", "--json")
    result = json.loads(run.stdout)["results"][0]
    assert result["source_tokens"] == ["a", "b", "c"]
    assert [s["text"] for s in result["steps"]] == ["A", "B", "C", "<eos>"]
    assert result["target"] == "A" and result["steps"][0]["attribution"] == [0.0, 0.0, 0.0]  # A against A
    data = json.loads(run_cli("attribute", trained["ckpt"], "--agreement", "--method", "occlusion",
                              "--n", "20", "--json").stdout)
    assert data["sources"] == 20 and data["expected"]["occlusion"]["argmax"] >= 0.9  # --expect diagonal
