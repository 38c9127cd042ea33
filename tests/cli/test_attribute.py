"""`minitx attribute`: a grid per source in the attention grid's shading, JSON with every step's
attribution (ig's delta and change), CSV and SVG files, sources from stdin, the agreement table,
and one line with exit 2 for what it cannot use."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.cli.conftest import assert_one_line_error, run_cli


def ok(*args: str, input: str | None = None):
    run = run_cli("attribute", *args, input=input, env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    return run


def test_the_grid_has_a_row_per_output_token_and_a_column_per_source_token():
    out = ok("reverse", "3 1 4 1 5", "--method", "occlusion", "--numbers").stdout
    lines = out.splitlines()
    assert "prediction  5 1 4 1 3" in out and "occlusion" in out
    header = next(i for i, line in enumerate(lines) if line.split() == ["3", "1", "4", "1", "5"])
    rows = lines[header + 1: header + 7]
    assert [row.split()[0] for row in rows] == ["5", "1", "4", "1", "3", "<eos>"]
    # each digit step's largest share is on the mirrored source token, and the cells print shares
    for step, row in enumerate(rows[:5]):
        shares = [float(cell) for cell in row.split()[1:]]
        assert max(range(5), key=shares.__getitem__) == 4 - step and max(shares) > 0.8, row
    # the first step's other cells are zero to the cell's two digits (a tiny negative prints -.0)
    assert rows[0].split()[-1] == "1.0" and all(abs(float(c)) < 0.05 for c in rows[0].split()[1:-1])
    assert max(len(line) for line in lines) <= 80


def test_json_gives_every_step_its_attribution_over_the_source_tokens_and_ig_its_gap():
    data = json.loads(ok("reverse", "3 1 4 1 5", "2 7 1 8", "--json").stdout)
    assert data["method"] == "ig" and len(data["results"]) == 2
    first = data["results"][0]
    assert first["source_tokens"] == ["3", "1", "4", "1", "5"] and first["prediction"] == "5 1 4 1 3"
    assert [s["text"] for s in first["steps"]] == ["5", "1", "4", "1", "3", "<eos>"]
    for step in first["steps"]:
        assert len(step["attribution"]) == 5
        assert abs(sum(step["attribution"]) - step["change"] - step["delta"]) < 1e-4  # the gap as defined
    assert [s["token"] for s in data["results"][1]["steps"]] == [8, 1, 7, 2, 12]


def test_sources_come_from_stdin_and_the_csv_and_svg_are_written(tmp_path):
    table, picture = tmp_path / "a.csv", tmp_path / "a.svg"
    run = ok("copy", "-", "--method", "ixg", "--csv", str(table), "--svg", str(picture), "--json",
             input="3 1 4 1\n2 7 1 8 2\n")
    results = json.loads(run.stdout)["results"]
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert len(rows) == 4 * 5 + 5 * 6  # (steps with EOS) x source tokens, for each source
    assert {r["source"] for r in rows} == {"3 1 4 1", "2 7 1 8 2"}
    assert float(rows[0]["attribution"]) == pytest.approx(results[0]["steps"][0]["attribution"][0], abs=1e-6)
    assert picture.read_text().startswith("<svg") and "prediction" in picture.read_text()


def test_a_contrast_target_changes_what_is_attributed():
    plain = json.loads(ok("reverse", "3 1 4 1 5", "--method", "occlusion", "--json").stdout)["results"][0]
    contrast = json.loads(ok("reverse", "3 1 4 1 5", "--method", "occlusion", "--target", "9",
                             "--json").stdout)["results"][0]
    assert contrast["target"] == "9" and "log p(9)" in contrast["description"]
    assert contrast["steps"][0]["attribution"] != plain["steps"][0]["attribution"]


def test_the_agreement_table_has_every_head_the_reference_and_the_task(capsys):
    data = json.loads(ok("reverse", "--agreement", "--method", "occlusion", "--n", "4", "--json").stdout)
    names = [row["name"] for row in data["rows"]]
    assert len(names) == 8 + 2 + 1 and "cross:L2.H4" in names and names[-1] == "rollout"
    assert data["reference"]["argmax"] == 1.0 and data["expected"]["occlusion"]["steps"] > 0
    text = ok("reverse", "--agreement", "--method", "occlusion", "--n", "4").stdout
    assert "argmax L2" in text and "rank ρ L1" in text and "attention rollout" in text and "task" in text


@pytest.mark.parametrize(("args", "says"), [
    (["--method", "saliency"], "'--method'"),
    (["--target", "x"], "'x' is not a token this model outputs"),
    (["--ig-steps", "0"], "'--ig-steps'"),
    (["--method", "attention", "--attention", "L3"], "layers 1-2"),
    (["--occlude-with", "unk"], "no <unk>"),
], ids=["method", "target", "ig-steps", "attention row", "no unk"])
def test_what_it_cannot_use_is_one_line_and_exit_2(args, says):
    run = run_cli("attribute", "reverse", "3 1 4", *args)
    assert run.exit_code == 2 and says in assert_one_line_error(run)


@pytest.mark.parametrize("flag", ["--svg", "--csv"])
def test_an_output_file_that_cannot_be_written_is_one_line_before_any_work(flag, monkeypatch, tmp_path):
    from minitx.tui.cli.commands import attribute

    loaded = lambda *args: pytest.fail("the model was loaded")  # noqa: E731
    monkeypatch.setattr(attribute, "checkpoint_and_sources", loaded)
    run = run_cli("attribute", "reverse", "3 1 4", flag, str(tmp_path / "missing" / "x.svg"))
    assert run.exit_code == 2
    assert "does not exist" in assert_one_line_error(run) and not (tmp_path / "missing").exists()


class Recorded:
    """tui/cli/progress.py's Progress, keeping each stage and update (interrupt: Ctrl-C at that update)."""

    calls: list = []
    interrupt: tuple | None = None

    def __init__(self, *args, **kwargs) -> None:
        self.description = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def stage(self, description: str, total: int | None = None) -> None:
        self.description = description

    def update(self, done: int, total: int | None = None, description: str | None = None) -> None:
        Recorded.calls.append((self.description, done, total))
        if (self.description, done) == Recorded.interrupt:
            raise KeyboardInterrupt


def test_progress_moves_with_each_step_decoded_and_attributed_and_ctrl_c_is_one_line_exit_130(monkeypatch):
    from minitx.core.interp import source_attribution
    from minitx.tui.cli.commands import attribute

    monkeypatch.setattr(attribute, "Progress", Recorded)
    monkeypatch.setattr(source_attribution, "BATCH_FLOATS", 1)  # one row a batch, as a big model's
    monkeypatch.setattr(Recorded, "calls", [])
    ok("reverse", "3 1 4 1 5", "--method", "ixg")
    decoding = [(done, total) for stage, done, total in Recorded.calls if stage.startswith("decoding")]
    attributing = [(done, total) for stage, done, total in Recorded.calls
                   if stage == "ixg of the source: steps"]
    assert [done for done, _ in decoding] == [1, 2, 3, 4, 5, 6]  # the sixth step is <eos>
    assert attributing == [(step, 6) for step in range(7)]  # 0 of 6, then each step
    monkeypatch.setattr(Recorded, "interrupt", ("ixg of the source: steps", 3))
    run = run_cli("attribute", "reverse", "3 1 4 1 5", "--method", "ixg")
    assert run.exit_code == 130 and run.stderr.strip() == "Interrupted."
