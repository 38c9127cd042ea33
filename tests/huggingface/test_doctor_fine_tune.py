"""The doctor on a fine-tune (issue 49), blind: the file keeps no settings (no --init, no
learning rate or warmup: tests/blind_files.py's strip_settings), only its weights, task, history
and figures. A fine-tune is judged as one: its held-out loss and BLEU against its base's, its
forgetting and numerics; never blamed for having no warmup (a fine-tune's usual flat learning
rate) nor failed against a 90% exact-match bar no translation fine-tune meets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from minitx.core.doctor.code_checks import CAUSES
from minitx.tui.cli.main import main
from tests.blind_files import mentions, strip_settings
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.tiny_folders import save_model

WORDS = ["the cat", "a red house", "good morning", "the dog", "where is it", "thank you", "blue sky",
         "old town", "the house", "a cat", "red sky", "old dog"]
VALID = [("the sky", "THE SKY"), ("a dog", "A DOG"), ("old house", "OLD HOUSE"), ("red cat", "RED CAT")]


def run(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "400"})
    return result.exit_code, result.output


def fine_tune(init, data, valid, out) -> Path:
    code, text = run("train", "--init", init, "--data", data, "--valid", valid, "--steps", 12,
                     "--eval-every", 6, "--lr", "0.05", "--batch-size", 8, "--threads", 1, "--no-watch",
                     "--out", out, "--quiet")
    assert code == 0, text
    return out


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> dict[str, Path]:
    """A tiny Marian folder's fine-tune that learned its pairs, and a fine-tune of that one on the
    pairs turned round (target -> source), held out on the same pairs: worse than its base."""
    root = tmp_path_factory.mktemp("doctor-ft")
    folder = save_model(root / "opus-tiny", "marian")
    data = write_pairs(root / "train.tsv", [(w, w.upper()) for w in WORDS])
    turned = write_pairs(root / "turned.tsv", [(w.upper(), w) for w in WORDS])
    valid = write_pairs(root / "valid.tsv", VALID)
    good = fine_tune(folder, data, valid, root / "good.safetensors")
    worse = fine_tune(good, turned, valid, root / "worse.safetensors")
    return {"good": strip_settings(good, root / "good-blind.safetensors"),
            "worse": strip_settings(worse, root / "worse-blind.safetensors")}


REPORTS: dict[Path, dict] = {}  # each file doctored once for the module's tests


def doctor(path) -> dict:
    if path not in REPORTS:
        code, text = run("doctor", path, "--quick", "--json", "--threads", 1)
        assert code in (0, 1), text
        REPORTS[path] = json.loads(text)
    return REPORTS[path]


def test_the_blind_files_keep_no_settings(tuned):
    for path in tuned.values():
        assert not mentions(path, "warmup") and not mentions(path, '"init"')


def test_a_fine_tune_that_beats_its_base_is_judged_by_its_held_out_loss_not_a_bar_or_a_warmup(tuned):
    data = doctor(tuned["good"])
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["warmup"]["status"] != "fail" and CAUSES["no-warmup-failing"] not in data["causes"]
    assert checks["accuracy"]["status"] != "fail" and ">= 0.9" not in checks["accuracy"]["threshold"]
    loss = checks["fine-tune-loss"]
    assert loss["status"] == "pass" and "held-out loss" in loss["detail"]
    assert data["verdict"].startswith("improves on its base") and "its bar is" not in data["verdict"]
    assert data["fails_task"] is False


def test_a_fine_tune_worse_than_its_base_is_told_so_with_its_figures(tuned):
    data = doctor(tuned["worse"])
    checks = {c["name"]: c for c in data["checks"]}
    loss = checks["fine-tune-loss"]
    assert loss["status"] == "fail" and loss["value"] > float(loss["threshold"].split()[1])
    assert CAUSES["fine-tune-no-gain"] in data["causes"]
    assert data["verdict"].startswith("falls short of its base") and data["fails_task"] is True


def test_the_printed_still_falling_threshold_is_the_one_applied(tuned):
    data = doctor(tuned["good"])
    check = next(c for c in data["checks"] if c["name"] == "still-falling")
    quarter = float(check["detail"].split(" -> ")[0])
    applied = max(0.05 * quarter, 0.05)
    assert check["threshold"] == f"< {applied:.3g} nats"


def test_the_apps_doctor_reads_a_fine_tunes_record_as_the_command_does(tuned):
    from minitx.core.doctor.history_checks import RunRecord
    from minitx.tui.app.loaded import load_checkpoint_record

    ckpt, record = load_checkpoint_record(str(tuned["good"]))
    app_record = RunRecord.of(record.history, record.run_summary)
    assert app_record.fine_tune and app_record.base_scores == ckpt.summary["base_scores"]
