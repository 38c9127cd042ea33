"""The course's workflow on the command line, on the bundled reverse model fine-tuned on digit
pairs: `train --keep-best --patience` names the best evaluation's file and step (text and --json)
and says why it stopped, refuses to write over another run's best file, --tensorboard without its
extra says what to install, and `curves` draws BLEU (the base at step 0) for a fine-tune."""

from __future__ import annotations

import json
import random
import sys

import pytest

from minitx.core.checkpoint import load_checkpoint
from tests.cli.conftest import assert_one_line_error, run_cli

FINE_TUNE = ["--init", "reverse", "--steps", "6", "--eval-every", "2", "--eval-size", "16", "--lr", "1e-3",
             "--device", "cpu", "--threads", "1", "--no-watch"]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("pairs")
    lines = []
    for _ in range(96):
        src = [str(rng.randint(0, 9)) for _ in range(rng.randint(3, 8))]
        lines.append(f"{' '.join(src)}\t{' '.join(sorted(src))}\n")
    (folder / "sort.tsv").write_text("".join(lines), encoding="utf-8")
    return folder / "sort.tsv"


@pytest.fixture(scope="module")
def fine_tuned(pairs, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "ft.safetensors"
    run = run_cli("train", *FINE_TUNE, "--data", str(pairs), "--keep-best", "loss", "--out", str(out),
                  "--json")
    assert run.exit_code == 0, run.stderr
    return out, json.loads(run.stdout)


def test_keep_best_names_the_best_file_and_step_in_json_and_the_file_holds_that_evaluation(fine_tuned):
    out, result = fine_tuned
    best = result["best"]
    losses = dict(zip(*load_checkpoint(out).history.series("eval_loss")))
    assert best["metric"] == "loss" and best["value"] == pytest.approx(min(losses.values()), rel=1e-6)
    assert best["step"] == min(losses, key=losses.get)
    assert best["checkpoint"] == str(out.with_name("ft.best.safetensors"))
    kept = load_checkpoint(best["checkpoint"])
    assert kept.summary["steps"] == best["step"] and kept.summary["best"]["value"] == best["value"]


def test_the_text_says_the_best_evaluation_and_why_the_run_stopped_early(pairs, tmp_path):
    out = tmp_path / "ft.safetensors"
    run = run_cli("train", *FINE_TUNE, "--steps", "40", "--lr", "1e-7", "--data", str(pairs), "--keep-best",
                  "exact", "--patience", "2", "--out", str(out), "--log-every", "100", env={"COLUMNS": "400"})
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    evaluations = [line for line in lines if line.startswith("step ") and "acc " in line]
    assert len(evaluations) == 2 and all("  BLEU " in line for line in evaluations)  # steps 2 and 4
    stopped = next(line for line in lines if line.startswith("stopped early"))
    assert stopped.startswith("stopped early at step 4: 2 evaluations without a better exact match than "
                              "step 0's ") and stopped.endswith("% (--patience 2)")
    assert any(line.startswith("best exact match ") and line.endswith(
        f"at step 0 (--keep-best) · saved {tmp_path / 'ft.best.safetensors'}") for line in lines)
    assert load_checkpoint(out).summary["steps"] == 4


def test_another_runs_best_file_is_not_written_over_without_force(pairs, tmp_path):
    (tmp_path / "ft.best.safetensors").write_bytes(b"someone else's")
    run = run_cli("train", *FINE_TUNE, "--data", str(pairs), "--keep-best", "bleu", "--out",
                  str(tmp_path / "ft.safetensors"), "-q")
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "ft.best.safetensors exists already" in message and "--force" in message
    assert (tmp_path / "ft.best.safetensors").read_bytes() == b"someone else's"


def test_tensorboard_without_its_extra_names_what_to_install(pairs, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if not installed
    run = run_cli("train", *FINE_TUNE, "--data", str(pairs), "--tensorboard", str(tmp_path / "tb"),
                  "--out", str(tmp_path / "ft.safetensors"), "-q")
    message = assert_one_line_error(run)
    assert run.exit_code == 2 and "pip install 'minitx[tensorboard]'" in message
    assert not (tmp_path / "ft.safetensors").exists()


def test_curves_of_a_fine_tune_draw_bleu_from_its_base_at_step_0_by_default(fine_tuned):
    out, result = fine_tuned
    run = run_cli("curves", str(out), env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert any(line.startswith("held-out BLEU") for line in lines)
    assert not any(line.startswith("held-out exact match") for line in lines)
    base, last = result["summary"]["base_scores"]["bleu"], result["summary"]["scores"]["bleu"]
    assert f"BLEU {base:.2f} at 0 -> {last:.2f} at 6" in " ".join(lines[:2])
    assert next(line for line in reversed(lines) if line.strip()).startswith("step 0")  # the axis from 0
    csv = run_cli("curves", str(out), "--format", "csv").stdout
    assert "ft,bleu,0," in csv and ",chrf,6," in csv


def test_a_resumed_run_names_the_best_file_its_earlier_part_wrote(pairs, tmp_path):
    out = tmp_path / "ft.safetensors"
    first = run_cli("train", *FINE_TUNE, "--data", str(pairs), "--keep-best", "exact", "--lr", "1e-7",
                    "--out", str(out), "--json")
    assert first.exit_code == 0, first.stderr
    best = json.loads(first.stdout)["best"]
    run = run_cli("train", "--resume", str(out), "--steps", "8", "--threads", "1", "--json")
    assert run.exit_code == 0, run.stderr
    again = json.loads(run.stdout)["best"]
    assert again["step"] == best["step"] and again["checkpoint"] == best["checkpoint"]
