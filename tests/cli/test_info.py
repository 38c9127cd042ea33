"""`minitx eval`, `minitx inspect` and `minitx list`."""

from __future__ import annotations

import json
import shutil

import pytest

from minitx import checkpoints
from minitx.checkpoints import bundled_names
from tests.cli.conftest import assert_one_line_error, run_cli


def test_eval_json_reports_accuracy_and_a_per_length_breakdown(tiny_ckpt):
    run = run_cli("eval", tiny_ckpt, "--n", "40", "--lengths", "3-5", "--seed", "7", "--json")
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["n"] == 40 and data["lengths"] == [3, 5] and 0.0 <= data["accuracy"] <= 1.0
    assert set(data["by_length"]) <= {"3", "4", "5"}


def test_eval_with_the_same_seed_gives_the_same_result(tiny_ckpt):
    first = run_cli("eval", tiny_ckpt, "--n", "30", "--seed", "3")
    again = run_cli("eval", tiny_ckpt, "--n", "30", "--seed", "3")
    assert first.exit_code == 0 and first.stdout == again.stdout
    assert "exact match" in first.stdout and "length   3" in first.stdout


@pytest.mark.parametrize("lengths", ["12-x", "0-4", "5-3", "4-100"])
def test_eval_rejects_bad_lengths_as_a_one_line_usage_error(tiny_ckpt, lengths):
    run = run_cli("eval", tiny_ckpt, "--lengths", lengths)
    assert "--lengths" in assert_one_line_error(run)
    assert run.exit_code == 2


def test_inspect_json_has_config_task_vocabulary_parameters_and_summary(tiny_ckpt):
    run = run_cli("inspect", tiny_ckpt, "--json")
    assert run.exit_code == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["model_config"]["d_model"] == 16 and info["task"]["name"] == "reverse"
    assert info["vocabulary"][10:] == ["<pad>", "<sos>", "<eos>"]
    params = info["parameters"]
    assert params["total"] == sum(v for k, v in params.items() if k != "total")
    assert info["training"]["steps"] == 30 and info["resumable"] is True
    assert info["dtype"] == "float32" and info["file_size_bytes"] > 0


def test_inspect_json_shows_the_history_and_null_for_a_file_without_one(tiny_ckpt, tmp_path):
    info = json.loads(run_cli("inspect", tiny_ckpt, "--json").stdout)
    series = info["history"]["series"]
    assert series["loss"]["step"] == list(range(1, 31))
    assert set(series) >= {"loss", "lr", "grad_norm", "examples_per_s", "seconds", "accuracy"}
    assert series["accuracy"]["step"] == [30]  # the final evaluation
    snapshots = info["history"]["snapshots"]
    assert snapshots["step"][0] == 0 and snapshots["step"][-1] == 30
    target, source = len(snapshots["target"]), len(snapshots["source"])
    assert snapshots["shape"] == [len(snapshots["step"]), 1, 2, target, source]  # all layers, heads
    bare = tmp_path / "bare.safetensors"  # an export without --history
    assert run_cli("export", tiny_ckpt, "--out", str(bare)).exit_code == 0
    assert json.loads(run_cli("inspect", str(bare), "--json").stdout)["history"] is None
    assert "history: none" in run_cli("inspect", str(bare)).stdout


def test_inspect_text_shows_the_parameter_table(tiny_ckpt):
    run = run_cli("inspect", tiny_ckpt)
    assert run.exit_code == 0, run.stderr
    for word in ("embeddings", "encoder layers", "decoder layers", "output", "total", "<eos>"):
        assert word in run.stdout


@pytest.mark.skipif("reverse" not in checkpoints.bundled_names(), reason="no bundled reverse")
def test_bundled_reverse_has_the_reference_parameter_counts():
    info = json.loads(run_cli("inspect", "reverse", "--json").stdout)
    assert info["parameters"] == {
        "embeddings": 1664,
        "encoder layers": 99968,
        "decoder layers": 133504,
        "output": 845,
        "total": 235981,
    }
    assert info["blocks"] == {
        "attention block": 16640,
        "queries and output": 8320,
        "keys and values": 8320,
        "feed-forward block": 33088,
        "norm": 128,
        "encoder layer": 49984,
        "decoder layer": 66752,
    }
    assert info["resumable"] is False and info["dtype"] == "float32"


