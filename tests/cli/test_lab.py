"""`minitx lab`: component variants side by side, one table."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import assert_one_line_error, run_cli

SMALL = ["--d-model", "16", "--heads", "4", "--layers", "1", "--lengths", "3-5", "--beyond", "7-8",
         "--steps", "4", "--eval-every", "2", "--eval-size", "10", "--threads", "1"]


def test_the_lab_prints_one_row_per_variant_with_every_measurement():
    run = run_cli("lab", "baseline", "rope+gqa", *SMALL, "--seeds", "0,1", env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    header = next(line for line in lines if "variant" in line)
    for column in ("params", "steps to 99%", "final 3-5", "beyond 7-8", "steps/s"):
        assert column in header
    split = next(i for i, line in enumerate(lines) if "beyond, by source length" in line)
    rows = {line.split()[1]: line for line in lines[:split] if line.startswith("│")}
    assert {"baseline", "rope+gqa"} <= set(rows)
    assert ">4, >4" in rows["baseline"] and "(1.00x)" in rows["baseline"]
    assert "rope+gqa: position_encoding=rope, kv_heads=2" in run.stdout
    header = next(line for line in lines[split:] if "variant" in line).split()
    assert "7" in header and "8" in header  # a column per length beyond training
    assert all(len(line) <= 80 for line in lines)
    finished = [line for line in run.stderr.splitlines() if line.startswith("[")]
    assert [line.split(":")[0] for line in finished] == [
        "[1/4] seed 0 baseline", "[2/4] seed 0 rope+gqa", "[3/4] seed 1 baseline", "[4/4] seed 1 rope+gqa"]


def test_the_lab_json_has_every_run_and_the_plan():
    run = run_cli("lab", "mqa", *SMALL, "--seeds", "2", "--json", "--quiet")
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["plan"]["beyond"] == [7, 8] and data["plan"]["steps"] == 4
    (row,) = data["variants"]
    assert row["variant"] == "mqa" and row["runs"][0]["seed"] == 2
    assert set(row["runs"][0]["beyond_by_length"]) <= {"7", "8"}
    assert run.stderr == ""


@pytest.mark.parametrize("args, fragment", [
    (["alibi"], "VARIANT"),
    (["--seeds", "one"], "--seeds"),
    (["--beyond", "4-6"], "--beyond"),  # overlaps the trained 3-5
    (["--beyond", "20-90"], "max_len"),
    (["--heads", "3"], "heads"),  # 16 is not divisible by 3
])
def test_bad_lab_options_are_one_line_usage_errors(args, fragment):
    run = run_cli("lab", *SMALL, *args)
    assert fragment in assert_one_line_error(run)
    assert run.exit_code == 2


def test_ctrl_c_prints_the_runs_finished_so_far_and_exits_130(monkeypatch):
    import minitx.core.lab as lab

    real, calls = lab._Run.step_to, []

    def then_ctrl_c(self, step):
        calls.append(self.seed)
        if self.seed == 1:  # seed 0's two runs are done; Ctrl-C during seed 1's first step
            raise KeyboardInterrupt
        return real(self, step)

    monkeypatch.setattr(lab._Run, "step_to", then_ctrl_c)
    run = run_cli("lab", "baseline", "rms", *SMALL, "--seeds", "0,1", "--quiet")
    assert run.exit_code == 130
    assert "interrupted: 2 of 4 runs finished" in run.stderr
    lines = run.stdout.splitlines()
    split = next(i for i, line in enumerate(lines) if "beyond, by source length" in line)
    rows = [line for line in lines[:split] if line.startswith("│")]
    assert [row.split()[1] for row in rows] == ["baseline", "rms"]
    assert "seeds 0" in run.stdout and "0, 1" not in run.stdout
