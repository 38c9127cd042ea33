"""The circuit commands: `heads --roles`, `patch` with attribution beside exact patching (any
task, a drawn pair when no sources are typed), and `circuit`, whose faithfulness is checked here
by mean-ablating every other head with nothing but core's ablation."""

from __future__ import annotations

import json

import pytest
import torch

from minitx import checkpoints
from tests.cli.conftest import assert_one_line_error, run_cli
from tests.cli.test_data_cli import SMALL, letters_file


def ok(*args: str, as_json: bool = True):
    run = run_cli(*args, *(["--json"] if as_json else []), "--threads", "1", env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout) if as_json else run.stdout


def fits_80_columns(text: str) -> None:
    for line in text.splitlines():
        assert len(line) <= 80 and line == line.rstrip(), line


@pytest.fixture(scope="module")
def letters_model(tmp_path_factory):
    """A small model of one's own pairs (lower case -> upper case)."""
    folder = tmp_path_factory.mktemp("letters")
    out = folder / "letters.safetensors"
    run = run_cli("train", "--data", str(letters_file(folder / "letters.tsv")), *SMALL, "--steps", "150",
                  "--eval-every", "0", "--quiet", "--threads", "1", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    return str(out)


def test_heads_roles_scores_every_head_and_names_reverses_copying_heads():
    data = ok("heads", "reverse", "--roles", "--n", "100")
    heads = {h["head"]: h for h in data["heads"]}
    assert len(heads) == 24 and data["n"] == 100
    assert all(heads[f"cross:L2.H{h}"]["strongest"] == "anti-diagonal" for h in range(1, 5))
    assert heads["self:L1.H1"]["scores"]["anti-diagonal"] is None  # not a self-attention pattern
    text = ok("heads", "reverse", "--roles", "--n", "100", as_json=False)
    fits_80_columns(text)
    assert "strongest" in text and "anti-diagonal" in text


def test_patch_shows_attribution_beside_exact_patching_with_their_agreement():
    data = ok("patch", "reverse", "--clean", "3 1 4 1 5", "--corrupt", "2 7 1 8 2")
    assert set(data["attribution"]["heads"]) == set(data["heads"])
    assert data["agreement"]["heads"]["r"] > 0.95 and data["agreement"]["heads"]["count"] == 24
    assert data["agreement"]["inputs_qk"]["r"] > data["agreement"]["inputs"]["r"]
    assert len(data["inputs"]) == 16  # each cross-attention head's K/V and Q input, exact
    text = ok("patch", "reverse", "--clean", "3 1 4 1 5", "--corrupt", "2 7 1 8 2", as_json=False)
    fits_80_columns(text)
    assert "attribution estimate" in text and "QK fix used" in text and "r = " in text


def test_patch_attribution_alone_skips_exact_patching():
    data = ok("patch", "reverse", "--method", "attribution")
    assert "heads" not in data and len(data["attribution"]["heads"]) == 24 and "agreement" not in data
    fits_80_columns(ok("patch", "reverse", "--method", "attribution", as_json=False))


def test_patch_on_dates_and_on_a_data_model_draws_a_pair_of_the_same_length(letters_model):
    for ckpt in ("dates", letters_model):
        data = ok("patch", ckpt, "--seed", "3")
        assert len(data["clean"]) == len(data["corrupted"])
        assert data["clean_answer"] != data["corrupted_answer"]
        assert data["steps"] and "attribution" in data
    # typed dates: the task cannot tell their answers, the model's outputs are the answers
    typed = ok("patch", "dates", "--clean", "1 dec 26", "--corrupt", "2 dec 26", "--method", "exact")
    assert typed["by_model"] and typed["steps"] == [9]  # 2026-12-01 against 2026-12-02
    run = run_cli("patch", "dates", "--clean", "1 dec 26", "--corrupt", "1 dec 26")
    assert run.exit_code == 2 and "says the same for both" in assert_one_line_error(run)
    run = run_cli("patch", "reverse", "--clean", "1 2 3")
    assert run.exit_code == 2 and "both --clean and --corrupt" in assert_one_line_error(run)


@pytest.mark.slow  # tier 2: core's is tier 1's in tests/core/test_circuit.py
def test_circuit_faithfulness_is_what_mean_ablating_every_other_head_gives(tmp_path):
    from minitx.core.interp.interventions import Interventions, all_heads, head_means
    from minitx.core.interp.pairs import draw_pairs
    from minitx.core.interp.patching import Patcher

    svg = tmp_path / "circuit.svg"
    data = ok("circuit", "reverse", "--n-pairs", "8", "--seed", "5", "--n", "20", "--svg", str(svg))
    assert data["heads_faithfulness"] >= 0.9 and data["faithfulness"] >= 0.9
    ckpt = checkpoints.load("reverse")
    model = ckpt.model
    patcher = Patcher.of_pairs(model, draw_pairs(ckpt.task, 8, 5, model.cfg.eos_id))
    means = head_means(model, ckpt.task)

    def difference(kept) -> float:
        out = {h: means[(h.kind, h.layer)][h.head] for h in all_heads(model) if str(h) not in kept}
        with torch.no_grad(), Interventions(mean=out).applied(model):
            return patcher.difference(model(patcher.source("clean"), patcher.decoder_input))

    empty = difference(set())
    independent = (difference(set(data["heads"])) - empty) / (patcher.clean_difference - empty)
    assert data["heads_faithfulness"] == pytest.approx(independent, abs=1e-5)
    picture = svg.read_text()
    assert picture.startswith("<svg") and picture.count("<rect x=") == 24 and "<line" in picture


def test_circuit_text_fits_80_columns_and_names_the_edges():
    text = ok("circuit", "copy", "--n-pairs", "8", "--n", "20", as_json=False)
    fits_80_columns(text)
    for words in ("K/V: what the encoder gives", "Q: what the decoder asks", "faithfulness",
                  "exact match", "heads "):
        assert words in text


def test_circuit_on_a_data_model_runs_on_held_out_pairs(letters_model):
    data = ok("circuit", letters_model, "--n-pairs", "6", "--n", "20")
    assert data["pairs"] == 6 and data["faithfulness"] >= 0.9 and data["accuracy_n"] == 20


@pytest.mark.parametrize("args, words", [(["--keep", "0"], "--keep"), (["--keep", "1.5"], "--keep"),
                                         (["--n-pairs", "0"], "--n-pairs")])
def test_circuit_bad_options_are_one_line_usage_errors(args, words):
    run = run_cli("circuit", "reverse", *args)
    assert run.exit_code == 2 and words in assert_one_line_error(run)


def test_circuit_svg_into_a_folder_is_refused_before_any_work(tmp_path):
    run = run_cli("circuit", "reverse", "--svg", str(tmp_path))
    assert run.exit_code == 2 and "folder" in assert_one_line_error(run)
