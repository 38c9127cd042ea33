"""Text output at 80 columns, piped: nothing cut, no line wider, fields never broken inside,
no spaces at line ends."""

from __future__ import annotations

import io

import pytest

from tests.cli.conftest import run_cli


def _assert_fits(text: str, width: int = 80) -> list[str]:
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    assert all(line == line.rstrip() for line in lines), [line for line in lines if line != line.rstrip()]
    assert "…" not in text
    return lines


@pytest.mark.slow  # tier 2: the doctor's text; eval's at 80 columns is tier 1's
def test_doctor_at_80_columns_shows_every_threshold_whole():
    import json

    run = run_cli("doctor", "reverse", "--quick", "--threads", "1", env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    lines = _assert_fits(run.stdout)
    header = next(i for i, line in enumerate(lines) if line.startswith("result"))
    start, end = lines[header].index("threshold"), lines[header].index("note")
    shown, current = {}, None  # check name -> its threshold column, continuation lines joined
    for line in lines[header + 1:]:
        if line[:7].strip() in ("pass", "FAIL", "skip"):
            current = line[7:start].split()[0]
            shown[current] = line[start:end].strip()
        elif current and line[:start].strip() == "" and line[start:end].strip():
            shown[current] += " " + line[start:end].strip()
        else:
            current = None
    data = json.loads(run_cli("doctor", "reverse", "--quick", "--threads", "1", "--json").stdout)
    assert shown == {c["name"]: c["threshold"] for c in data["checks"]}
    assert "and > 1e-03 with positions" in shown["permutation"]


@pytest.mark.parametrize("columns", [70, 75, 80, 90])
def test_inspect_header_breaks_between_fields(columns):
    run = run_cli("inspect", "reverse", env={"COLUMNS": str(columns)})
    assert run.exit_code == 0, run.stderr
    lines = _assert_fits(run.stdout, columns)
    from minitx import __version__

    for field in ("1.1 MB", "float32", "format v1", f"minitx {__version__}", "inference only",
                  "source lengths 4-10", "a trained model's cross-attention is anti-diagonal"):
        assert any(field in line for line in lines[:6]), (field, lines[:6])


def test_field_lines_never_splits_a_field_and_marks_each_break():
    from minitx.tui.cli.common import field_lines

    fields = ["/a/rather/long/path/to/reverse.safetensors", "947.4 KB", "float32", "format v1",
              "minitx 0.2.0", "inference only"]
    for width in range(45, 120):
        lines = field_lines(fields, width).plain.split("\n")
        assert all(len(line) <= width for line in lines), width
        assert [f for line in lines for f in line.removesuffix(" ·").split(" · ")] == fields
        assert all(line.endswith(" ·") for line in lines[:-1])


def test_no_trailing_spaces_holds_spaces_back_until_it_sees_what_follows():
    from minitx.tui.cli.common import NoTrailingSpaces

    out = io.StringIO()
    file = NoTrailingSpaces(out)
    for chunk in ["a  ", "  b   ", "\nc ", " d  \n", "   "]:
        file.write(chunk)
    assert out.getvalue() == "a    b\nc  d\n"


def test_eval_summary_breaks_before_what_it_was_measured_on_when_it_would_not_fit():
    narrow = run_cli("eval", "reverse", "--n", "1000", env={"COLUMNS": "80"})
    lines = _assert_fits(narrow.stdout)
    assert lines[0].startswith("reverse: exact match ") and lines[0].endswith("/1000)")  # 83 on one line
    assert lines[1] == "  on fresh sequences of length 4-10, seed 1234"
    wide = run_cli("eval", "reverse", "--n", "1000", env={"COLUMNS": "120"})
    assert wide.stdout.splitlines()[0] == f"{lines[0]} {lines[1].strip()}"
