"""A translation set as the Hub ships it, through the commands: `--src-lang/--tgt-lang` pick the
sides of `{"translation": {...}}` records and parquet columns for `train --data/--valid`, a
fine-tune's `--general` and `eval --pairs`, on a model with language codes or without."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import TINY, assert_one_line_error, run_cli

# Digit pairs under language keys: the bundled reverse model reads the "en" side and writes "fr".
DIGITS = [("3 1 4 1 5", "5 1 4 1 3"), ("2 7 1 8", "8 1 7 2"), ("9 2 6", "6 2 9"), ("5 3 5 8 9", "9 8 5 3 5")]


def translation_file(path, pairs=DIGITS):
    path.write_text("".join(json.dumps({"translation": {"fr": t, "en": s}}) + "\n" for s, t in pairs),
                    encoding="utf-8")
    return path


def scores(*args):
    run = run_cli("eval", "reverse", *args, "--json", "--threads", "1")
    assert run.exit_code == 0, run.stderr
    result = json.loads(run.stdout)
    return result["n"], result["accuracy"], result["loss"]


def test_eval_on_a_translation_set_reads_the_sides_the_languages_name(tmp_path):
    path = translation_file(tmp_path / "digits.jsonl")
    tsv, flipped = tmp_path / "digits.tsv", tmp_path / "flipped.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in DIGITS), encoding="utf-8")
    flipped.write_text("".join(f"{t}\t{s}\n" for s, t in DIGITS), encoding="utf-8")
    en_fr, fr_en = ("--src-lang", "en", "--tgt-lang", "fr"), ("--src-lang", "fr", "--tgt-lang", "en")
    assert scores("--pairs", str(path), *en_fr) == scores("--pairs", str(tsv))
    assert scores("--pairs", str(path), *fr_en) == scores("--pairs", str(flipped))


def test_eval_on_a_translation_set_without_languages_is_one_line_naming_the_file_and_keys(tmp_path):
    path = translation_file(tmp_path / "digits.jsonl")
    line = assert_one_line_error(run_cli("eval", "reverse", "--pairs", str(path), "--threads", "1"))
    assert "digits.jsonl, line 1" in line and "fr, en" in line and "--src-lang" in line


def test_languages_on_a_model_without_codes_still_refuse_where_no_pairs_are_read():
    line = assert_one_line_error(run_cli("decode", "reverse", "3 1 4", "--src-lang", "en"))
    assert "no language codes" in line


pyarrow = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_train_on_parquet_translation_sets_keeps_the_languages_and_resumes_on_them(tmp_path):
    pairs = [(" ".join("1234"[i % 4] * (1 + i % 3)), " ".join("abcd"[i % 4] * (1 + i % 3)))
             for i in range(40)]
    train = tmp_path / "train.parquet"
    pq.write_table(pyarrow.table({"translation": [{"de": t, "en": s} for s, t in pairs]}), train)
    valid = tmp_path / "valid.jsonl"
    valid.write_text("".join(json.dumps({"translation": {"en": s, "de": t}}) + "\n" for s, t in pairs[:5]),
                     encoding="utf-8")
    out = tmp_path / "m.safetensors"
    tiny = [o for o in TINY if o not in ("--lengths", "3-6")]  # a data file's pairs have their own lengths
    run = run_cli("train", "--data", str(train), "--valid", str(valid), "--src-lang", "en",
                  "--tgt-lang", "de", "--tokens", "word", *tiny, "--steps", "3", "--out", str(out), "--json")
    assert run.exit_code == 0, run.stderr
    inspect = run_cli("inspect", str(out), "--json")
    config = json.loads(inspect.stdout)["train_config"]
    assert (config["src_lang"], config["tgt_lang"]) == ("en", "de")
    held = run_cli("eval", str(out), "--json", "--threads", "1")
    assert held.exit_code == 0, held.stderr
    assert json.loads(held.stdout)["n"] == 5  # --valid's five pairs, read by the same languages
    resumed = run_cli("train", "--resume", str(out), "--steps", "5", "--out", str(out), "--quiet", "--json")
    assert resumed.exit_code == 0, resumed.stderr  # the same files read the same way: the same data
    assert json.loads(resumed.stdout)["summary"]["steps"] == 5


def test_a_fine_tune_reads_its_data_and_general_pairs_by_the_languages(tmp_path):
    data = translation_file(tmp_path / "data.jsonl", DIGITS * 3)
    general = translation_file(tmp_path / "general.jsonl")
    out = tmp_path / "ft.safetensors"
    quick = ("--steps", "2", "--batch-size", "4", "--eval-every", "0", "--device", "cpu", "--quiet")
    run = run_cli("train", "--init", "reverse", "--data", str(data), "--general", str(general),
                  "--src-lang", "en", "--tgt-lang", "fr", *quick, "--out", str(out))
    assert run.exit_code == 0, run.stderr
    missing = run_cli("train", "--init", "reverse", "--data", str(data), "--src-lang", "en",
                      "--tgt-lang", "de", *quick, "--out", str(tmp_path / "x.safetensors"))
    line = assert_one_line_error(missing)
    assert "data.jsonl, line 1" in line and "'de'" in line
