"""Fixtures for the command-line tests: a CliRunner helper and one tiny trained checkpoint.

Everything runs in-process (CliRunner), with one torch thread: on a busy 2-core machine the
default thread count makes tiny models orders of magnitude slower.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from minitx.tui.cli.main import main

# A model small enough to train in about a second; the options every training test shares.
TINY = [
    "--d-model",
    "16",
    "--heads",
    "2",
    "--layers",
    "1",
    "--d-ff",
    "32",
    "--batch-size",
    "16",
    "--warmup",
    "5",
    "--lengths",
    "3-6",
    "--eval-every",
    "0",
    "--eval-size",
    "20",
    "--device",
    "cpu",
    "--quiet",
]


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_cli(*args: str, input: str | None = None, env: dict | None = None) -> Run:
    result = CliRunner().invoke(main, list(args), input=input, env=env, catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


def assert_one_line_error(run: Run) -> str:
    """The contract for every bad input: non-zero exit, one line on stderr, no traceback."""
    assert run.exit_code != 0, run.stdout
    assert len(run.error_lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert run.error_lines[0].startswith("Error: ")
    return run.error_lines[0]


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory) -> str:
    """A resumable 30-step checkpoint of the reverse task (it decodes badly, which is fine)."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.safetensors"
    run = run_cli("train", *TINY, "--steps", "30", "--out", str(path))
    assert run.exit_code == 0, run.stderr
    return str(path)
