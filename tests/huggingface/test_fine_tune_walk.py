"""A new user's walk with a fine-tune of a tiny Hugging Face folder (issue 49): compare takes the
base and its fine-tune in either order, and every figure the commands print tells what it is
(the held-out loss, not a training batch's; the file the held-out pairs came from; the time
evaluations took; how many pairs a comparison decodes)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from minitx import checkpoints
from minitx.tui.cli.main import main
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.tiny_folders import save_model

WORDS = ["the cat", "a red house", "good morning", "the dog", "where is it", "thank you", "blue sky",
         "old town", "the house", "a cat"]
TRAIN = [(w, w.upper()) for w in WORDS] * 2
VALID = [("the sky", "THE SKY"), ("a dog", "A DOG"), ("old house", "OLD HOUSE")]


def run(*args, columns: int = 400) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": str(columns)})
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def walk(tmp_path_factory) -> dict[str, Path]:
    """A tiny Marian folder and its fine-tune on train.tsv, held out on valid.tsv."""
    root = tmp_path_factory.mktemp("walk")
    folder = save_model(root / "opus-tiny", "marian")
    data, valid = write_pairs(root / "train.tsv", TRAIN), write_pairs(root / "valid.tsv", VALID)
    out = root / "ft.safetensors"
    code, text = run("train", "--init", folder, "--data", data, "--valid", valid, "--steps", 4,
                     "--eval-every", 2, "--batch-size", 4, "--out", out, "--threads", 1, "--log-every", 1)
    assert code == 0, text
    return {"folder": folder, "data": data, "valid": valid, "ft": out, "train_output": text, "root": root}


def test_the_final_line_gives_the_held_out_loss_not_the_last_batch(walk):
    text = walk["train_output"]
    base_line = next(line for line in text.splitlines() if line.startswith("base -> fine-tuned"))
    heldout_loss = float(re.search(r"loss [\d.]+ -> ([\d.]+)", base_line).group(1))
    final = next(line for line in text.splitlines() if line.startswith("final exact match"))
    last_batch = [float(m) for m in re.findall(r"^step +\d+ +loss ([\d.]+)", text, re.M)][-1]
    assert "held-out loss" in final
    shown = float(re.search(r"held-out loss ([\d.]+)", final).group(1))
    assert shown == pytest.approx(heldout_loss, abs=1e-3) and shown != pytest.approx(last_batch, abs=1e-4)


def test_the_seconds_of_a_run_include_its_evaluations(walk):
    ckpt = checkpoints.load(str(walk["ft"]))
    final = next(line for line in walk["train_output"].splitlines() if line.startswith("final exact match"))
    seconds = float(re.search(r"([\d.]+) s this run", final).group(1))
    trained = ckpt.summary["seconds"]  # the steps alone
    evaluating = re.search(r"([\d.]+) s evaluating", final)
    assert evaluating is not None, final
    assert seconds >= float(evaluating.group(1)) and seconds >= round(trained)  # both printed to the second


def test_held_out_pairs_are_said_to_come_from_the_valid_file(walk):
    header = walk["train_output"]
    assert "held out: valid.tsv (3 pairs)" in header and "(3 held out)" not in header
    code, text = run("eval", walk["ft"], "--threads", 1)
    assert code == 0, text
    assert "3 held-out pairs of valid.tsv" in text and "of train.tsv" not in text
    code, text = run("inspect", walk["ft"])
    assert code == 0, text
    assert "3 example pairs of valid.tsv" in text and "pairs of train.tsv" not in text


@pytest.mark.parametrize("order", ["base first", "fine-tune first"])
def test_compare_takes_the_base_folder_and_its_fine_tune_in_either_order(walk, order):
    a, b = (walk["folder"], walk["ft"]) if order == "base first" else (walk["ft"], walk["folder"])
    code, text = run("compare", a, b, "--threads", 1, "--json")
    assert code == 0, text
    import json

    data = json.loads(text)
    assert data["n"] == len(VALID) and data["changes"]["n"] == len(VALID)
    assert data["examples"].startswith(f"{len(VALID)} held-out pairs")


def test_compare_says_how_many_pairs_it_decodes_and_the_folders_dropout(walk, monkeypatch):
    from minitx.tui.cli import progress

    monkeypatch.setattr(progress, "PLAIN_AFTER", 0.0)  # every stage says itself at once
    stages = []
    real_stage = progress.Progress.stage
    monkeypatch.setattr(progress.Progress, "stage",
                        lambda self, description, total=None: (stages.append(description),
                                                               real_stage(self, description, total)))
    code, text = run("compare", walk["folder"], walk["ft"], "--threads", 1)
    assert code == 0, text
    decoding = [s for s in stages if s.startswith("decoding")]
    assert decoding == [f"decoding {len(VALID)} held-out pairs with both models"], stages
    assert not re.search(r"model\.dropout +│ +0(\.1)? +│ +0\.1", text)  # config.json's 0.1 on both sides


def test_eval_counts_what_it_decodes(walk, monkeypatch):
    from minitx.tui.cli import progress

    counts = []
    real_update = progress.Progress.update

    def update(self, done, total=None, description=None):
        counts.append((self.description, done, self.total))
        return real_update(self, done, total, description)

    monkeypatch.setattr(progress.Progress, "update", update)
    for args in (("--pairs", walk["valid"]), ()):  # a file's pairs, the fine-tune's own held-out pairs
        counts.clear()
        code, text = run("eval", walk["folder"] if args else walk["ft"], *args, "--threads", 1)
        assert code == 0, text
        decoding = [c for c in counts if c[0].startswith("decoding")]
        assert decoding[-1][1:] == (len(VALID), len(VALID)), counts  # every pair counted, of all of them
        assert f"{len(VALID)} " in decoding[-1][0] and "pairs" in decoding[-1][0]


def test_a_hugging_face_folder_is_not_called_an_imported_model(walk, tmp_path):
    folder = tmp_path / "plain"
    shutil.copytree(walk["folder"], folder)
    for args in (("eval", folder), ("heads", folder)):
        code, text = run(*args, "--threads", 1)
        assert code == 2 and "imported model" not in text and "Hugging Face model" in text, text


def test_the_first_ctrl_c_says_at_once_that_the_run_is_saving_and_where():
    import io
    import signal

    from minitx.tui.cli.commands.train import StopOnSignal

    err = io.StringIO()
    stop = StopOnSignal(err, "ft.safetensors")
    stop._caught(signal.SIGINT, None)
    first = err.getvalue()
    assert "saving to ft.safetensors" in first and "Ctrl-C again is ignored" in first
    stop._caught(signal.SIGINT, None)
    assert stop.caught == signal.SIGINT and stop.ignored == 1  # the second press changes nothing


def test_two_ctrl_c_during_the_bases_evaluation_still_save_the_fine_tune(walk, tmp_path, monkeypatch,
                                                                         late_signals_land_here):
    import os
    import signal

    from minitx.core.training import trainer as trainer_module

    original = trainer_module.Trainer.evaluate
    said = []

    def evaluate_while_pressed(self, *args, **kwargs):
        if self.base_scores is None:  # the base's evaluation, the long silent one
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module.Trainer, "evaluate", evaluate_while_pressed)
    out = tmp_path / "stopped.safetensors"
    result = CliRunner().invoke(main, ["train", "--init", str(walk["folder"]), "--data", str(walk["data"]),
                                       "--steps", "20", "--out", str(out), "--threads", "1"],
                                env={"COLUMNS": "400"})
    said.append(result.output)
    assert result.exit_code == 130, result.output
    assert checkpoints.load(str(out)).summary["steps"] == 1  # the step in flight finished, and was saved
    assert f"Interrupted: finishing this step, then saving to {out}" in result.output


def test_a_fine_tune_says_what_each_evaluation_measures_before_it_starts(walk):
    lines = walk["train_output"].splitlines()
    assert not [line for line in lines if line.startswith("note:")]  # nothing said on every run
    first_step = next(i for i, line in enumerate(lines) if line.startswith("step "))
    assert any(line.startswith("evaluating the base on 3 held-out pairs") for line in lines[:first_step])
    assert any(line.startswith("evaluating step 2 on 3 held-out pairs") for line in lines)


def test_a_max_length_past_the_models_positions_is_one_line_exit_2_and_nothing_written(walk, tmp_path):
    positions = checkpoints.load(str(walk["folder"])).model_config.max_len
    out = tmp_path / "too-long.safetensors"
    code, text = run("train", "--init", walk["folder"], "--data", walk["data"], "--max-length", positions + 1,
                     "--steps", 1, "--out", out, "--threads", 1)
    assert code == 2 and "--max-length" in text and f"{positions} positions" in text, text
    assert len(text.strip().splitlines()) == 1 and not out.exists()


def test_inspect_calls_a_folder_a_hugging_face_folder_and_a_fine_tuned_file_minitxs(walk):
    code, folder = run("inspect", walk["folder"])
    assert code == 0 and "a Hugging Face folder" in folder.splitlines()[0] and "format v" not in folder
    code, tuned = run("inspect", walk["ft"])
    assert code == 0 and "format v1" in tuned.splitlines()[0] and "Hugging Face folder" not in tuned
