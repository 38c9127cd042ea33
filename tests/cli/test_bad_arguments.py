"""A checkpoint, file or folder that cannot be found or read is a usage error in every command:
exit code 2 and one line naming it, the same whichever command was given it."""

from __future__ import annotations

import pytest

from tests.cli.conftest import assert_one_line_error, run_cli

# Each command with its checkpoint argument replaced by {}: what a newcomer would type.
WITH_A_CHECKPOINT = {
    "eval": ["eval", "{}", "--n", "5"],
    "decode": ["decode", "{}", "1 2 3"],
    "doctor": ["doctor", "{}", "--quick"],
    "inspect": ["inspect", "{}"],
    "compare (A)": ["compare", "{}", "reverse", "--n", "5"],
    "compare (B)": ["compare", "reverse", "{}", "--n", "5"],
    "export": ["export", "{}", "--out", "never-written.safetensors"],
    "heads": ["heads", "{}", "--n", "5"],
    "align": ["align", "{}", "pairs.tsv"],  # the checkpoint is read before the pairs
    "patch": ["patch", "{}", "--clean", "1 2 3", "--corrupt", "3 2 1"],
    "circuit": ["circuit", "{}", "--n-pairs", "2", "--n", "5"],
    "lens": ["lens", "{}", "1 2 3"],
    "attribute": ["attribute", "{}", "1 2 3"],
    "curves": ["curves", "{}"],
    "train --resume": ["train", "--resume", "{}", "--steps", "1"],
    # --host: were the checkpoint let through, the host is refused (exit 2) before it would serve
    "serve": ["serve", "{}", "--host", "0.0.0.0"],
}


def _with(args: list[str], name: str) -> list[str]:
    return [name if a == "{}" else a for a in args]


@pytest.mark.parametrize("args", WITH_A_CHECKPOINT.values(), ids=WITH_A_CHECKPOINT.keys())
def test_an_unknown_checkpoint_name_exits_2_with_one_line_naming_it(args):
    run = run_cli(*_with(args, "nosuch"))
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "unknown checkpoint 'nosuch'" in message, message


@pytest.mark.parametrize("args", WITH_A_CHECKPOINT.values(), ids=WITH_A_CHECKPOINT.keys())
def test_a_missing_or_corrupt_checkpoint_file_exits_2(args, tmp_path):
    missing = tmp_path / "gone.safetensors"
    run = run_cli(*_with(args, str(missing)))
    assert run.exit_code == 2 and "no such file" in assert_one_line_error(run)
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    run = run_cli(*_with(args, str(corrupt)))
    assert run.exit_code == 2 and "corrupt.safetensors" in assert_one_line_error(run)


def test_every_command_taking_a_checkpoint_is_checked_above():
    """A new command with a CKPT argument joins WITH_A_CHECKPOINT, or this fails."""
    import click

    from minitx.tui.cli.main import main

    checked = {args[0] for args in WITH_A_CHECKPOINT.values()} - {"train"}  # an option, not a CKPT
    taking = {"compare"}  # its A and B are checkpoints, named so in its help
    for name, command in main.commands.items():
        usage = " ".join(command.collect_usage_pieces(click.Context(command, info_name=name)))
        if "CKPT" in usage and name != "tui":  # the app reports a bad file inside itself
            taking.add(name)
    assert taking == checked


def test_a_missing_metrics_file_exits_2():
    run = run_cli("curves", "no-such-run.jsonl")
    assert run.exit_code == 2 and "no-such-run.jsonl" in assert_one_line_error(run)


@pytest.mark.parametrize("folder", ["no-such-folder", "README.md"])
def test_list_of_a_folder_that_is_not_one_exits_2(folder):
    run = run_cli("list", folder)
    assert run.exit_code == 2 and folder in assert_one_line_error(run)


def test_a_bad_value_from_the_environment_names_the_variable_not_the_option():
    run = run_cli("train", "--quiet", env={"MINITX_TRAIN_STEPS": "abc"})
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "MINITX_TRAIN_STEPS" in message and "'abc'" in message


def test_a_checkpoint_alone_where_a_source_belongs_says_what_is_missing():
    run = run_cli("lens", "dates")
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "'dates' is a checkpoint" in message and "SOURCE" in message


def test_a_setting_core_refuses_in_a_run_names_its_option(tmp_path):
    pairs = tmp_path / "rev.tsv"
    pairs.write_text("ab\tba\n" * 300)
    run = run_cli("train", "--data", str(pairs), "--steps", "1", "--probe-source", "hello", "-q",
                  "--out", str(tmp_path / "r.safetensors"))
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "--probe-source" in message and "probe_source" not in message


@pytest.mark.parametrize("args", [["train", "--data", "{}", "--steps", "1"],
                                  ["eval", "reverse", "--data", "{}"],
                                  ["train", "--data", "{}", "--valid", "{}", "--steps", "1"]],
                         ids=["train --data", "eval --data", "train --valid"])
def test_a_folder_given_as_a_data_file_exits_2_naming_it_as_the_data_docs_say(args, tmp_path):
    folder = tmp_path / "pairs"
    folder.mkdir()
    run = run_cli(*_with(args, str(folder)))
    assert run.exit_code == 2
    assert assert_one_line_error(run) == f"Error: {folder} is a directory, not a data file"
