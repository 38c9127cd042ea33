"""`minitx align` and `decode --align` on the bundled reverse model, whose gold alignment is
known without asking the model: output digit j is source digit n-1-j (the anti-diagonal)."""

from __future__ import annotations

import json
import random

import pytest

from minitx import checkpoints
from tests.cli.conftest import assert_one_line_error, run_cli

pytestmark = pytest.mark.skipif("reverse" not in checkpoints.bundled_names(),
                                reason="bundled reverse checkpoint missing")


def digit_pairs(count: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(4, 10))] for _ in range(count)]


def anti_diagonal(n: int) -> str:
    return " ".join(f"{i}-{n - 1 - i}" for i in range(n))


@pytest.fixture
def files(tmp_path):
    """(pairs.tsv, gold.talp) of 40 reversed digit sequences."""
    sources = digit_pairs(40)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{' '.join(map(str, s))}\t{' '.join(map(str, reversed(s)))}\n"
                             for s in sources))
    gold = tmp_path / "gold.talp"
    gold.write_text("".join(anti_diagonal(len(s)) + "\n" for s in sources))
    return pairs, gold, sources


def test_align_prints_one_pharaoh_line_per_pair_and_the_last_layer_finds_the_anti_diagonal(files):
    pairs, _, sources = files
    run = run_cli("align", "reverse", str(pairs))
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == len(sources)
    right = sum(line == anti_diagonal(len(s)) for line, s in zip(lines, sources))
    assert right >= 0.9 * len(sources)


def test_heads_all_scores_every_head_and_each_layers_mean_and_names_the_best(files):
    pairs, gold, _ = files
    run = run_cli("align", "reverse", str(pairs), "--gold", str(gold), "--heads", "all", "--json")
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    named = [(h["layer"], h["head"]) for h in data["heads"]]
    assert named == [(layer, head) for layer in (1, 2) for head in (1, 2, 3, 4, None)]
    for h in data["heads"]:  # every link is sure here: AER = 1 - F1 (Och & Ney with P = S)
        p, r = h["precision"], h["recall"]
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        assert h["aer"] == pytest.approx(1 - f1)
    lowest = min(data["heads"], key=lambda h: h["aer"])
    assert data["best"]["aer"] == lowest["aer"] and data["best"]["aer"] < 0.05
    assert "links" not in data  # many heads: the scores only


def test_heads_all_table_fits_80_columns_and_names_the_best(files):
    pairs, gold, _ = files
    run = run_cli("align", "reverse", str(pairs), "--gold", str(gold), "--heads", "all")
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[-1].startswith("best: L") and "AER" in lines[-1]
    assert any(line.split()[:1] == ["L2"] for line in lines)


def test_one_heads_json_has_its_score_and_its_links(files):
    pairs, gold, sources = files
    run = run_cli("align", "reverse", str(pairs), "--gold", str(gold), "--layer", "1", "--head", "2",
                  "--method", "input", "--json")
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["heads"] == [{"layer": 1, "head": 2, **{k: data["best"][k] for k in ("aer", "precision",
                                                                                       "recall")}}]
    assert len(data["links"]) == len(sources) and data["method"] == "input"


@pytest.mark.parametrize("text, where", [("0-0\n", "line 2"), ("99-0\n" * 40, "line 1")])
def test_a_gold_file_that_does_not_fit_the_pairs_exits_2_naming_file_and_line(files, text, where):
    pairs, gold, _ = files
    gold.write_text(text)
    run = run_cli("align", "reverse", str(pairs), "--gold", str(gold))
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "gold.talp" in message and where in message, message


@pytest.mark.parametrize("args", [
    ["--head", "2"],  # a head without its layer
    ["--heads", "all"],  # nothing to score against
    ["--layer", "3"],  # the model has 2 decoder layers
    ["--sym", "union"],  # nothing to combine with
])
def test_options_that_cannot_be_used_together_exit_2(files, args):
    pairs, _, _ = files
    run = run_cli("align", "reverse", str(pairs), *args)
    assert run.exit_code == 2 and assert_one_line_error(run)


def test_symmetrized_links_lie_between_the_intersection_and_the_union(files):
    pairs, _, sources = files
    # the reverse model is its own reverse: reversing the target gives the source back
    got = {how: run_cli("align", "reverse", str(pairs), "--reverse", "reverse", "--sym", how,
                        "--layer", "1").stdout.splitlines() for how in ("intersect", "union", "gdfa")}
    assert all(len(lines) == len(sources) for lines in got.values())
    links = {how: [set(line.split()) for line in lines] for how, lines in got.items()}
    for inter, grown, union in zip(links["intersect"], links["gdfa"], links["union"]):
        assert inter <= grown <= union
    assert links["intersect"] != links["union"]  # layer 1 is a poor aligner: the two directions differ


def test_a_pair_too_long_for_the_model_keeps_its_place_with_an_empty_line(tmp_path):
    long = " ".join(["1"] * 70)  # the model has 64 positions
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"1 2 3 4\t4 3 2 1\n{long}\t{long}\n5 6 7 8\t8 7 6 5\n")
    run = run_cli("align", "reverse", str(pairs))
    assert run.exit_code == 0
    assert run.stdout.splitlines() == [anti_diagonal(4), "", anti_diagonal(4)]
    assert "line 2" in run.stderr and "1 pairs not aligned" in run.stderr


def test_decode_align_prints_each_outputs_links_beside_it():
    run = run_cli("decode", "reverse", "3 1 4 1 5", "2 7 1 8 2 8", "--align")
    assert run.exit_code == 0, run.stderr
    assert run.stdout.splitlines() == [f"5 1 4 1 3\t{anti_diagonal(5)}", f"8 2 8 1 7 2\t{anti_diagonal(6)}"]
    run = run_cli("decode", "reverse", "3 1 4 1 5", "--align", "--json")
    alignment = json.loads(run.stdout)["results"][0]["alignment"]
    assert alignment == {"links": anti_diagonal(5), "source_words": ["3", "1", "4", "1", "5"],
                         "output_words": ["5", "1", "4", "1", "3"]}


@pytest.mark.parametrize("args", [["--layer", "1"], ["--align", "--beams", "2"], ["--align", "--attention"],
                                  ["--align", "--ablate", "cross:L2"]])
def test_decode_alignment_options_without_align_or_with_beams_or_ablation_exit_2(args):
    run = run_cli("decode", "reverse", "3 1 4 1 5", *args)
    assert run.exit_code == 2 and assert_one_line_error(run)


@pytest.mark.parametrize("tokens", ["char", "word"])
def test_align_on_a_model_of_your_own_pairs_links_every_target_word_within_the_words(tmp_path, tokens):
    """Characters or words as the model's tokens, whitespace words as alignment's: every target
    word gets a link (each of its pieces links somewhere), every index is a word of its side."""
    rng = random.Random(3)
    words = ["ab", "cd", "ef", "abc", "fed"]
    pairs = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(200)]
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{s}\t{' '.join(reversed(s.upper().split()))}\n" for s in pairs))
    out = tmp_path / "own.safetensors"
    run = run_cli("train", "--data", str(data), "--tokens", tokens, "--d-model", "16", "--heads", "2",
                  "--layers", "1", "--d-ff", "32", "--steps", "3", "--eval-every", "0", "--quiet",
                  "--device", "cpu", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    run = run_cli("align", str(out), str(data), "--method", "input")
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == len(pairs)
    for line, source in zip(lines, pairs):
        links = [tuple(map(int, link.split("-"))) for link in line.split()]
        n = len(source.split())
        assert all(i < n and j < n for i, j in links)
        assert {j for _, j in links} == set(range(n))