def test_list_shows_bundled_models_and_files_in_a_folder(tiny_ckpt, tmp_path):
    shutil.copy(tiny_ckpt, tmp_path / "mine.safetensors")
    (tmp_path / "broken.safetensors").write_bytes(b"nope")
    run = run_cli("list", str(tmp_path), "--json")
    assert run.exit_code == 0, run.stderr
    rows = {row["name"].rsplit("/", 1)[-1]: row for row in json.loads(run.stdout)}
    assert set(checkpoints.bundled_names()) <= set(rows)
    assert rows["mine.safetensors"]["task"] == "reverse" and rows["mine.safetensors"]["steps"] == 30
    assert rows["broken.safetensors"]["error"]
    text = run_cli("list", str(tmp_path))
    assert "mine.safetensors" in text.stdout and "unreadable" in text.stdout


def test_list_of_a_missing_folder_is_a_one_line_error(tmp_path):
    assert_one_line_error(run_cli("list", str(tmp_path / "nowhere")))


def test_inspect_shows_accuracy_as_a_percentage_like_everywhere_else():
    run = run_cli("inspect", "reverse")
    assert run.exit_code == 0
    line = next(line for line in run.stdout.splitlines() if " accuracy " in line)
    accuracy = checkpoints.load("reverse").summary["accuracy"]
    assert f"{accuracy:.1%}" in line and "0.99" not in line


def test_list_at_80_columns_keeps_every_name_and_bug_whole():
    run = run_cli("list", env={"COLUMNS": "80"})
    assert run.exit_code == 0
    assert all(len(line) <= 80 for line in run.stdout.splitlines())
    for name in bundled_names():
        assert name in run.stdout
        bug = name.removeprefix("reverse-")
        if bug != name:
            assert f"bug: {bug}" in run.stdout


def test_list_of_a_folder_keeps_every_row_on_one_line_and_says_what_cannot_be_read(tmp_path):
    (tmp_path / "broken.safetensors").write_bytes(b"nope")
    run = run_cli("list", str(tmp_path), env={"COLUMNS": "80"})
    lines = run.stdout.splitlines()
    rows = [line for line in lines if line.startswith(" reverse-no-causal-mask")]
    assert rows and "bug: no-causal-mask" in rows[0]  # the note whole, on its row
    assert any(line.startswith("unreadable broken.safetensors:") for line in lines)
    assert all(len(line) <= 80 for line in lines)


def test_inspect_never_calls_a_rough_evaluation_best_and_counts_the_rough_ones():
    from minitx.core.history import History
    from minitx.tui.cli.commands.info import describe_history

    history = History()
    for step in range(1, 101):
        history.record_step(step, 1.0, 1e-3, 1.0, 100.0, step * 0.1)
    history.record_eval(50, 1.0, n=100, complete=False)  # stopped early: its 100% is no measurement
    history.record_eval(100, 0.8, n=500, complete=True)
    line = describe_history(history)
    assert "2 evaluations (best 80.0% at step 100, 1 stopped early)" in line and "100.0%" not in line


def test_list_at_80_columns_cuts_a_long_file_name_and_keeps_every_other_column_whole(tmp_path):
    long = "a-rather-long-name-for-one-of-my-runs-of-reverse.safetensors"
    shutil.copy(checkpoints.BUNDLED_DIR / "reverse-no-causal-mask.safetensors", tmp_path / long)
    run = run_cli("list", str(tmp_path), env={"COLUMNS": "80"})
    lines = run.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    row = next(line for line in lines if line.startswith(" a-rather-long"))
    size = f"{(tmp_path / long).stat().st_size / 1024:.0f}"
    assert "…" in row and row.split()[1:] == ["reverse", size, "KB", "0.0%", "3000", "bug:",
                                              "no-causal-mask"]
    assert any(str(tmp_path) in line for line in lines)  # the caption names the folder whole
