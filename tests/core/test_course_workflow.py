"""The Hugging Face course's translation workflow in minitx's one Trainer, on the bundled reverse
model fine-tuned on digit pairs (cheap, no transformers model needed): the linear schedule is
transformers' get_linear_schedule_with_warmup as Trainer steps it, the held-out loss, BLEU and
chrF of every evaluation (the base's at step 0) are curves of the history and survive a file and
a metrics file, --keep-best keeps the weights of the best evaluation, --patience stops a run that
stopped improving, and --tensorboard's event files hold the run's numbers under Trainer's tags."""

from __future__ import annotations

import random

import pytest
import torch

from minitx import checkpoints
from minitx.core.checkpoint import load_checkpoint
from minitx.core.config import TrainConfig
from minitx.core.history import History, HistoryError, history_from_metrics
from minitx.core.training.best import Best, best_path
from minitx.core.training.events import RunListener
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.core.training.trainer import Trainer


@pytest.fixture(scope="module")
def base():
    return checkpoints.load("reverse")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(train, valid) files: digit sequences and their sorted digits (a new task for reverse)."""
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("pairs")

    def write(name, n):
        lines = []
        for _ in range(n):
            src = [str(rng.randint(0, 9)) for _ in range(rng.randint(3, 8))]
            lines.append(f"{' '.join(src)}\t{' '.join(sorted(src))}\n")
        (folder / name).write_text("".join(lines), encoding="utf-8")
        return str(folder / name)

    return write("train.tsv", 96), write("valid.tsv", 16)


def trainer_for(base, pairs, **changes) -> Trainer:
    train, valid = pairs
    cfg = TrainConfig(**{"task": "data", "data": train, "valid": valid, "init": "reverse",
                         **fine_tune_defaults("minitx"), "lr": 1e-3, "steps": 8, "eval_every": 2,
                         "eval_size": 16, "device": "cpu", "watch": False, **changes})
    return Trainer(base.model_config.replace(dropout=0.0), cfg, base=base)


# -- the linear schedule ---------------------------------------------------------------------------
@pytest.mark.parametrize("warmup,steps", [(0, 10), (3, 10), (10, 10), (4, 7)])
def test_linear_schedule_is_trainers_get_linear_schedule_with_warmup_step_by_step(warmup, steps):
    from transformers import get_linear_schedule_with_warmup  # the reference, in tests only

    param = torch.nn.Parameter(torch.zeros(1))
    optimiser = torch.optim.SGD([param], lr=3e-4)
    scheduler = get_linear_schedule_with_warmup(optimiser, warmup, steps)
    theirs = []
    for _ in range(steps):  # Trainer: the optimiser steps at the lr set, then the scheduler steps
        theirs.append(optimiser.param_groups[0]["lr"])
        optimiser.step()
        scheduler.step()
    cfg = TrainConfig(lr=3e-4, warmup=warmup, steps=steps, schedule="linear")
    assert [cfg.lr_at(k) for k in range(1, steps + 1)] == pytest.approx(theirs, rel=1e-12, abs=0)


def test_a_linear_runs_steps_train_at_the_schedules_lr(base, pairs):
    trainer = trainer_for(base, pairs, schedule="linear", warmup=2, steps=6, eval_every=0)
    trainer.run()
    steps, lrs = trainer.history.series("lr")
    assert steps == [1, 2, 3, 4, 5, 6]
    assert lrs == pytest.approx([0.0, 5e-4, 1e-3, 0.75e-3, 0.5e-3, 0.25e-3])


def test_a_resumed_linear_run_given_more_steps_decays_on_from_where_it_was(base, pairs, tmp_path):
    trainer = trainer_for(base, pairs, schedule="linear", warmup=0, steps=4, eval_every=0)
    trainer.run()
    trainer.save(tmp_path / "run.safetensors")
    reached = trainer.lr_for(4)
    resumed = Trainer.resume(tmp_path / "run.safetensors", trainer.cfg.replace(steps=8))
    later = [resumed.lr_for(k) for k in range(5, 9)]
    assert all(lr <= reached for lr in later) and later == sorted(later, reverse=True) and later[-1] > 0


# -- scores as curves ------------------------------------------------------------------------------
def test_every_evaluation_and_the_base_at_step_0_are_points_of_the_bleu_chrf_and_loss_curves(base, pairs):
    trainer = trainer_for(base, pairs)
    trainer.run()
    for name in ("bleu", "chrf", "eval_loss"):
        steps, values = trainer.history.series(name)
        assert steps == [0, 2, 4, 6, 8], name
    assert trainer.history.series("bleu")[1][0] == trainer.base_scores["bleu"]
    assert trainer.history.series("chrf")[1][-1] == trainer.last_scores["chrf"]
    assert trainer.history.series("eval_loss")[1][-1] == trainer.last_scores["loss"]


def test_scores_survive_the_checkpoint_and_the_metrics_file(base, pairs, tmp_path):
    trainer = trainer_for(base, pairs, steps=4)
    trainer.run()
    saved = load_checkpoint(trainer.save(tmp_path / "run.safetensors")).history
    for name in ("bleu", "chrf", "eval_loss"):
        ours, theirs = trainer.history.series(name), saved.series(name)
        assert theirs[0] == ours[0] and theirs[1] == pytest.approx(ours[1], rel=1e-6)
    rows = tmp_path / "m.jsonl"
    rows.write_text('{"kind": "eval", "step": 0, "loss": 5.5, "bleu": 10.5, "chrf": 22.0}\n'
                    '{"kind": "step", "step": 1, "loss": 4.9, "lr": 0.001, "grad_norm": 9.0}\n'
                    '{"kind": "eval", "step": 1, "accuracy": 0.5, "loss": 4.0, "bleu": 20.0, "chrf": 30.0}\n')
    history = history_from_metrics(rows)
    assert history.series("bleu") == ([0, 1], [10.5, 20.0])
    assert history.series("accuracy") == ([1], [0.5])  # the base's row has no exact match


def test_a_file_whose_bleu_is_outside_0_to_100_is_refused_in_one_sentence():
    h = History()
    h.record_scores(0, 2.0, 10.0, 20.0)
    tensors = h.to_tensors()
    tensors["bleu"] = torch.tensor([101.0])
    with pytest.raises(HistoryError, match="history bleu holds values outside 0-100"):
        History.from_tensors(tensors, 1, 1, 8, 8, None)
    del tensors["chrf"]
    with pytest.raises(HistoryError, match="'score_steps' but not 'chrf'"):
        History.from_tensors(tensors, 1, 1, 8, 8, None)


def test_a_metrics_row_with_bleu_above_100_names_its_line(tmp_path):
    rows = tmp_path / "m.jsonl"
    rows.write_text('{"kind": "eval", "step": 0, "loss": 5.5, "bleu": 180, "chrf": 22.0}\n')
    with pytest.raises(HistoryError, match=r"m.jsonl line 1: bleu must be a number in 0-100"):
        history_from_metrics(rows)


def test_eval_bleu_scores_a_data_run_from_scratch_and_is_refused_without_data(pairs):
    train, valid = pairs
    cfg = TrainConfig(task="data", data=train, valid=valid, steps=2, eval_every=2, eval_size=8,
                      warmup=0, batch_size=8, device="cpu", eval_bleu=True)
    trainer = Trainer(None, cfg)
    trainer.run()
    assert trainer.history.series("bleu")[0] == [2]  # no base: the run's own evaluations only
    with pytest.raises(ValueError, match="eval_bleu: scores the outputs of a file's pairs"):
        TrainConfig(eval_bleu=True)


# -- the best evaluation and early stopping --------------------------------------------------------
class WeightsAtEvaluations(RunListener):
    def __init__(self):
        self.weights = {}

    def on_evaluation(self, trainer, result):
        model = trainer.model
        self.weights[trainer.step_count] = {n: p.detach().clone() for n, p in model.named_parameters()}


def test_keep_best_writes_the_weights_of_the_best_evaluation_by_its_metric(base, pairs, tmp_path):
    trainer = trainer_for(base, pairs, keep_best="chrf", lr=3e-3)
    trainer.best_path = best_path(tmp_path / "run.safetensors")
    seen = WeightsAtEvaluations()
    trainer.run(seen)
    steps, chrf = trainer.history.series("chrf")
    best_at = steps[max(range(len(chrf)), key=lambda i: (chrf[i], -i))]  # the first of the highest
    assert trainer.best.step == best_at and trainer.best.value == max(chrf)
    step, path = trainer.best_saved
    assert step == best_at and path == tmp_path / "run.best.safetensors"
    kept = load_checkpoint(path)
    expected = seen.weights[best_at] if best_at else dict(base.model.named_parameters())
    for name, p in kept.model.named_parameters():
        assert torch.equal(p, expected[name]), name
    assert kept.summary["best"]["step"] == best_at and not kept.resumable


def test_patience_stops_after_n_evaluations_without_a_better_one_and_says_so(base, pairs):
    # exact match stays 0 on sorting with a few tiny steps: the base's 0 is never beaten
    trainer = trainer_for(base, pairs, keep_best="exact", patience=2, lr=1e-6, steps=40)
    trainer.run()
    assert trainer.history.series("accuracy")[1] == [0.0, 0.0]
    assert trainer.stopped_early_at == 4 and trainer.step_count == 4 and trainer.done
    assert trainer.stopped_early_line() == ("stopped early at step 4: 2 evaluations without a better "
                                            "exact match than step 0's 0.0% (--patience 2)")


def test_patience_does_not_stop_a_run_whose_held_out_loss_keeps_falling(base, pairs):
    trainer = trainer_for(base, pairs, patience=1, steps=6)  # no --keep-best: the held-out loss
    trainer.run()
    losses = trainer.history.series("eval_loss")[1]
    assert all(b < a for a, b in zip(losses, losses[1:]))  # the premise: it improves every time
    assert trainer.stopped_early_at is None and trainer.step_count == 6


def test_a_tie_is_no_improvement_and_a_resumed_record_must_be_its_metrics():
    best = Best("loss")
    assert best.offer(0, 2.0) and not best.offer(2, 2.0) and best.offer(4, 1.5) and best.since == 0
    assert not best.offer(6, 1.6) and best.since == 1 and best.step == 4
    assert Best.from_dict(best.to_dict(), "loss") == best
    with pytest.raises(ValueError, match="not one of bleu"):
        Best.from_dict(best.to_dict(), "bleu")


def test_keep_best_and_patience_need_evaluations_and_measured_metrics():
    with pytest.raises(ValueError, match="keep_best: bleu is measured by a fine-tune's"):
        TrainConfig(task="data", data="p.tsv", keep_best="bleu")
    with pytest.raises(ValueError, match="patience: compares evaluations"):
        TrainConfig(patience=3, eval_every=0)
    with pytest.raises(ValueError, match="keep_best: must be one of bleu, chrf, loss, exact"):
        TrainConfig(keep_best="rouge")


def test_a_resumed_run_goes_on_with_its_best_evaluation(base, pairs, tmp_path):
    trainer = trainer_for(base, pairs, keep_best="loss", steps=4)
    trainer.run()
    trainer.save(tmp_path / "run.safetensors")
    resumed = Trainer.resume(tmp_path / "run.safetensors", trainer.cfg.replace(steps=6, patience=2))
    assert resumed.best == trainer.best and resumed.cfg.patience == 2  # patience may change


# -- TensorBoard -----------------------------------------------------------------------------------
def test_tensorboard_event_files_hold_the_runs_numbers_under_trainers_tags(base, pairs, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from minitx.core.training.tensorboard_log import TensorBoardLog

    trainer = trainer_for(base, pairs, steps=4, watch=True)
    log = TensorBoardLog(tmp_path / "tb")
    trainer.run(log)
    log.close()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()

    def scalars(tag):
        return [e.step for e in events.Scalars(tag)], [e.value for e in events.Scalars(tag)]

    for tag, series in (("train/loss", "loss"), ("train/learning_rate", "lr"),
                        ("train/grad_norm", "grad_norm"),
                        ("eval/bleu", "bleu"), ("eval/chrf", "chrf"), ("eval/loss", "eval_loss"),
                        ("eval/exact_match", "accuracy"), ("eval/kl_to_base", "kl_to_base")):
        steps, values = trainer.history.series(series)
        if series == "accuracy":  # the base's exact match too, at step 0 (the history's curve starts later)
            steps, values = [0, *steps], [trainer.base_scores["accuracy"], *values]
        theirs = scalars(tag)
        assert theirs[0] == steps and theirs[1] == pytest.approx(values, rel=1e-6), tag
    assert scalars("eval/bleu")[0][0] == 0  # the base, where the fine-tune starts
    texts = events.Tensors("probes/1/text_summary")  # each watched evaluation's output beside the base's
    last = next(r for r in reversed(trainer.history.watched.probes) if r.probe == 0)
    assert [t.step for t in texts] == trainer.history.watched.steps
    assert f"now: {last.output}" in texts[-1].tensor_proto.string_val[0].decode()
