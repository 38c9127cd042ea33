"""Progress of the long commands (tui/cli/progress.py): a bar on a terminal that goes when the work
is done, plain lines on stderr when piped (here: CliRunner's captured stderr), nothing with
--json or --quiet, and the command's own output unchanged either way."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from minitx.tui.cli import progress as progress_module
from minitx.tui.cli.progress import Progress
from tests.cli.conftest import run_cli

SMALL_LAB = ["--d-model", "16", "--heads", "2", "--layers", "1", "--lengths", "3-5", "--beyond", "7-8",
             "--steps", "4", "--eval-every", "2", "--eval-size", "10", "--seeds", "0", "--threads", "1"]
COMMANDS = {  # command -> (arguments on the tiny checkpoint, what its progress says)
    "heads": (["--n", "20"], "ablating each head on 20 fresh sequences"),
    "circuit": (["--n-pairs", "4", "--n", "20"], "exact match"),
    "patch": (["--method", "exact"], "patching one activation at a time"),
    "eval": (["--n", "40"], "decoding 40 fresh sequences"),
    "decode": (["3 1 4 1", "2 7 1 8"], "decoding source 2 of 2, step"),  # per source and per step
}


@pytest.fixture
def every_moment(monkeypatch):
    """Plain lines from the first moment on, then every 10 ms: a fast test command prints them."""
    monkeypatch.setattr(progress_module, "PLAIN_AFTER", 0.0)
    monkeypatch.setattr(progress_module, "PLAIN_EVERY", 0.01)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_long_command_piped_prints_plain_progress_lines_on_stderr_and_a_last_one(
        tiny_ckpt, every_moment, command):
    args, says = COMMANDS[command]
    run = run_cli(command, tiny_ckpt, *args, "--threads", "1")
    assert run.exit_code in (0, 1), run.stderr  # doctor: 1 when a check fails (a 30-step model)
    lines = run.stderr.splitlines()
    assert lines and all(line.startswith(f"{command}: ") and line.endswith(" s") for line in lines), lines
    assert lines[-1].startswith(f"{command}: {says}") and "done in" in lines[-1], lines
    assert "━" not in run.stdout + run.stderr  # no bar where there is no terminal


def test_piped_the_doctor_s_rows_are_its_progress_and_no_plain_line_repeats_them(tiny_ckpt, every_moment):
    run = run_cli("doctor", tiny_ckpt, "--quick", "--threads", "1")
    assert run.exit_code in (0, 1) and run.stderr == "", run.stderr  # 1: a check fails (a 30-step model)
    assert "initial-loss" in run.stdout and "source-dependence" in run.stdout  # a row per check


def test_a_plain_line_says_something_new_or_nothing(every_moment, capsys):
    """A captured log of a long stage with no count to move gets one line for it, not one per
    heartbeat, then the last one."""
    import time

    with Progress("circuit", console=Console(file=io.StringIO())) as progress:
        progress.stage("finding the circuit")
        time.sleep(0.2)  # twenty heartbeats
        progress.update(1, 3)
        time.sleep(0.1)
    lines = capsys.readouterr().err.splitlines()
    said = "circuit: finding the circuit"
    assert [line.rsplit(" · ", 1)[0] for line in lines] == [said, f"{said} 1/3", f"{said} 1/3"]
    assert "done in" in lines[-1]


def test_lab_progress_names_the_seed_and_its_finished_runs(every_moment):
    run = run_cli("lab", "baseline", "rms", *SMALL_LAB)
    assert run.exit_code == 0, run.stderr
    lines = run.stderr.splitlines()
    assert any(line.startswith("lab: seed 0 (2 variants in turn) ") and "/4 · " in line for line in lines)
    assert [line.split(":")[0] for line in lines if line.startswith("[")] == [
        "[1/2] seed 0 baseline", "[2/2] seed 0 rms"]


@pytest.mark.parametrize("command, args", [
    ("heads", ["--n", "20", "--json"]),
    ("patch", ["--json"]),
    ("eval", ["--n", "40", "--json"]),
    ("compare", ["--n", "20", "--json"]),
])
def test_json_output_comes_with_no_progress_at_all(tiny_ckpt, every_moment, command, args):
    targets = [tiny_ckpt, tiny_ckpt] if command == "compare" else [tiny_ckpt]
    run = run_cli(command, *targets, *args, "--threads", "1")
    assert run.exit_code == 0, run.stderr
    assert run.stderr == ""
    json.loads(run.stdout)


def test_quiet_lab_prints_no_progress(every_moment):
    run = run_cli("lab", "baseline", *SMALL_LAB, "--quiet")
    assert run.exit_code == 0 and run.stderr == ""


def test_a_quick_command_prints_no_plain_lines_at_all(tiny_ckpt):
    run = run_cli("heads", tiny_ckpt, "--n", "10", "--threads", "1")  # well under PLAIN_AFTER
    assert run.exit_code == 0 and run.stderr == ""


def test_on_a_terminal_the_bar_shows_the_stage_and_count_then_goes():
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=80, color_system=None)
    with Progress("heads", console=terminal) as progress:
        assert progress.mode == "bar"
        progress.stage("ablating heads", 4)
        for done in range(1, 4):
            progress.update(done)
        progress.bar.refresh()
        drawn = screen.getvalue()
        progress.print("a line worth keeping")
    assert "heads ablating heads" in drawn and "3/4" in drawn and "━" in drawn
    assert "a line worth keeping" in screen.getvalue()
    tail = screen.getvalue().split("a line worth keeping")[-1]
    assert tail.endswith("\x1b[1A\x1b[2K") and "\x1b[?25h" in tail  # the bar erased, the cursor back


def test_off_prints_nothing_even_its_kept_lines(capsys):
    with Progress("lab", enabled=False) as progress:
        progress.stage("seed 0", 10)
        progress.update(5)
        progress.print("[1/1] seed 0 baseline: ...")
    assert capsys.readouterr() == ("", "")
