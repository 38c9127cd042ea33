"""The intervention commands and flags: --ablate on decode/eval/export/compare, heads, patch,
lens and eval --failures, on the bundled reverse model."""

from __future__ import annotations

import json

import pytest

from minitx import checkpoints
from tests.cli.conftest import assert_one_line_error, run_cli

pytestmark = pytest.mark.skipif("reverse" not in checkpoints.bundled_names(),
                                reason="bundled reverse checkpoint missing")


def ok_json(*args: str) -> dict:
    run = run_cli(*args, "--json")
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


def test_decode_without_layer_2s_cross_attention_gets_the_reverse_wrong():
    assert run_cli("decode", "3 1 4 1 5").stdout == "5 1 4 1 3\n"
    assert run_cli("decode", "3 1 4 1 5", "--ablate", "cross:L2").stdout != "5 1 4 1 3\n"
    one_head = run_cli("decode", "3 1 4 1 5", "--ablate", "cross:L2.H1", "--ablate-kind", "mean")
    assert one_head.stdout == "5 1 4 1 3\n"


def test_decode_json_names_the_ablated_heads_and_gives_log_probabilities_and_entropy():
    data = ok_json("decode", "3 1 4 1 5", "--ablate", "cross:L2.H3", "--ablate", "enc:L1.H1")
    result = data["results"][0]
    assert result["ablated"] == ["cross:L2.H3", "enc:L1.H1"]
    for step in result["steps"]:
        assert step["log_p"] <= 0 and step["entropy"] >= 0


@pytest.mark.parametrize("spec, words", [("cross:L9.H1", "layers 1-2"), ("L2.H1", "KIND:Ll.Hh"),
                                         ("self:L1.H0", "heads 1-4")])
def test_a_bad_ablate_spec_is_a_usage_error_naming_the_flag(spec, words):
    run = run_cli("decode", "3 1 4 1 5", "--ablate", spec)
    line = assert_one_line_error(run)
    assert run.exit_code == 2 and "--ablate" in line and words in line


def test_eval_with_an_ablation_reports_it_and_its_accuracy():
    data = ok_json("eval", "--n", "100", "--ablate", "cross:L2")
    assert data["accuracy"] < 0.3 and data["ablate_kind"] == "zero"
    assert data["ablated"] == [f"cross:L2.H{h}" for h in range(1, 5)]
    text = run_cli("eval", "--n", "100", "--ablate", "cross:L2").stdout
    assert text.splitlines()[0] == "reverse without cross:L2 (zero)"


def test_eval_failures_lists_wrong_outputs_with_the_first_wrong_step():
    run = run_cli("eval", "--n", "100", "--ablate", "cross:L2", "--failures", "3")
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("first 3 of"))
    assert sum("wrong from step" in line for line in lines[start:]) == 3
    assert all("[" in line for line in lines[start + 1:] if "got" in line)
    data = ok_json("eval", "--n", "100", "--ablate", "cross:L2", "--failures", "2")
    for failure in data["failures"]:
        step = failure["first_wrong"]
        assert failure["output"][:step] == failure["expected"][:step]
    assert "no wrong outputs" in run_cli("eval", "--n", "50", "--failures", "5").stdout


def test_export_trace_records_the_ablation_and_a_checkpoint_export_refuses_it(tmp_path):
    run = run_cli("export", "reverse", "--trace", "3 1 4 1 5", "--ablate", "cross:L2")
    assert run.exit_code == 0, run.stderr
    trace = json.loads(run.stdout)
    assert trace["ablated"] and not trace["correct"]
    refused = run_cli("export", "reverse", "--out", str(tmp_path / "x.safetensors"), "--ablate", "cross")
    assert "--trace" in assert_one_line_error(refused)


def test_compare_b_as_a_with_heads_ablated():
    data = ok_json("compare", "reverse", "reverse", "--n", "100", "--ablate-b", "cross:L2",
                   "--source", "3 1 4 1 5")
    assert data["a"]["accuracy"] > 0.95 > 0.3 > data["b"]["accuracy"]
    assert data["b"]["name"] == "reverse without cross:L2 (zero)" and data["a"]["name"] == "reverse"
    assert data["weight_distance"] == 0.0  # the same weights: only the ablation differs
    assert data["decode"]["a"] == "5 1 4 1 3" != data["decode"]["b"]


def test_heads_ranks_every_head_by_what_its_ablation_costs():
    data = ok_json("heads", "--n", "40")
    assert len(data["heads"]) == 24 and data["kind"] == "zero"
    losses = [h["loss_change"] for h in data["heads"]]
    assert losses == sorted(losses, reverse=True)
    text = run_cli("heads", "--n", "40").stdout
    assert "rank" in text and "cross:L2.H1" in text


def test_patch_finds_the_recovered_fraction_per_head_and_stream():
    data = ok_json("patch", "--clean", "3 1 4 1 5", "--corrupt", "2 7 1 8 2")
    assert data["clean_difference"] > 0 > data["corrupted_difference"]
    assert max(data["heads"], key=data["heads"].get).startswith("cross:L2")
    assert data["stream_all"]["enc:L2.resid"] == pytest.approx(1.0, abs=1e-4)
    run = run_cli("patch", "--clean", "3 1 4 1 5", "--corrupt", "2 7 1 8 2", env={"COLUMNS": "80"})
    assert run.exit_code == 0 and max(len(line) for line in run.stdout.splitlines()) <= 80
    assert "cross:L2" in run.stdout and "enc:L1" in run.stdout


@pytest.mark.parametrize("clean, corrupt, words", [("3 1 4", "3 1", "same length"),
                                                   ("3 1 4", "3 1 4", "same answer"),
                                                   ("3 x", "3 1", "--clean")])
def test_patch_refuses_a_pair_it_cannot_use_with_one_line(clean, corrupt, words):
    run = run_cli("patch", "--clean", clean, "--corrupt", corrupt)
    assert words in assert_one_line_error(run) and run.exit_code == 2


def test_lens_shows_every_layer_and_its_last_row_is_the_prediction():
    data = ok_json("lens", "reverse", "3 1 4 1 5", "--top-k", "2")
    assert len(data["layers"]) == 2
    assert [step[0]["token"] for step in data["layers"][-1]] == ["5", "1", "4", "1", "3", "<eos>"]
    run = run_cli("lens", "2 7 1 8 2 8 1 8 2 8", env={"COLUMNS": "80"})
    assert run.exit_code == 0 and max(len(line) for line in run.stdout.splitlines()) <= 80
    assert "L2 (model)" in run.stdout
