"""`minitx train --alignments FILE --guided-head L:H`: the run's guided alignment in --json and
in the file's curves (curves --format json/csv, --chart aer), and its bad arguments."""

import json

import pytest

from tests.cli.conftest import run_cli
from tests.core.test_guided_training import made_up_language

TINY = ["--tokens", "word", "--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16",
        "--threads", "1"]


def test_a_guided_run_reports_its_heads_aer_in_json_and_keeps_it_in_its_curves(tmp_path):
    data, links = made_up_language(tmp_path, pairs=220)
    out = tmp_path / "g.safetensors"
    metrics = tmp_path / "run.jsonl"
    run = run_cli("train", "--data", data, "--alignments", links, "--guided-head", "1:2", "--steps", "4",
                  "--eval-every", "2", "--out", str(out), "--json", "--metrics", str(metrics), *TINY)
    assert run.exit_code == 0, run.stderr
    guided = json.loads(run.stdout)["guided_alignment"]
    assert guided["head"] == "1:2" and guided["weight"] == 0.1 and guided["guided_loss"] > 0
    assert guided["aer"]["step"] == [0, 2, 4] and all(0 <= v <= 1 for v in guided["aer"]["value"])
    curves = json.loads(run_cli("curves", str(out), "--format", "json").stdout)
    assert curves["runs"][0]["history"]["series"]["aer"]["step"] == [0, 2, 4]
    assert "guided head's AER" in run_cli("curves", str(out), "--chart", "aer").stdout
    assert run_cli("curves", str(out), "--format", "csv").stdout.count(",aer,") == 3
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [(r["step"], r["aer"]) for r in rows if r["kind"] == "eval"] == \
        list(zip(guided["aer"]["step"][1:], guided["aer"]["value"][1:]))


@pytest.mark.parametrize("change, blamed", [
    (lambda links: ["--guided-head", "1:3"], "--guided-head: head 3: the model's layers have 2 heads"),
    (lambda links: ["--guided-head", "one"], "--guided-head: expected LAYER:HEAD"),
    (lambda links: ["--guided-weight", "0"], "--guided-weight"),
    (lambda links: ["--alignments", ""], "--alignments: guided alignment needs both"),
])
def test_bad_guided_options_exit_2_naming_the_option(tmp_path, change, blamed):
    data, links = made_up_language(tmp_path, pairs=220)
    args = {"--alignments": links, "--guided-head": "1:1"}
    extra = change(links)
    args[extra[0]] = extra[1]
    flat = [part for name, value in args.items() if value for part in (name, value)]
    run = run_cli("train", "--data", data, *flat, "--steps", "1", *TINY)
    assert run.exit_code == 2 and blamed in run.stderr, run.stderr


def test_a_links_file_that_does_not_fit_the_pairs_names_its_file_and_line(tmp_path):
    data, links = made_up_language(tmp_path, pairs=220)
    lines = open(links).read().splitlines()
    (tmp_path / "short.links").write_text("\n".join(lines[:5]) + "\n")
    (tmp_path / "far.links").write_text("\n".join(["0-0 0-9", *lines[1:]]) + "\n")
    run = run_cli("train", "--data", data, "--alignments", str(tmp_path / "short.links"), "--guided-head",
                  "1:1", "--steps", "1", *TINY)
    assert run.exit_code == 2
    assert "short.links, line 6: the file has 5 lines, --data has 220 pairs" in run.stderr
    run = run_cli("train", "--data", data, "--alignments", str(tmp_path / "far.links"), "--guided-head",
                  "1:1", "--steps", "1", *TINY)
    assert run.exit_code == 2 and "far.links, line 1: link 0-9 is outside the pair's" in run.stderr


def test_valid_pairs_are_measured_on_their_own_gold_and_without_it_the_run_says_so(tmp_path):
    data, links = made_up_language(tmp_path, pairs=260)
    pairs, gold = open(data).read().splitlines(), open(links).read().splitlines()
    for name, rows in (("train.tsv", pairs[:200]), ("valid.tsv", pairs[200:]), ("train.talp", gold[:200]),
                       ("valid.talp", gold[200:])):
        (tmp_path / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    common = ["train", "--data", str(tmp_path / "train.tsv"), "--valid", str(tmp_path / "valid.tsv"),
              "--alignments", str(tmp_path / "train.talp"), "--guided-head", "1:1", "--steps", "2",
              "--eval-every", "2", "--json", *TINY]
    run = run_cli(*common, "--out", str(tmp_path / "a.safetensors"), "--valid-alignments",
                  str(tmp_path / "valid.talp"))
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["guided_alignment"]["aer"]["step"] == [0, 2]
    run = run_cli(*common, "--out", str(tmp_path / "b.safetensors"))
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["guided_alignment"]["aer"] is None
    assert "note: no held-out gold: the guided head's AER is not measured" in run.stderr
    run = run_cli(*common, "--out", str(tmp_path / "c.safetensors"), "--valid-alignments",
                  str(tmp_path / "train.talp"))  # 200 lines for the 60 held-out pairs
    assert run.exit_code == 2 and "train.talp, line 61: the file has 200 lines, --valid has 60" in run.stderr
