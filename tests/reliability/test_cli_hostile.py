"""Every `minitx` command that takes a checkpoint refuses every hostile file with one line.

The corpus is `tests/reliability/corpus.py`'s `hostile_files` (>100 generated files). `inspect` is
cheap, so it gets every case. The other commands get a rule-based sample: case i goes to the
commands whose index k satisfies i % STRIDE == k % STRIDE, so each command sees every STRIDE-th
case with its own offset and, together, they cover the whole corpus. Nothing is hand-picked.
Tier 1 runs inspect on every case; tier 2 the other commands on their sample too.
"""

from __future__ import annotations

import time

import pytest

from tests.cli.conftest import assert_one_line_error, run_cli
from tests.reliability.corpus import hostile_files, marker_path

PER_COMMAND_S = 5.0  # a refusal must be quick, even on a busy two-core machine
STRIDE = 3

# command name -> argv builder for a checkpoint path (out: a folder for files the command writes)
COMMANDS = {
    "decode": lambda p, out: ["decode", p, "3 1 4"],
    "eval": lambda p, out: ["eval", p, "--n", "5", "--threads", "1"],
    "export": lambda p, out: ["export", p, "--out", str(out / "exported.safetensors")],
    "export-trace": lambda p, out: ["export", p, "--trace", "3 1 4", "--format", "json"],
    "compare-a": lambda p, out: ["compare", p, "reverse", "--n", "5", "--threads", "1"],
    "compare-b": lambda p, out: ["compare", "reverse", p, "--n", "5", "--threads", "1"],
    "doctor": lambda p, out: ["doctor", p, "--quick", "--threads", "1"],
    "train-resume": lambda p, out: ["train", "--resume", p, "--steps", "5", "--eval-every", "0",
                                    "--device", "cpu", "--quiet",
                                    "--out", str(out / "resumed.safetensors")],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-cli")
    return folder, hostile_files(folder)


def _refused_in_one_line(args: list[str]) -> str:
    start = time.monotonic()
    run = run_cli(*args)
    took = time.monotonic() - start
    line = assert_one_line_error(run)  # non-zero exit, one stderr line, no traceback
    assert "MINITX_DEBUG" not in line, line  # the CLI's "unexpected Error" fallback: a bug
    assert took < PER_COMMAND_S, f"{args[0]} took {took:.1f} s"
    return line


@pytest.mark.slow  # tier 2: the sample the commands' test below takes
def test_the_corpus_is_large_and_the_sample_covers_every_case(corpus):
    _, cases = corpus
    assert len(cases) > 100
    offsets = {k % STRIDE for k in range(len(COMMANDS))}
    assert offsets == set(range(STRIDE))  # every residue, so every case meets some command


def test_inspect_refuses_every_hostile_file_with_one_line(corpus):
    folder, cases = corpus
    failures = []
    for name, path in cases:
        try:
            _refused_in_one_line(["inspect", str(path)])
        except AssertionError as e:
            failures.append(f"{name}: {str(e).splitlines()[0]}")
    assert not failures, "\n".join(failures)
    assert not marker_path(folder).exists()


@pytest.mark.slow  # tier 2: inspect's refusals are tier 1's
@pytest.mark.parametrize("stride", [STRIDE])  # every file of the corpus
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_taking_a_checkpoint_refuses_hostile_files_with_one_line(
        corpus, command, stride, tmp_path):
    folder, cases = corpus
    k = list(COMMANDS).index(command)
    sample = [(name, path) for i, (name, path) in enumerate(cases) if i % stride == k % stride]
    assert len(sample) >= len(cases) // stride
    failures = []
    for name, path in sample:
        try:
            _refused_in_one_line(COMMANDS[command](str(path), tmp_path))
        except AssertionError as e:
            failures.append(f"{name}: {str(e).splitlines()[0]}")
    assert not failures, "\n".join(failures)
    assert not marker_path(folder).exists()
    assert not list(tmp_path.glob("*.safetensors")), "a refused checkpoint still wrote a file"


def test_a_valid_checkpoint_passes_the_same_commands(corpus, tmp_path):
    """The control: the contract above is not met by refusing everything."""
    folder, _ = corpus
    good = str(folder / "base.safetensors")
    for command in ("decode", "eval", "export", "export-trace", "compare-a", "compare-b",
                    "train-resume"):
        run = run_cli(*COMMANDS[command](good, tmp_path))
        assert run.exit_code == 0, f"{command}: {run.stderr}"
    assert run_cli("inspect", good).exit_code == 0


# -- hostile sources ------------------------------------------------------------------------------

HOSTILE_SOURCES = {
    "non_digits": ("1 2 a", "not a token"),
    "special_token_names": ("<bos> 1 2 <eos>", ""),
    "pad_token": ("1 <pad> 2", ""),
    "unicode_digits": ("١ ٢ ٣", ""),
    "emoji": ("1 2 🙂", ""),
    "whitespace_only": ("   \t  ", ""),
    "ten_thousand_characters": ("7 " * 5000, ""),
    "too_long_for_the_model": (" ".join("5" * 70), "at most"),
    "negative": ("-1 2", ""),
    "control_characters": ("1\x00 2\x1b[31m", ""),
}

SOURCE_COMMANDS = {
    "decode": lambda s: ["decode", "reverse", s],
    "compare": lambda s: ["compare", "reverse", "reverse", "--source", s, "--n", "5",
                          "--threads", "1"],
    "export-trace": lambda s: ["export", "reverse", "--trace", s, "--format", "json"],
}


@pytest.mark.parametrize("command", list(SOURCE_COMMANDS))
@pytest.mark.parametrize("case", list(HOSTILE_SOURCES))
def test_hostile_sources_get_a_clear_one_line_message(command, case):
    text, fragment = HOSTILE_SOURCES[case]
    line = _refused_in_one_line(SOURCE_COMMANDS[command](text))
    assert fragment in line
    assert len(line) < 330  # a 10,000-character paste is not echoed back whole
    assert "\x1b" not in line and "\x00" not in line


def test_a_good_source_decodes_with_the_same_commands():
    for command, build in SOURCE_COMMANDS.items():
        run = run_cli(*build("3 1 4 1"))
        assert run.exit_code == 0, f"{command}: {run.stderr}"
