"""Small things a newcomer met: a missing or mistyped checkpoint said at once (before torch loads,
with "did you mean" for a near bundled name), a checkpoint name the pickers would not list
refused, a trace refused to a terminal, grids that say which attention they draw, counts in the
singular, the space mark only where a space can be a token, and lines broken between fields."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.conftest import TINY, assert_one_line_error, run_cli

NOT_THERE = "nope/missing.safetensors"


@pytest.mark.parametrize("args", [
    ["eval", NOT_THERE], ["inspect", NOT_THERE], ["doctor", NOT_THERE], ["heads", "revers"],
    ["compare", "reverse", NOT_THERE], ["decode", NOT_THERE, "3 1 4"], ["lens", "revers", "3 1 4"],
    ["export", NOT_THERE, "--trace", "3 1 4"], ["circuit", "revers"], ["patch", NOT_THERE],
])
def test_a_checkpoint_that_is_not_there_is_said_before_torch_is_imported(args):
    code = ("import sys\nfrom minitx.tui.cli.main import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit as e:\n"
            "    print(e.code, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["2", "False"], (done.stdout, done.stderr)
    [line] = done.stderr.splitlines()
    assert "no such file" in line or "did you mean 'reverse'?" in line, line


def test_a_mistyped_bundled_name_gets_did_you_mean_as_a_mistyped_command_does():
    for args in (["eval", "revers"], ["decode", "revers"], ["inspect", "reverse-no-shfit"]):
        message = assert_one_line_error(run_cli(*args))
        assert "did you mean" in message, message
    assert "did you mean 'reverse-no-shift'?" in assert_one_line_error(run_cli("inspect", "reverse-no-shfit"))
    far = assert_one_line_error(run_cli("eval", "xyzzy"))
    assert "did you mean" not in far and "reverse" in far  # nothing close: the bundled names listed


def test_train_and_export_refuse_a_checkpoint_name_the_pickers_would_not_list(tmp_path, tiny_ckpt):
    out = tmp_path / "x.txt"
    run = run_cli("train", *TINY, "--steps", "2", "--out", str(out))
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "--out" in message and "x.safetensors" in message
    assert not out.exists()
    message = assert_one_line_error(run_cli("export", tiny_ckpt, "--out", str(tmp_path / "small.bin")))
    assert "ends in .safetensors" in message


def test_a_trace_to_a_terminal_asks_for_a_file_and_piped_it_is_written(monkeypatch):
    """In a terminal a trace without --out would be hundreds of lines of JSON: refused in one
    line; into a pipe it is the data, as before."""
    from minitx.tui.cli.commands import export

    class OnATerminal:  # what the command asks of sys: is its output a terminal?
        stdout = type("Terminal", (), {"isatty": staticmethod(lambda: True)})()

    with monkeypatch.context() as terminal:
        terminal.setattr(export, "sys", OnATerminal)
        refused = run_cli("export", "reverse", "--trace", "3 1 4")
    assert refused.exit_code == 2 and "give --out FILE" in assert_one_line_error(refused)
    piped = run_cli("export", "reverse", "--trace", "3 1 4")
    assert piped.exit_code == 0 and piped.stdout.lstrip().startswith("{")


def test_the_attention_grids_say_which_attention_they_draw(tiny_ckpt):
    run = run_cli("decode", tiny_ckpt, "3 1 4", "--attention")
    assert run.exit_code == 0 and "cross L1 H1" in run.stdout and "cross L1 H2" in run.stdout


def test_a_single_step_is_one_step(tmp_path):
    run = run_cli("lab", "baseline", "--steps", "1", "--seeds", "0", "--d-model", "16", "--heads", "2",
                  "--layers", "1", "--eval-size", "10", "--eval-every", "1", "-q", "--threads", "1")
    assert run.exit_code == 0, run.stderr
    assert "1 step," in run.stdout and "1 steps" not in run.stdout and "every 1 step;" in run.stdout


def test_the_space_mark_is_explained_only_for_a_model_of_characters():
    assert "(␣ is a space)" in run_cli("inspect", "dates").stdout.replace("\n", " ")
    assert "(␣ is a space)" not in run_cli("inspect", "reverse").stdout


def test_the_probe_source_option_takes_any_task_s_source():
    shown = run_cli("train", "--help").stdout
    assert "--probe, --probe-source TEXT" in shown and "DIGITS" not in shown


def test_at_80_columns_train_s_last_lines_break_between_fields(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = "a-rather-long-name-for-the-file-of-this-run.safetensors"
    run = run_cli("train", *[a for a in TINY if a != "--quiet"], "--steps", "2", "--out", str(out),
                  env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    tail = run.stdout.splitlines()[-3:]
    assert all(len(line) <= 80 for line in tail), tail
    assert tail[-1] == "resumable; `minitx export` makes a copy to share" and tail[-2].endswith(" ·")
    assert not any(line.strip() in (")", "") for line in tail)
