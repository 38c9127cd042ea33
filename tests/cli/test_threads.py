"""minitx's thread default (core/training/threads.py) reaches torch wherever torch runs: before torch loads
(the entry points), in every command that computes, and in the app's loader and training worker.
--threads overrides it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import minitx.core.training.threads as threads
from minitx.tui.cli.main import main
from tests.cli.conftest import TINY, run_cli

SMALL_LAB = ["--d-model", "16", "--heads", "2", "--layers", "1", "--lengths", "3-5",
             "--beyond", "7-8", "--steps", "2", "--eval-every", "2", "--eval-size", "10",
             "--seeds", "0", "--quiet"]
# Every command that takes --threads (a test below checks none is missing), run on a checkpoint
# that cannot be read: the thread count must be set before any torch work, so even a run that then
# fails on its input has set it. (A file that is not there is said before torch loads at all.)
MISSING = "broken.safetensors"
COMMANDS = {
    "align": ["align", MISSING, "pairs.tsv"],
    "attribute": ["attribute", MISSING, "1 2 3"],
    "circuit": ["circuit", MISSING],
    "compare": ["compare", MISSING, "reverse"],
    "decode": ["decode", MISSING, "1 2 3"],
    "doctor": ["doctor", MISSING, "--quick"],
    "eval": ["eval", MISSING],
    "heads": ["heads", MISSING],
    "lab": ["lab", "no-such-variant", *SMALL_LAB],
    "lens": ["lens", MISSING, "1 2 3"],
    "patch": ["patch", MISSING],
    "train": ["train", "--resume", MISSING],
}


@pytest.fixture
def default_of_two(monkeypatch):
    """minitx's default made 2 (the suite runs on 1), and torch put back to 1 afterwards."""
    monkeypatch.setattr(threads, "default_threads", lambda: 2)
    yield
    torch.set_num_threads(1)


def test_every_command_with_a_threads_option_has_a_run_here():
    with_threads = {name for name, command in main.commands.items()
                    if any(p.name == "threads" for p in command.params)}
    assert with_threads == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_without_threads_sets_torch_to_the_default_before_any_work(name, default_of_two,
                                                                              tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / MISSING).write_bytes(b"not a checkpoint")
    run = run_cli(*COMMANDS[name])
    assert run.exit_code == 2, run.stderr  # the input's fault, after the threads were set
    assert torch.get_num_threads() == 2


def test_a_whole_run_keeps_the_default_it_set(default_of_two, tmp_path):
    run = run_cli("train", *TINY, "--steps", "2", "--out", str(tmp_path / "t.safetensors"))
    assert run.exit_code == 0, run.stderr
    assert torch.get_num_threads() == 2


def test_threads_overrides_the_default(default_of_two):
    run = run_cli("eval", "reverse", "--n", "10", "--threads", "1")
    assert run.exit_code == 0, run.stderr
    assert torch.get_num_threads() == 1


def test_the_default_is_every_core_but_one_and_at_least_one(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for cores, expected in ((1, 1), (2, 1), (16, 15)):
        monkeypatch.setattr(threads, "usable_cores", lambda cores=cores: cores)
        assert threads.default_threads() == expected


def test_a_persons_omp_num_threads_is_the_default(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.default_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")  # not a count: the rule applies
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    assert threads.default_threads() == 3


def test_the_environment_is_prepared_without_overriding_a_persons_settings():
    env = {}
    threads.prepare_environment(env)
    assert env == {"OMP_NUM_THREADS": str(threads.cores_but_one()), "OMP_WAIT_POLICY": "PASSIVE"}
    env = {"OMP_NUM_THREADS": "5", "OMP_WAIT_POLICY": "ACTIVE"}
    threads.prepare_environment(env)
    assert env == {"OMP_NUM_THREADS": "5", "OMP_WAIT_POLICY": "ACTIVE"}


@pytest.mark.slow  # tier 2: a whole process
def test_the_entry_point_sets_torchs_threads_before_torch_loads():
    """A fresh process: importing the CLI (what `minitx` and `minitx-tui` run first) before
    torch gives torch minitx's default from its very first operation."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    code = ("import os, minitx.tui.cli.main, torch; "
            "print(torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(threads.cores_but_one()), "PASSIVE"]


def test_the_apps_training_worker_applies_the_default(default_of_two, tmp_path, tiny_model_cfg,
                                                      tiny_train_cfg):
    from minitx.tui.app.training import TrainingRun

    seen = []
    run = TrainingRun(1, tiny_model_cfg, tiny_train_cfg.replace(steps=2), tmp_path / "run.safetensors",
                      seen.append)
    run.train(lambda: False)
    assert torch.get_num_threads() == 2
    assert type(seen[-1]).__name__ == "RunEnded"
