"""The command line as a whole: help with examples, fast start, env vars, the app entry points."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from minitx.tui.cli.main import main
from tests.cli.conftest import assert_one_line_error, run_cli

COMMANDS = sorted(main.commands)  # every command, so a new one is checked too


def test_the_commands_a_newcomer_is_told_about_exist():
    assert {"train", "decode", "eval", "inspect", "export", "list", "tui", "heads", "patch", "lens",
            "compare", "doctor", "curves", "lab"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_shows_an_example(command):
    run = run_cli(command, "--help")
    assert run.exit_code == 0
    assert "Example" in run.stdout
    assert f"minitx {command}" in run.stdout or "minitx-tui" in run.stdout


@pytest.mark.parametrize("command", [[]] + [[c] for c in COMMANDS], ids=["minitx"] + COMMANDS)
def test_help_fits_80_columns_piped_without_trailing_spaces(command):
    """An example line Click cannot wrap (they are kept verbatim) must fit by itself; a terminal
    would otherwise break it mid-word."""
    run = run_cli(*command, "--help", env={"COLUMNS": "80"})
    assert run.exit_code == 0
    for line in run.stdout.splitlines():
        assert len(line) <= 80 and line == line.rstrip(), line


def test_every_option_says_what_it_does():
    undocumented = [f"{name} {param.opts[0]}" for name, command in main.commands.items()
                    for param in command.params
                    if isinstance(param, click.Option) and not param.help]
    assert undocumented == []


def test_group_help_lists_every_command():
    run = run_cli("--help")
    assert run.exit_code == 0
    for command in COMMANDS:
        assert command in run.stdout


def test_top_level_help_does_not_import_torch():
    code = (
        "import sys\nfrom minitx.tui.cli.main import main\n"
        "assert 'torch' not in sys.modules, 'torch imported by the CLI module'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_command_is_a_one_line_error():
    assert "nope" in assert_one_line_error(run_cli("nope"))


def test_options_can_come_from_minitx_environment_variables(tiny_ckpt):
    run = run_cli(
        "eval", tiny_ckpt, "--json", env={"MINITX_EVAL_N": "7", "MINITX_EVAL_LENGTHS": "4-5"}
    )
    assert run.exit_code == 0, run.stderr
    import json

    data = json.loads(run.stdout)
    assert data["n"] == 7 and data["lengths"] == [4, 5]


class _FakeApp:
    opened: list = []
    return_code = 0  # what the app ends with (2: a checkpoint it was given did not open)

    def __init__(self, checkpoints, exit_on_start_error=False):
        self.checkpoints = checkpoints
        assert exit_on_start_error  # from the command line, a checkpoint must open or it is an error

    def run(self):
        _FakeApp.opened.append(self.checkpoints)


@pytest.fixture
def fake_app(monkeypatch):
    import minitx.tui.app.main

    _FakeApp.opened = []
    monkeypatch.setattr(minitx.tui.app.main, "create_app", _FakeApp)
    return _FakeApp


def test_tui_subcommand_opens_the_app_on_the_given_checkpoints(fake_app, tmp_path):
    mine = tmp_path / "x.safetensors"
    mine.touch()  # a file: the app opens it (a name that is nothing is refused before the app)
    assert run_cli("tui", "reverse", str(mine)).exit_code == 0
    assert run_cli("tui").exit_code == 0
    assert fake_app.opened == [["reverse", str(mine)], None]


def test_minitx_tui_entry_point_opens_the_app(fake_app, monkeypatch):
    from minitx.tui.cli.main import tui_main

    monkeypatch.setattr(sys, "argv", ["minitx-tui", "copy"])
    with pytest.raises(SystemExit) as exit_info:
        tui_main()
    assert exit_info.value.code == 0
    assert fake_app.opened == [["copy"]]


def test_the_app_takes_at_most_two_checkpoints_and_more_is_a_usage_error(fake_app):
    run = run_cli("tui", "reverse", "copy", "sort")
    assert run.exit_code == 2 and "got 3 checkpoints" in assert_one_line_error(run)
    assert fake_app.opened == []


def test_the_apps_return_code_is_the_commands_exit_code(fake_app, monkeypatch):
    monkeypatch.setattr(fake_app, "return_code", 2)
    assert run_cli("tui", "nosuch").exit_code == 2


def test_tui_without_the_app_module_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "minitx.tui.app.main", None)  # makes `import minitx.tui.app.main` fail
    assert "terminal app" in assert_one_line_error(run_cli("tui"))


def test_every_option_reads_the_environment_variable_named_after_its_flag():
    from minitx.tui.cli.main import main

    checked = 0
    for name, command in main.commands.items():
        for param in command.params:
            longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
            if not longs or longs[0] == "--help":
                continue
            assert param.envvar == f"MINITX_{name.upper()}_{longs[0][2:].upper().replace('-', '_')}"
            checked += 1
    assert checked > 60  # every command's options, not a few


@pytest.mark.parametrize("command, variable", [("decode", "MINITX_DECODE_JSON"),
                                               ("eval", "MINITX_EVAL_JSON"),
                                               ("list", "MINITX_LIST_JSON")])
def test_json_can_be_asked_for_with_the_documented_variable(command, variable):
    import json

    args = [command, "3 1 4 1 5"] if command == "decode" else [command]
    if command == "eval":
        args += ["--n", "20"]
    run = run_cli(*args, env={variable: "1"})
    assert run.exit_code == 0, run.stderr
    json.loads(run.stdout)
