"""`minitx train`: options, recipes, metrics, resuming, Ctrl-C and bad inputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minitx.core.checkpoint import load_checkpoint, read_raw
from tests.cli.conftest import TINY, assert_one_line_error, run_cli

# The tests of this file send signals to their own process.
pytestmark = pytest.mark.usefixtures("late_signals_land_here")


def _weights(path) -> dict[str, torch.Tensor]:
    tensors, _ = read_raw(path)
    return {k: v for k, v in tensors.items() if k.startswith("model.")}


def test_train_reports_final_accuracy_and_where_the_checkpoint_went(tmp_path):
    out = tmp_path / "run.safetensors"
    args = [a for a in TINY if a != "--quiet"]
    run = run_cli("train", *args, "--steps", "12", "--log-every", "4", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    assert "final exact match" in run.stdout and str(out) in run.stdout
    assert "step      4  loss" in run.stdout  # plain log lines when not on a terminal
    ckpt = load_checkpoint(out)
    assert ckpt.resumable and ckpt.summary["steps"] == 12
    assert ckpt.model_config.d_model == 16 and ckpt.task.max_len == 6


def test_metrics_file_has_every_step_and_one_row_per_evaluation(tmp_path):
    metrics = tmp_path / "m.jsonl"
    out = tmp_path / "m.safetensors"
    args = ["--steps", "10", "--log-every", "5", "--eval-every", "4", "--metrics", str(metrics)]
    run = run_cli("train", *TINY, *args, "--out", str(out))
    assert run.exit_code == 0, run.stderr
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    steps = [r for r in rows if r["kind"] == "step"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in steps] == list(range(1, 11))  # every step, not only the logged ones
    for row in steps:
        assert {"step", "loss", "grad_norm", "lr", "examples_per_s", "seconds"} <= set(row)
    assert [r["step"] for r in evals] == [4, 8, 10]
    assert all(0.0 <= r["accuracy"] <= 1.0 and r["n"] == 20 for r in evals)
    # the checkpoint's history holds the same evaluations
    history = load_checkpoint(out).history
    assert history.series("accuracy") == ([4, 8, 10], pytest.approx([r["accuracy"] for r in evals]))

    # resuming appends to the same file
    run = run_cli("train", "--resume", str(out), "--steps", "12", "--metrics", str(metrics), "--quiet")
    assert run.exit_code == 0, run.stderr
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "step"] == list(range(1, 13))


def test_a_run_without_evaluations_still_writes_its_final_evaluation(tmp_path):
    metrics = tmp_path / "m.jsonl"
    run = run_cli("train", *TINY, "--steps", "3", "--metrics", str(metrics),
                  "--out", str(tmp_path / "e.safetensors"))
    assert run.exit_code == 0, run.stderr
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in rows] == [("step", 1), ("step", 2), ("step", 3), ("eval", 3)]


# A model that learns a copy of one or two digits within tens of steps.
LEARNS = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--dropout", "0",
          "--task", "copy", "--lengths", "1-2", "--batch-size", "16", "--warmup", "5", "--lr", "0.005",
          "--eval-every", "5", "--eval-size", "50", "--device", "cpu", "--seed", "0", "--positions", "6"]


def test_until_stops_at_the_first_evaluation_reaching_it_saves_and_says_the_step(tmp_path):
    full = tmp_path / "full.safetensors"
    assert run_cli("train", *LEARNS, "--steps", "40", "--quiet", "--out", str(full)).exit_code == 0
    steps, accuracies = load_checkpoint(full).history.series("accuracy")
    target = sorted(accuracies)[len(accuracies) // 2]
    expected = next(s for s, a in zip(steps, accuracies) if a >= target)
    assert expected < 40

    out = tmp_path / "until.safetensors"
    run = run_cli("train", *LEARNS, "--steps", "40", "--until", f"{target * 100:.10g}%", "--out", str(out),
                  "--log-every", "100")
    assert run.exit_code == 0, run.stderr
    assert f"at step {expected}" in run.stdout
    ckpt = load_checkpoint(out)
    assert ckpt.summary["steps"] == expected and ckpt.resumable
    assert ckpt.history.series("accuracy")[0][-1] == expected


@pytest.mark.parametrize("value", ["1.5", "-3%", "101%", "many"])
def test_until_refuses_what_is_not_an_accuracy(tmp_path, value):
    out = str(tmp_path / "x.safetensors")
    run = run_cli("train", *TINY, "--eval-every", "5", "--until", value, "--out", out)
    assert "--until" in assert_one_line_error(run) and run.exit_code == 2


def test_the_default_recipe_stops_at_its_target_and_until_0_trains_every_step(tmp_path):
    reached = {}
    for until in (None, "0"):
        out = tmp_path / f"until-{until}.safetensors"
        extra = [] if until is None else ["--until", until]
        run = run_cli("train", *LEARNS, "--lr", "0.01", "--steps", "400", *extra, "--out", str(out),
                      "--json")
        assert run.exit_code == 0, run.stderr
        data = json.loads(run.stdout)
        reached[until] = (data["until_reached_at"], data["summary"]["steps"])
    stopped_at, steps = reached[None]  # copying 1-2 tokens: 99.8% long before step 400
    assert stopped_at is not None and stopped_at == steps < 400
    assert reached["0"] == (None, 400)


def test_until_without_evaluations_is_a_usage_error(tmp_path):
    run = run_cli("train", *TINY, "--until", "0.9", "--out", str(tmp_path / "x.safetensors"))
    assert "--until" in assert_one_line_error(run) and run.exit_code == 2


def test_resuming_with_more_steps_never_raises_the_lr_and_counts_this_runs_seconds(tmp_path):
    out, metrics = tmp_path / "cos.safetensors", tmp_path / "cos.jsonl"
    cosine = [*LEARNS, "--schedule", "cosine", "--eval-every", "0", "--metrics", str(metrics)]
    assert run_cli("train", *cosine, "--steps", "20", "--quiet", "--out", str(out)).exit_code == 0
    run = run_cli("train", "--resume", str(out), "--steps", "40", "--metrics", str(metrics))
    assert run.exit_code == 0, run.stderr
    lrs = [json.loads(line)["lr"] for line in metrics.read_text().splitlines() if '"step"' in line
           and json.loads(line)["kind"] == "step"]
    assert len(lrs) == 40 and max(lrs[20:]) <= lrs[19]
    final = " ".join(run.stdout.split("final exact match")[1].split())  # broken between fields at 80
    assert "s this run (" in final and "s evaluating; " in final and "s of training in all)" in final


def test_resuming_a_finished_schedule_says_so_shows_the_real_lr_and_can_start_a_new_one(tmp_path):
    """The README's `train --resume tiny.safetensors --steps 400`: a cosine run that has ended
    trains on at its floor, so the header gives that lr, not the recipe's peak, and a note says
    how to train further; --restart-schedule warms up and decays again over the new steps."""
    out, metrics = tmp_path / "done.safetensors", tmp_path / "m.jsonl"
    cosine = [*LEARNS, "--schedule", "cosine", "--eval-every", "0", "--lr-floor", "0.01"]
    assert run_cli("train", *cosine, "--steps", "20", "--quiet", "--out", str(out)).exit_code == 0
    floor = 0.005 * 0.01
    on = run_cli("train", "--resume", str(out), "--steps", "30", "--out", str(tmp_path / "on.safetensors"))
    assert on.exit_code == 0, on.stderr
    header = on.stdout.splitlines()[1]
    assert header.startswith("steps 21-30 · lr 5e-05 to 5e-05 (cosine, resumed)"), header
    note = " ".join(on.stderr.split())
    assert "schedule ended at step 20" in note and "lr 5e-05" in note
    assert f"minitx train --resume {out} --steps 30 --restart-schedule" in note
    new = run_cli("train", "--resume", str(out), "--steps", "30", "--restart-schedule", "--metrics",
                  str(metrics), "--out", str(tmp_path / "new.safetensors"))
    assert new.exit_code == 0, new.stderr
    assert "schedule ended" not in new.stderr
    assert new.stdout.splitlines()[1].startswith("steps 21-30 · a new schedule: lr 0.005 cosine, warmup 5")
    lrs = [row["lr"] for row in map(json.loads, metrics.read_text().splitlines()) if row["kind"] == "step"]
    assert lrs[:5] == pytest.approx([0.005 * k / 5 for k in range(1, 6)])  # warmup again, to the peak
    assert lrs[-1] == pytest.approx(floor) and max(lrs) == pytest.approx(0.005)
    again = run_cli("train", "--resume", str(tmp_path / "new.safetensors"), "--steps", "40", "--quiet")
    assert again.exit_code == 0, again.stderr  # the new schedule is saved with the run: it resumes
    refused = run_cli("train", *TINY, "--steps", "2", "--restart-schedule", "--out", str(tmp_path / "x"))
    assert "--resume" in assert_one_line_error(refused) and refused.exit_code == 2


def test_the_progress_bar_keeps_step_loss_accuracy_and_eta_within_80_columns(monkeypatch):
    import io

    from rich.console import Console

    from minitx.core.training.results import EvalResult, StepStats
    from minitx.tui.cli import common, train_progress
    from minitx.tui.cli.output import QuietWhenClosed

    class FakeTrainer:
        cfg = type("cfg", (), {"steps": 100000, "eval_size": 500, "until": 0.0})
        step_count, last_accuracy, steps_per_s, step_rows = 54321, None, 50.0, 64
        last_scores = None  # no text scored
        watcher = None  # a run from scratch: nothing watched
        guide = None  # nor guided (core/training/guided_alignment.py)
        history = type("history", (), {"watched": None})

    screen = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None, record=True)
    monkeypatch.setattr(common, "console", lambda *a, **k: screen)
    reporter = train_progress.Reporter(FakeTrainer(), QuietWhenClosed(io.StringIO()), quiet=True,
                                       log_every=None, metrics=None, resume=False)
    reporter._start_bar()
    reporter.on_evaluation(FakeTrainer(), EvalResult(0.998, 500))
    reporter.on_step(FakeTrainer(), StepStats(54321, 0.0000312, 0.5, 1e-3, 1000.0, 10.0, 0.998))
    reporter.progress.stop()
    shown = Console(file=io.StringIO(), width=80, color_system=None, record=True)
    shown.print(reporter.progress.get_renderable())
    [line] = shown.export_text().splitlines()
    assert len(line) <= 80
    for shown in ("54321/100000", "loss 3.1e-05", "acc 99.8%", ":"):
        assert shown in line, line
    # An evaluation cut short once --until was out of reach says what it found, not a percentage
    # of a few examples: the wrong outputs that put the target out of reach.
    FakeTrainer.cfg.until = 0.999
    reporter.on_evaluation(FakeTrainer(), EvalResult(0.93, 100, complete=False))
    reporter._advance(StepStats(54321, 0.0000312, 0.5, 1e-3, 1000.0, 10.0))
    shown = Console(file=io.StringIO(), width=80, color_system=None, record=True)
    shown.print(reporter.progress.get_renderable())
    [line] = shown.export_text().splitlines()
    assert len(line) <= 80 and "acc <99.9% (7 of the first 100 wrong)" in line, line


def test_json_output_shows_recipe_values_unless_an_option_overrides_them(tmp_path):
    run = run_cli(
        "train",
        *TINY,
        "--recipe",
        "reference",
        "--steps",
        "3",
        "--json",
        "--out",
        str(tmp_path / "r.safetensors"),
    )
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["train_config"]["lr"] == 1e-3  # from the recipe
    assert data["train_config"]["steps"] == 3  # from the option
    assert data["model_config"]["d_model"] == 16
    assert data["summary"]["steps"] == 3 and data["checkpoint"].endswith("r.safetensors")


def test_the_default_recipe_favours_long_sources_and_length_power_overrides_it(tmp_path):
    powers = {}
    for extra in ([], ["--length-power", "0"]):
        out = tmp_path / f"p{len(extra)}.safetensors"
        run = run_cli("train", *TINY, "--steps", "2", *extra, "--json", "--out", str(out))
        assert run.exit_code == 0, run.stderr
        powers[len(extra)] = json.loads(run.stdout)["train_config"]["length_power"]
        assert json.loads(load_checkpoint(out).metadata["train_config"])["length_power"] == powers[len(extra)]
    assert powers == {0: 2.0, 2: 0.0}


def test_bug_option_trains_the_broken_variant(tmp_path):
    run = run_cli(
        "train",
        *TINY,
        "--steps",
        "2",
        "--bug",
        "no-warmup",
        "--json",
        "--out",
        str(tmp_path / "b.safetensors"),
    )
    assert run.exit_code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["train_config"]["bug"] == "no-warmup" and data["train_config"]["warmup"] == 0


def test_one_component_swap_from_the_command_line_is_saved_with_the_checkpoint(tmp_path):
    out = tmp_path / "rope.safetensors"
    run = run_cli("train", *TINY, "--steps", "3", "--position-encoding", "rope", "--norm-kind", "rms",
                  "--activation", "swiglu", "--kv-heads", "1", "--out", str(out))
    assert run.exit_code == 0, run.stderr
    cfg = load_checkpoint(out).model_config
    assert (cfg.position_encoding, cfg.norm_kind, cfg.activation, cfg.kv_heads, cfg.n_heads) == (
        "rope", "rms", "swiglu", 1, 2)
    assert (cfg.d_model, cfg.norm) == (16, "post")  # everything else as it was


def test_the_modern_recipe_trains_every_modern_part_and_resumes(tmp_path):
    out = tmp_path / "modern.safetensors"
    base = [*TINY, "--recipe", "modern", "--heads", "4", "--out", str(out)]
    assert run_cli("train", *base, "--steps", "2").exit_code == 0
    cfg = load_checkpoint(out).model_config
    assert (cfg.norm, cfg.norm_kind, cfg.position_encoding, cfg.activation, cfg.kv_heads) == (
        "pre", "rms", "rope", "swiglu", 2)
    resumed = run_cli("train", "--resume", str(out), "--steps", "4", "--quiet", "--threads", "1")
    assert resumed.exit_code == 0, resumed.stderr
    assert load_checkpoint(out).summary["steps"] == 4


def _ctrl_c_after(step: int, monkeypatch, signum: int = signal.SIGINT) -> None:
    """Make the next training run receive SIGINT (as from Ctrl-C), or `signum`, right after `step`."""
    from minitx.core.training.trainer import Trainer

    original = Trainer.train_step

    def step_then_ctrl_c(self):
        stats = original(self)
        if stats.step == step:
            os.kill(os.getpid(), signum)
        return stats

    monkeypatch.setattr(Trainer, "train_step", step_then_ctrl_c)


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path, monkeypatch):
    whole, half = tmp_path / "whole.safetensors", tmp_path / "half.safetensors"
    assert run_cli("train", *TINY, "--steps", "20", "--out", str(whole)).exit_code == 0
    with monkeypatch.context() as patch:
        _ctrl_c_after(10, patch)
        assert run_cli("train", *TINY, "--steps", "20", "--out", str(half)).exit_code == 130
    assert load_checkpoint(half).summary["steps"] == 10
    run = run_cli("train", "--resume", str(half), "--quiet")
    assert run.exit_code == 0, run.stderr
    expected, resumed = _weights(whole), _weights(half)
    assert expected.keys() == resumed.keys()
    for name in expected:
        assert torch.equal(expected[name], resumed[name]), name


def test_resume_refuses_a_run_whose_config_does_not_match(tiny_ckpt):
    message = assert_one_line_error(run_cli("train", "--resume", tiny_ckpt, "--steps", "40", "--lr", "0.5"))
    assert "lr" in message
    message = assert_one_line_error(
        run_cli("train", "--resume", tiny_ckpt, "--steps", "40", "--d-model", "32")
    )
    assert "d_model" in message


def test_resume_of_a_finished_run_asks_for_more_steps(tiny_ckpt):
    assert "--steps" in assert_one_line_error(run_cli("train", "--resume", tiny_ckpt))


@pytest.mark.parametrize(("signum", "code"),
                         [(signal.SIGINT, 130), (signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_ctrl_c_a_hangup_or_sigterm_saves_a_resumable_checkpoint_and_exits_128_plus_the_signal(
        tmp_path, monkeypatch, signum, code):
    _ctrl_c_after(3, monkeypatch, signum)
    out = tmp_path / "stopped.safetensors"
    run = run_cli("train", *TINY, "--steps", "50", "--out", str(out))
    assert run.exit_code == code
    assert str(out) in run.stderr and "--resume" in run.stderr
    ckpt = load_checkpoint(out)
    assert ckpt.resumable and ckpt.summary["steps"] == 3  # the step in flight finished


def test_several_quick_ctrl_c_still_save_the_run_and_say_what_was_kept(tmp_path, monkeypatch):
    """Three Ctrl-C after step 3, and one more while the file is being written: the step in flight
    finishes, the save is not abandoned, and the message says what the file holds."""
    from minitx.core.training import trainer as trainer_module

    original_step, original_save = trainer_module.Trainer.train_step, trainer_module.save_checkpoint

    def step_then_three(self):
        stats = original_step(self)
        if stats.step == 3:
            for _ in range(3):
                os.kill(os.getpid(), signal.SIGINT)
        return stats

    def save_with_one_more(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return original_save(*args, **kwargs)

    monkeypatch.setattr(trainer_module.Trainer, "train_step", step_then_three)
    monkeypatch.setattr(trainer_module, "save_checkpoint", save_with_one_more)
    out = tmp_path / "stopped.safetensors"
    run = run_cli("train", *TINY, "--steps", "50", "--out", str(out))
    assert run.exit_code == 130, run.stderr
    ckpt = load_checkpoint(out)
    assert ckpt.resumable and ckpt.summary["steps"] == 3
    said = " ".join(run.stderr.split())
    assert "Ctrl-C again is ignored until the checkpoint is written" in said
    assert f"Interrupted at step 3/50: resumable checkpoint saved to {out}, exact match " in said
    assert f"{ckpt.summary['accuracy']:.1%} on 20 fresh sequences" in said


MINITX = str(Path(sys.executable).with_name("minitx"))
LOUD_TINY = [arg for arg in TINY if arg != "--quiet"]  # with its progress lines


def test_a_real_hangup_from_a_dropped_ssh_session_saves_the_run(tmp_path):
    out = tmp_path / "a.safetensors"
    proc = subprocess.Popen([MINITX, "train", *LOUD_TINY, "--steps", "100000", "--log-every", "1",
                             "--out", str(out), "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    while not proc.stdout.readline().startswith("step"):  # the description, then the first step
        pass
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err
    assert load_checkpoint(out).resumable and str(out) in err


@pytest.mark.slow  # end to end: tier 2
def test_a_closed_output_pipe_quiets_the_progress_and_the_run_finishes_and_saves(tmp_path):
    out = tmp_path / "v.safetensors"
    proc = subprocess.Popen([MINITX, "train", *LOUD_TINY, "--steps", "60", "--log-every", "1",
                             "--out", str(out), "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    proc.stdout.readline()  # `| head -1`: one line, then the reader is gone
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert load_checkpoint(out).summary["steps"] == 60
    assert "standard output was closed" in err and str(out) in err and "Traceback" not in err


def test_out_onto_an_existing_file_of_another_run_is_refused_without_force(tmp_path, tiny_ckpt):
    taken = tmp_path / "taken.safetensors"
    taken.write_bytes(Path(tiny_ckpt).read_bytes())
    run = run_cli("train", *TINY, "--steps", "2", "--out", str(taken))
    assert run.exit_code == 2 and "--force" in assert_one_line_error(run)
    assert taken.read_bytes() == Path(tiny_ckpt).read_bytes()  # nothing was written
    assert run_cli("train", *TINY, "--steps", "2", "--out", str(taken), "--force").exit_code == 0
    assert load_checkpoint(taken).summary["steps"] == 2


def test_save_every_writes_resumable_checkpoints_during_the_run(tmp_path, monkeypatch):
    from minitx.core.training.trainer import Trainer

    saved_at = []
    original = Trainer.save

    def recording_save(self, path, resumable=True):
        saved_at.append((self.step_count, resumable))
        return original(self, path, resumable)

    monkeypatch.setattr(Trainer, "save", recording_save)
    run = run_cli(
        "train",
        *TINY,
        "--steps",
        "12",
        "--save-every",
        "5",
        "--out",
        str(tmp_path / "s.safetensors"),
    )
    assert run.exit_code == 0, run.stderr
    assert saved_at == [(5, True), (10, True), (12, True)]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--steps", "0"], "--steps"),
        (["--lr", "-1"], "lr"),
        (["--task", "nope"], "--task"),
        (["--recipe", "nope"], "--recipe"),
        (["--d-model", "18", "--heads", "4"], "--d-model"),
        (["--lengths", "9-3"], "lengths"),
        (["--dropout", "1.5"], "dropout"),
        (["--steps", "many"], "many"),
        (["--kv-heads", "3"], "--kv-heads"),  # 2 heads do not split into 3 groups
        (["--length-power", "-1"], "--length-power"),
        (["--position-encoding", "alibi"], "--position-encoding"),
        (["--d-model", "12", "--heads", "4", "--d-ff", "8", "--position-encoding", "rope"],
         "--position-encoding"),  # d_k 3: rope turns pairs
    ],
)
def test_bad_option_values_are_one_line_usage_errors_naming_the_option(tmp_path, args, fragment):
    run = run_cli("train", *TINY, *args, "--out", str(tmp_path / "x.safetensors"))
    assert fragment in assert_one_line_error(run)
    assert run.exit_code == 2
    assert not (tmp_path / "x.safetensors").exists()


def test_cuda_without_a_gpu_is_a_one_line_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = run_cli("train", *TINY, "--device", "cuda", "--out", str(tmp_path / "x.safetensors"))
    assert "cuda" in assert_one_line_error(run)


def test_unwritable_output_path_fails_before_training(tmp_path):
    run = run_cli("train", *TINY, "--steps", "5", "--out", str(tmp_path / "missing" / "x.safetensors"))
    assert "does not exist" in assert_one_line_error(run)


def test_every_config_field_can_be_set_from_the_command_line():
    import dataclasses

    from minitx.core.config import ModelConfig
    from minitx.core.options import MODEL_OPTIONS, option_names

    help_text = run_cli("train", "--help").stdout
    for name in option_names():  # every name core turns into configs has its option
        assert f"--{name.replace('_', '-')}" in help_text, name
    via_bug = {"bug"}
    from_task = {"vocab_size", "pad_id", "sos_id", "eos_id", "src_vocab_size", "src_pad_id"}  # vocabularies
    model_fields = set(MODEL_OPTIONS.values()) | via_bug | from_task
    assert {f.name for f in dataclasses.fields(ModelConfig)} <= model_fields


def test_divergence_is_a_one_line_error_that_keeps_the_last_good_step(tmp_path):
    out = tmp_path / "diverged.safetensors"
    run = run_cli("train", *TINY, "--steps", "50", "--warmup", "0", "--lr", "1e30", "--out", str(out))
    message = assert_one_line_error(run)
    assert "diverged" in message and str(out) in message
    ckpt = load_checkpoint(out)  # the weights before the bad step are finite, so it loads
    assert ckpt.resumable and 1 <= ckpt.summary["steps"] < 50


def test_without_out_each_run_gets_its_own_file_that_hides_no_bundled_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert run_cli("train", *TINY, "--steps", "2").exit_code == 0
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == [
        "reverse-run1.safetensors", "reverse-run2.safetensors"]


def test_a_run_saved_under_a_bundled_name_is_told_how_to_reach_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = run_cli("train", *TINY, "--steps", "2", "--out", "reverse.safetensors")
    assert run.exit_code == 0
    assert "bundled" in run.stderr and "reverse.safetensors" in run.stderr
