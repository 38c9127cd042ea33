"""`minitx curves`: charts of one or several runs from checkpoints or --metrics files, and their
export as CSV and JSON."""

from __future__ import annotations

import csv
import io
import json

import pytest

from minitx.core.checkpoint import load_checkpoint
from tests.cli.conftest import TINY, assert_one_line_error, run_cli


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("curves")
    paths = []
    for name, seed in (("alpha", "0"), ("beta", "1")):
        out, metrics = folder / f"{name}.safetensors", folder / f"{name}.jsonl"
        run = run_cli("train", *TINY, "--steps", "12", "--eval-every", "4", "--seed", seed,
                      "--metrics", str(metrics), "--out", str(out))
        assert run.exit_code == 0, run.stderr
        paths.append((out, metrics))
    return paths


def test_curves_draws_loss_and_accuracy_of_a_run_within_80_columns(two_runs):
    (ckpt, _), _ = two_runs
    run = run_cli("curves", str(ckpt), env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("alpha · steps 1-12")
    assert any(line.startswith("loss · log scale") for line in lines)
    assert any(line.startswith("held-out exact match") for line in lines)
    assert max(len(line) for line in lines) <= 80
    assert any(ch in run.stdout for ch in "⠁⠂⠄⡀⠈⠐⠠⢀")  # braille dots: a curve was drawn


def test_curves_overlays_runs_with_a_legend_naming_each(two_runs):
    (a, _), (b, _) = two_runs
    run = run_cli("curves", str(a), str(b), "--chart", "loss", "--scale", "linear", env={"COLUMNS": "100"})
    assert run.exit_code == 0, run.stderr
    heading = next(line for line in run.stdout.splitlines() if line.startswith("loss"))
    assert "alpha" in heading and "beta" in heading and "log" not in heading
    assert "▀" in run.stdout  # the second run's marker differs from the first's (no colour needed)


def test_csv_export_has_every_recorded_point_of_every_run(two_runs):
    (a, metrics_a), (b, _) = two_runs
    run = run_cli("curves", str(a), str(b), "--format", "csv")
    assert run.exit_code == 0, run.stderr
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    history = load_checkpoint(a).history
    losses = [r for r in rows if r["run"] == "alpha" and r["series"] == "loss"]
    assert [int(r["step"]) for r in losses] == list(range(1, 13))
    assert [float(r["value"]) for r in losses] == pytest.approx(history.series("loss")[1], rel=1e-6)
    evals = [int(r["step"]) for r in rows if r["run"] == "beta" and r["series"] == "accuracy"]
    assert evals == [4, 8, 12]


def test_json_export_of_a_metrics_file_matches_the_checkpoints_history(two_runs, tmp_path):
    (ckpt, metrics), _ = two_runs
    out = tmp_path / "curves.json"
    run = run_cli("curves", str(metrics), "--format", "json", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    from_metrics = json.loads(out.read_text())["runs"][0]["history"]["series"]
    from_ckpt = json.loads(run_cli("curves", str(ckpt), "--format", "json").stdout)["runs"][0]["history"]
    for name in ("loss", "lr", "accuracy"):
        assert from_metrics[name]["step"] == from_ckpt["series"][name]["step"]
        assert from_metrics[name]["value"] == pytest.approx(from_ckpt["series"][name]["value"], rel=1e-5)
    assert from_ckpt["snapshots"]["step"][-1] == 12


def test_a_file_without_curves_is_noted_and_alone_is_a_one_line_error(two_runs, tmp_path):
    (a, _), _ = two_runs
    bare = tmp_path / "bare.safetensors"  # exported without --history
    assert run_cli("export", str(a), "--out", str(bare)).exit_code == 0
    run = run_cli("curves", str(bare), str(a), "--format", "csv")
    assert run.exit_code == 0 and "bare.safetensors holds no training curves" in run.stderr
    assert "alpha,loss,1," in run.stdout
    assert "no curves" in assert_one_line_error(run_cli("curves", str(bare)))


@pytest.mark.parametrize("content, fragment", [
    ('{"kind": "step", "step": 1, "loss": 1.0, "lr": 0.1, "grad_norm": 1}\nnot json\n', "line 2"),
    ('{"kind": "step", "step": -1, "loss": 1.0, "lr": 0.1, "grad_norm": 1}\n', "line 1"),
    ('{"kind": "eval", "step": 3, "accuracy": 7}\n', "accuracy"),
    ('[1, 2]\n', "line 1"),
    ('{"kind": "step", "step": 1, "loss": NaN, "lr": 0.1, "grad_norm": 1}\n', "loss"),
])
def test_a_broken_metrics_file_is_a_one_line_error_naming_file_and_line(tmp_path, content, fragment):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    message = assert_one_line_error(run_cli("curves", str(path)))
    assert "bad.jsonl" in message and fragment in message


def test_a_resumed_metrics_file_that_went_back_to_its_last_save_keeps_the_later_steps(tmp_path):
    rows = [{"kind": "step", "step": s, "loss": 1.0 / s, "lr": 0.1, "grad_norm": 1.0} for s in (1, 2, 3, 4)]
    rows += [{"kind": "step", "step": s, "loss": 2.0 / s, "lr": 0.1, "grad_norm": 1.0} for s in (3, 4, 5)]
    path = tmp_path / "resumed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loss = json.loads(run_cli("curves", str(path), "--format", "json").stdout)["runs"][0]["history"][
        "series"]["loss"]
    assert loss["step"] == [1, 2, 3, 4, 5] and loss["value"][2:] == pytest.approx([2 / 3, 0.5, 0.4])


def _plotted_rows(chart: list[str]) -> list[str]:
    """The rows of a chart's plot: those above its x axis with the y axis (│ or ┤) in its column."""
    bottom = next(i for i, line in enumerate(chart) if "└" in line)
    column = chart[bottom].index("└")
    top = bottom
    while top > 0 and len(chart[top - 1]) > column and chart[top - 1][column] in "│┤":
        top -= 1
    return chart[top:bottom]


@pytest.mark.parametrize("height", [3, 8, 30])  # 30: taller than the 24-line terminal pytest has
def test_height_is_the_number_of_plotted_rows_of_each_chart(two_runs, height):
    (ckpt, _), _ = two_runs
    run = run_cli("curves", str(ckpt), "--chart", "lr", "--height", str(height), env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    assert len(_plotted_rows(run.stdout.splitlines())) == height


def test_axis_labels_never_repeat_and_lines_end_without_spaces(two_runs):
    (ckpt, _), _ = two_runs
    run = run_cli("curves", str(ckpt), "--chart", "lr", "--chart", "loss", "--scale", "linear",
                  "--height", "8", env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert all(line == line.rstrip() for line in lines)
    ends = [i + 1 for i, line in enumerate(lines) if "└" in line]
    assert len(ends) == 2
    for start, end in zip([0] + ends, ends):
        labels = [row.split("┤")[0].strip() for row in _plotted_rows(lines[start:end]) if "┤" in row]
        assert len(labels) >= 2 and len(set(labels)) == len(labels), labels


def test_tick_labels_take_the_figures_that_keep_them_apart():
    from minitx.tui.render.charts import linear_ticks, log_ticks, tick_labels

    assert tick_labels([0.0015, 0.002, 0.0025]) == ["1.5e-3", "2e-3", "2.5e-3"]
    assert tick_labels([0.001, 0.002]) == ["1e-3", "2e-3"]
    assert tick_labels([1500, 2000, 2500]) == ["1.5k", "2k", "2.5k"]
    assert linear_ticks(2.006, 2.9, 4) == [2.2, 2.4, 2.6, 2.8]  # not [2.5] alone
    assert len(log_ticks(2.006, 2.9)) >= 2


def _run_with_rough_evaluations(path, name: str = "rough.jsonl"):
    """100 steps; evaluations at 20 and 60 stopped early (rough, and higher than the others)."""
    rows = [{"kind": "step", "step": s, "loss": 3.0 / s, "lr": 1e-3, "grad_norm": 1.0} for s in range(1, 101)]
    rows += [{"kind": "eval", "step": 20, "accuracy": 0.9, "n": 50, "complete": False},
             {"kind": "eval", "step": 40, "accuracy": 0.5, "n": 500, "complete": True},
             {"kind": "eval", "step": 60, "accuracy": 1.0, "n": 100, "complete": False},
             {"kind": "eval", "step": 100, "accuracy": 0.7, "n": 500, "complete": True}]
    file = path / name
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return file


def test_the_headline_never_calls_a_rough_evaluation_best_and_the_chart_marks_rough_ones(tmp_path):
    file = _run_with_rough_evaluations(tmp_path)
    run = run_cli("curves", str(file), "--chart", "accuracy", env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    headline = " ".join(run.stdout.split("\n\n")[0].split())
    assert "exact match 70.0% at 100" in headline and "best 70.0% at 100" in headline
    assert "100.0%" not in headline and "90.0%" not in headline
    assert "○ stopped early (rough)" in run.stdout and run.stdout.count("○") == 3  # two, and the legend's


def test_a_headline_whose_last_evaluation_stopped_early_says_so(tmp_path):
    rows = [{"kind": "step", "step": 1, "loss": 3.0, "lr": 1e-3, "grad_norm": 1.0},
            {"kind": "eval", "step": 1, "accuracy": 1.0, "n": 100, "complete": False}]
    file = tmp_path / "early.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = run_cli("curves", str(file), env={"COLUMNS": "80"})
    headline = " ".join(run.stdout.split("\n\n")[0].split())
    assert "stopped early after 100 examples" in headline and "no complete evaluation" in headline
    assert "100.0%" not in headline


def test_a_long_headline_breaks_between_fields_instead_of_being_cut_at_80_columns(tmp_path):
    file = _run_with_rough_evaluations(tmp_path, "a-run-with-a-rather-long-descriptive-name.jsonl")
    run = run_cli("curves", str(file), env={"COLUMNS": "80"})
    lines = run.stdout.split("\n\n")[0].splitlines()
    assert len(lines) == 2 and all(len(line) <= 80 for line in lines)
    assert "best 70.0% at 100" in lines[1] and "…" not in run.stdout.split("\n\n")[0]


def test_the_x_axis_spans_the_whole_run_labelled_once_from_its_first_step_to_its_last(tmp_path):
    file = _run_with_rough_evaluations(tmp_path)
    run = run_cli("curves", str(file), env={"COLUMNS": "80"})  # loss, then accuracy (from step 20)
    tick_rows = [line for line in run.stdout.splitlines() if line.lstrip().startswith("step ")]
    assert len(tick_rows) == 2
    for row in tick_rows:
        assert row.split()[:2] == ["step", "1"] and row.split()[-1] == "100"
        assert row.count("step") == 1
