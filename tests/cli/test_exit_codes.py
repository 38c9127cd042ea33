"""One rule for every command's exit status: 2 when the input is to blame (an option, a source, a
data file, a checkpoint or path a person named), 1 when the work failed on its own; always one
line on stderr."""

from __future__ import annotations

import pytest

from tests.cli.conftest import TINY, assert_one_line_error, run_cli

DATA_TINY = [a for i, a in enumerate(TINY) if a != "--lengths" and TINY[i - 1] != "--lengths"]


@pytest.fixture(scope="module")
def names_model(tmp_path_factory):
    """A model of a data file of names (its own character vocabulary)."""
    folder = tmp_path_factory.mktemp("names")
    pairs = folder / "names.tsv"
    first = "Ada Bo Cy Di Ed Fay Gus Hal Ivy Jo Kim Lee Max Ned Ola".split()
    last = "Kay Lu Moe Ng Oz Pim Quy Rex Sol Tam Uma Vik Wes Xi Yu".split()
    pairs.write_text("".join(f"{f} {g}\t{g}, {f}\n" for f in first for g in last))  # no digit anywhere
    out = folder / "names.safetensors"
    run = run_cli("train", *DATA_TINY, "--data", str(pairs), "--steps", "2", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    return out


def test_resuming_with_a_setting_a_run_may_not_change_exits_2(tiny_ckpt):
    run = run_cli("train", "--resume", tiny_ckpt, "--steps", "40", "--lr", "0.01")
    assert run.exit_code == 2 and "lr" in assert_one_line_error(run)


def test_resuming_an_exported_file_exits_2():
    run = run_cli("train", "--resume", "reverse", "--steps", "4000")
    assert run.exit_code == 2 and "cannot be resumed" in assert_one_line_error(run)


def test_resuming_a_data_run_without_its_data_file_exits_2(names_model, tmp_path):
    other = tmp_path / "other.tsv"
    other.write_text("a\tb\n" * 300)
    run = run_cli("train", "--resume", str(names_model), "--steps", "10", "--data", str(other))
    assert run.exit_code == 2 and "other data" in assert_one_line_error(run)


def test_a_trace_of_a_source_the_model_cannot_read_exits_2_like_decode(tmp_path):
    out = str(tmp_path / "t.json")
    assert run_cli("decode", "reverse", "3 a").exit_code == 2
    run = run_cli("export", "reverse", "--trace", "3 a", "--format", "json", "--out", out)
    assert run.exit_code == 2 and "'a'" in assert_one_line_error(run)


def test_cuda_without_a_gpu_exits_2_in_every_command_that_takes_a_device():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for args in (["decode", "reverse", "1 2", "--device", "cuda"],
                 ["eval", "reverse", "--n", "5", "--device", "cuda"],
                 ["train", *TINY, "--steps", "1", "--device", "cuda", "--out", "never.safetensors"]):
        run = run_cli(*args)
        assert run.exit_code == 2 and "cuda" in assert_one_line_error(run), args


def test_comparing_a_model_that_cannot_read_the_others_sources_exits_2(names_model):
    run = run_cli("compare", "reverse", str(names_model), "--n", "5")
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "cannot read A's sources" in message


def test_a_probe_source_outside_a_data_files_vocabulary_exits_2(tmp_path):
    pairs = tmp_path / "rev.tsv"
    pairs.write_text("".join(f"{i} {i + 1}\t{i + 1} {i}\n" for i in range(300)))
    run = run_cli("train", *DATA_TINY, "--data", str(pairs), "--steps", "1", "--probe-source", "hello",
                  "--out", str(tmp_path / "r.safetensors"))
    assert run.exit_code == 2 and assert_one_line_error(run)


def test_a_metrics_file_in_a_missing_folder_exits_2_before_training(tmp_path):
    run = run_cli("train", *TINY, "--steps", "1", "--metrics", "/nonexistent/m.jsonl",
                  "--out", str(tmp_path / "m.safetensors"))
    assert run.exit_code == 2 and "/nonexistent" in assert_one_line_error(run)
    assert not (tmp_path / "m.safetensors").exists()


@pytest.mark.parametrize(("error", "code"), [(FileNotFoundError(2, "No such file or directory", "x.tsv"), 2),
                                           (OSError(28, "No space left on device", "out.bin"), 1)])
def test_a_file_error_of_any_command_is_one_line_in_words_with_the_rules_exit_code(error, code):
    import click
    from click.testing import CliRunner

    from minitx.tui.cli.main import MinitxCommand

    @click.command(cls=MinitxCommand)
    def failing():
        raise error

    run = CliRunner().invoke(failing, [], standalone_mode=True)
    assert run.exit_code == code
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "[Errno" not in lines[0] and error.filename in lines[0], lines
