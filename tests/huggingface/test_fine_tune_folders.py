"""`minitx train --init` on tiny Hugging Face folders (tests/huggingface/tiny_folders.py): what a
person does from the command line. The fine-tuned file keeps its base's record and tokenisers, so
it opens, decodes, shows its base and resumes with the folder gone; bad input fails in one line
with exit 2 and writes nothing; a short fine-tune learns a small task; and under torchrun two
processes on a CPU reach the weights one process reaches with the same pairs per step."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from minitx import checkpoints
from minitx.core.config import TrainConfig
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.core.training.trainer import Trainer
from minitx.tui.cli.main import main
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.tiny_folders import save_model

PAIRS = [("the cat", "die katze"), ("a red house", "ein rotes haus"), ("good morning", "guten morgen"),
         ("the dog", "der hund"), ("where is it", "wo ist es"), ("thank you", "danke"),
         ("blue sky", "blauer himmel"), ("old town", "alte stadt")]


def run(*args) -> tuple[int, str]:
    # wide enough that no path of pytest's folders is wrapped inside a word
    result = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "400"})
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def marian(tmp_path_factory) -> Path:
    return save_model(tmp_path_factory.mktemp("ft") / "marian", "marian")


def test_a_fine_tuned_file_opens_decodes_shows_its_base_and_resumes_without_the_folder(marian, tmp_path):
    folder = tmp_path / "opus-mt-tiny"
    shutil.copytree(marian, folder)
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    out = tmp_path / "ft.safetensors"
    code, text = run("train", "--init", folder, "--data", data, "--valid", data, "--steps", 2,
                     "--batch-size", 4, "--out", out, "--threads", 1, "--log-every", 1)
    assert code == 0, text
    assert f"fine-tuning {folder} (Marian" in text and "AdamW wd 0.01" in text and "lr 2e-05" in text
    assert "base -> fine-tuned (8 held-out pairs): loss " in text and "chrF: sacrebleu nrefs:1" in text
    base_scores = checkpoints.load(str(out)).summary["base_scores"]
    assert set(base_scores) >= {"loss", "bleu", "chrf", "accuracy"} and base_scores["loss"] > 0
    shutil.rmtree(folder)  # a machine without the base
    code, text = run("inspect", out)
    assert code == 0, text
    assert f"fine-tuned from {folder} (Marian; the base's weights: sha256" in " ".join(text.split())
    code, text = run("decode", out, "the cat")
    assert code == 0, text
    code, text = run("train", "--resume", out, "--steps", 3, "--data", data, "--valid", data, "--threads", 1,
                     "--quiet")
    assert code == 0, text
    resumed = checkpoints.load(str(out)).summary
    assert resumed["steps"] == 3 and resumed["base_scores"] == base_scores  # base -> fine-tuned goes on


@pytest.mark.parametrize("args, message", [
    (["--layers", "3"], "--layers cannot be combined with --init"),
    (["--d-model", "64"], "--d-model cannot be combined with --init"),
    (["--lr", "nan"], "--lr: must be a positive finite number"),
    (["--lr", "0"], "--lr: must be a positive finite number"),
    (["--accumulate", "0"], "'--accumulate': 0 is not in the range"),
])
def test_bad_options_beside_init_are_one_line_exit_2_and_nothing_written(marian, tmp_path, args, message):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    code, text = run("train", "--init", marian, "--data", data, "--out", tmp_path / "x.safetensors", *args)
    assert code == 2 and message in " ".join(text.split()), text
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.parametrize("content, message", [
    ("the cat\tЖЖЖ ЩЩ\nthe dog\tder hund\n", "line 1: every piece of the target is unknown"),
    ("the cat\tdie katze\nthe dog\n", "line 2: no tab"),
    ("the cat\t\n", "line 1: the target is empty"),
])
def test_bad_pairs_name_their_line_exit_2_and_nothing_written(marian, tmp_path, content, message):
    data = tmp_path / "bad.tsv"
    data.write_text(content, encoding="utf-8")
    code, text = run("train", "--init", marian, "--data", data, "--out", tmp_path / "x.safetensors")
    assert code == 2 and message in text, text
    assert not (tmp_path / "x.safetensors").exists()


def test_init_of_a_file_that_is_not_a_model_is_one_line(tmp_path):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    code, text = run("train", "--init", data, "--data", data, "--out", tmp_path / "x.safetensors")
    assert code == 2 and "--init:" in text and "not a safetensors file" in text, text
    assert not (tmp_path / "x.safetensors").exists()


def test_a_file_in_another_encoding_is_one_line(marian, tmp_path):
    data = tmp_path / "utf16.tsv"
    data.write_bytes("the cat\tdie katze\n".encode("utf-16"))
    code, text = run("train", "--init", marian, "--data", data, "--out", tmp_path / "x.safetensors")
    assert code == 2 and "line 1: not UTF-8 text" in text, text


@pytest.mark.slow
@pytest.mark.parametrize("family", ["marian", "t5", "bart"])
def test_a_short_fine_tune_of_a_tiny_folder_learns_its_pairs(family, tmp_path):
    folder = save_model(tmp_path / family, family)
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    base = checkpoints.load(str(folder))
    cfg = TrainConfig(task="data", data=str(data), valid=str(data), init=str(folder),
                      **{**fine_tune_defaults(family), "lr": 3e-3, "steps": 60, "batch_size": 8,
                         "eval_every": 0, "device": "cpu"})
    trainer = Trainer(base.model_config.replace(dropout=0.0), cfg, base=base)
    before = trainer.evaluate(len(PAIRS), 0).accuracy
    while not trainer.done:
        trainer.train_step()
    assert before == 0.0 and trainer.evaluate(len(PAIRS), 0).accuracy == 1.0


@pytest.mark.slow
def test_two_torchrun_processes_reach_one_process_accumulating_twice_and_resume_in_one(marian, tmp_path):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS * 2)
    common = ["--init", str(marian), "--data", str(data), "--valid", str(data), "--batch-size", "4",
              "--dropout", "0", "--lr", "1e-3", "--threads", "1", "--quiet", "--eval-every", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = tmp_path / "two.safetensors"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
    done = subprocess.run([*torchrun, "-m", "minitx", "train", *common, "--steps", "3", "--out", str(two)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    one = tmp_path / "one.safetensors"
    code, text = run("train", *common, "--accumulate", "2", "--steps", "3", "--out", one)
    assert code == 0, text
    a, b = checkpoints.load(str(two)).model, checkpoints.load(str(one)).model
    mine, theirs = dict(a.named_parameters()), dict(b.named_parameters())
    # a key bias's gradient is zero but for rounding, and Adam's step is lr x its sign: coin tosses
    compared = [n for n in mine if not n.endswith("k_proj.bias")]
    assert all(torch.allclose(mine[n], theirs[n], rtol=1e-5, atol=1e-6) for n in compared)
    # the file two processes saved goes on in one process, accumulating two micro-batches a step
    code, text = run("train", "--resume", two, "--steps", "4", "--data", data, "--valid", data,
                     "--threads", 1, "--quiet")
    assert code == 0, text
    assert checkpoints.load(str(two)).train_config.accumulate == 2


@pytest.mark.slow  # core's resume test is tier 1 (tests/core/test_fine_tune.py); this, the command's
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_a_fine_tune_stopped_by_a_signal_saves_and_resumes_to_the_uninterrupted_weights(
        marian, tmp_path, monkeypatch, late_signals_land_here, signum, code):
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    common = ["--init", marian, "--data", data, "--valid", data, "--batch-size", 4, "--steps", 4,
              "--threads", 1, "--quiet", "--eval-every", 0]
    straight, stopped = tmp_path / "straight.safetensors", tmp_path / "stopped.safetensors"
    assert run("train", *common, "--out", straight)[0] == 0
    original = Trainer.train_step

    def step_then_signal(self):
        stats = original(self)
        if stats.step == 2:
            os.kill(os.getpid(), signum)
        return stats

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", step_then_signal)
        assert run("train", *common, "--out", stopped)[0] == code
    assert checkpoints.load(str(stopped)).summary["steps"] == 2
    resumed = run("train", "--resume", stopped, "--data", data, "--valid", data, "--threads", 1, "--quiet")
    assert resumed[0] == 0, resumed[1]
    a, b = checkpoints.load(str(stopped)).model, checkpoints.load(str(straight)).model
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def test_a_subword_source_is_cut_as_the_tokeniser_truncates_it_its_end_token_kept(marian, tmp_path):
    from minitx.core.training.fine_tune import fine_tune_task

    base = checkpoints.load(str(marian))
    text = "the old town and the red house and the blue sky"
    data = write_pairs(tmp_path / "long.tsv", [(text, "danke")] * 4)
    task = fine_tune_task(base.task, str(data), str(data), 0, base.model_config.max_len, 5)
    row, full = task.train.data.source.row(0), base.task.src_vocab.row_ids([text])[0]
    assert len(row) == 5 and row[-1] == base.task.src_vocab.eos and row[:4] == full[:4]
    assert task.counts["cut_too_long"] == 8  # four training pairs and the same four held out
