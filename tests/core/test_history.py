"""The run history: recorded by the Trainer every step, kept in the checkpoint as bounded tensors,
appended on resume; --until; and the resume rule that never raises the learning rate."""

from __future__ import annotations

import json

import pytest
import torch

from minitx.core.checkpoint import load_checkpoint, save_checkpoint
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.history import MAX_POINTS, MAX_SNAPSHOTS, History, keep_indices
from minitx.core.training.events import RunListener
from minitx.core.training.trainer import Trainer

MODEL = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                    max_len=6, dropout=0.0)
# Learns within tens of steps: copy of one or two digits.
TRAIN = TrainConfig(task="copy", steps=40, batch_size=16, warmup=5, lr=5e-3, min_source_len=1,
                    max_source_len=2, eval_every=5, eval_size=50, device="cpu", seed=0)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class Steps(RunListener):
    def __init__(self, seen):
        self.seen = seen

    def on_step(self, trainer, stats):
        self.seen.append(stats)


def test_the_trainer_records_every_step_and_every_evaluation():
    trainer = Trainer(MODEL, TRAIN)
    seen = []
    trainer.run(Steps(seen))
    h = trainer.history
    assert list(h.steps) == list(range(1, 41))
    steps, losses = h.series("loss")
    assert losses == [s.loss for s in seen]
    assert h.series("lr")[1] == [TRAIN.lr_at(s) for s in steps]
    assert h.series("grad_norm")[1] == [s.grad_norm for s in seen]
    seconds = h.series("seconds")[1]
    assert seconds == sorted(seconds) and seconds[-1] == pytest.approx(trainer.seconds)
    assert h.series("accuracy")[0] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert h.series("accuracy")[1] == [s.accuracy for s in seen if s.accuracy is not None]
    snaps = h.snapshots
    assert snaps.steps[0] == 0 and snaps.steps[-1] == 40 and snaps.steps == sorted(snaps.steps)
    assert snaps.source == trainer.probe_ids
    assert snaps.attention[0].shape == (1, 2, len(snaps.target), len(snaps.source))


def test_history_round_trips_through_save_load_and_resume_which_appends(tmp_path):
    first = Trainer(MODEL, TRAIN.replace(steps=20))
    first.run()
    path = first.save(tmp_path / "run.safetensors")
    loaded = load_checkpoint(path).history
    assert list(loaded.steps) == list(range(1, 21))
    for name in ("loss", "lr", "grad_norm", "examples_per_s", "seconds", "accuracy"):
        steps, values = first.history.series(name)
        assert loaded.series(name)[0] == steps
        assert loaded.series(name)[1] == pytest.approx(values, rel=1e-6)  # float32 in the file
    assert loaded.snapshot_steps == first.history.snapshot_steps
    assert torch.equal(torch.stack(loaded.snapshots.attention),
                       torch.stack(first.history.snapshots.attention))

    resumed = Trainer.resume(path, TRAIN)
    resumed.run()
    again = load_checkpoint(resumed.save(tmp_path / "run.safetensors")).history
    assert list(again.steps) == list(range(1, 41))
    assert again.series("loss")[1][:20] == loaded.series("loss")[1]  # the old points are kept
    assert again.series("accuracy")[0] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert again.snapshot_steps[: len(loaded.snapshot_steps)] == loaded.snapshot_steps
    assert again.snapshot_steps[-1] == 40

    uninterrupted = Trainer(MODEL, TRAIN)
    uninterrupted.run()
    assert again.series("loss")[1] == pytest.approx(uninterrupted.history.series("loss")[1], rel=1e-6)


def test_downsampling_keeps_first_and_last_points_and_exact_steps_through_resumes(tmp_path):
    history = History()
    for step in range(1, 10_001):
        history.record_step(step, 1.0 / step, 1e-3, 0.5, 100.0, step * 0.01)
    saved = History.from_tensors(history.to_tensors(), 1, 2, 6, 13, last_step=10_000)
    steps, losses = saved.series("loss")
    assert len(steps) <= MAX_POINTS and steps[0] == 1 and steps[-1] == 10_000
    assert losses == [float(torch.tensor(1.0 / s, dtype=torch.float32)) for s in steps]  # exact pairs
    # A resumed run appends dense new steps to a sparse old part; the kept points stay spread
    # over the step range instead of crowding into the dense part.
    for step in range(10_001, 20_001):
        saved.record_step(step, 1.0 / step, 1e-3, 0.5, 100.0, step * 0.01)
    again = History.from_tensors(saved.to_tensors(), 1, 2, 6, 13, last_step=20_000)
    steps = again.series("loss")[0]
    assert len(steps) <= MAX_POINTS and steps[0] == 1 and steps[-1] == 20_000
    assert set(steps) <= set(saved.steps)
    old = sum(1 for s in steps if s <= 10_000)
    assert 0.35 < old / len(steps) < 0.65
    assert max(b - a for a, b in zip(steps, steps[1:])) < 4 * 20_000 / MAX_POINTS


def test_snapshots_are_thinned_to_the_limit_keeping_the_first_and_last():
    history = History()
    for step in range(0, 1001, 5):
        history.record_snapshot(step, [1, 2], [2, 1, 12], torch.full((1, 2, 3, 2), step / 1000))
    tensors = history.to_tensors()
    steps = tensors["probe_steps"].tolist()
    assert len(steps) <= MAX_SNAPSHOTS and steps[0] == 0 and steps[-1] == 1000
    # each kept snapshot is the one taken at its step
    assert tensors["probe_attention"][:, 0, 0, 0, 0].tolist() == pytest.approx([s / 1000 for s in steps])


def test_keep_indices_returns_everything_when_it_fits():
    assert keep_indices([3, 4, 9], 5) == [0, 1, 2]
    chosen = keep_indices(list(range(100)), 10)
    assert chosen[0] == 0 and chosen[-1] == 99 and len(chosen) == 10


def test_until_stops_at_the_first_evaluation_at_or_above_the_target_and_saves(tmp_path):
    full = Trainer(MODEL, TRAIN)
    full.run()
    steps, accuracies = full.history.series("accuracy")
    target = sorted(accuracies)[len(accuracies) // 2]
    expected = next(s for s, a in zip(steps, accuracies) if a >= target)
    assert expected < TRAIN.steps  # the test means something: the cap is not what stops it

    stopped = Trainer(MODEL, TRAIN.replace(until=target))
    stopped.run()
    assert stopped.until_reached_at == expected == stopped.step_count and stopped.done
    assert stopped.last_accuracy >= target
    ckpt = load_checkpoint(stopped.save(tmp_path / "until.safetensors"))
    assert ckpt.summary["steps"] == expected and ckpt.summary["until_reached_at"] == expected
    assert ckpt.history.series("accuracy")[0][-1] == expected


def test_until_needs_evaluations():
    with pytest.raises(ValueError, match="until"):
        TRAIN.replace(until=0.9, eval_every=0)
    with pytest.raises(ValueError, match="until"):
        TRAIN.replace(until=1.5)


def _lrs(trainer: Trainer) -> list[float]:
    seen = []
    trainer.run(Steps(seen))
    return [s.lr for s in seen]


@pytest.mark.parametrize("stop_at", [20, 40])  # interrupted mid-decay, and finished
def test_resuming_with_more_steps_never_raises_the_learning_rate(tmp_path, stop_at):
    cosine = TRAIN.replace(schedule="cosine", eval_every=0)
    first = Trainer(MODEL, cosine.replace(steps=40))
    seen = []
    while first.step_count < stop_at:
        seen.append(first.train_step().lr)
    path = first.save(tmp_path / "cosine.safetensors")
    before = seen[-1]
    assert cosine.replace(steps=80).lr_at(stop_at + 1) > before  # the old rule jumped up

    resumed = Trainer.resume(path, cosine.replace(steps=80))
    after = _lrs(resumed)
    assert max(after) <= before
    assert after == sorted(after, reverse=True)  # decays from where it was
    assert after[-1] == pytest.approx(0.1 * cosine.lr)  # to the schedule's floor at the new end

    # and the rule travels in the file: resuming the resumed run again continues it exactly
    path2 = tmp_path / "cosine2.safetensors"
    twice = Trainer.resume(path, cosine.replace(steps=80))
    while twice.step_count < 60:
        twice.train_step()
    twice.save(path2)
    assert _lrs(Trainer.resume(path2, cosine.replace(steps=80))) == after[60 - stop_at:]


def test_resuming_with_the_same_steps_keeps_the_schedule_unchanged(tmp_path):
    cosine = TRAIN.replace(schedule="cosine", eval_every=0)
    first = Trainer(MODEL, cosine)
    while first.step_count < 20:
        first.train_step()
    resumed = Trainer.resume(first.save(tmp_path / "c.safetensors"), cosine)
    assert resumed.lr_restart is None
    assert _lrs(resumed) == [cosine.lr_at(s) for s in range(21, 41)]


def test_the_seconds_of_a_resumed_run_count_that_run_only(tmp_path):
    first = Trainer(MODEL, TRAIN.replace(steps=10, eval_every=0))
    first.run()
    resumed = Trainer.resume(first.save(tmp_path / "s.safetensors"), TRAIN.replace(steps=20, eval_every=0))
    assert resumed.seconds_this_run == 0.0
    resumed.run()
    assert 0 < resumed.seconds_this_run < resumed.seconds
    assert resumed.seconds == pytest.approx(first.seconds + resumed.seconds_this_run)


def test_files_without_history_load_and_resume_with_a_history_from_that_step(tmp_path):
    trainer = Trainer(MODEL, TRAIN.replace(steps=10, eval_every=0))
    trainer.run()
    resume_info = {"train_config": json.dumps(trainer.cfg.to_dict()),
                   "trainer": '{"step": 10, "seconds": 1.0}'}
    path = save_checkpoint(tmp_path / "old.safetensors", trainer.model, trainer.task, trainer.summary(),
                           trainer.state_tensors(), resume_info)  # as minitx wrote before histories
    assert load_checkpoint(path).history is None
    resumed = Trainer.resume(path, TRAIN.replace(steps=15, eval_every=0))
    resumed.run()
    assert list(resumed.history.steps) == [11, 12, 13, 14, 15]


def test_a_probe_source_can_be_chosen_and_a_bad_one_is_refused_by_the_config():
    trainer = Trainer(MODEL, TRAIN.replace(steps=2, probe_source="2 1"))
    trainer.run()
    assert trainer.history.snapshots.source == [2, 1]
    with pytest.raises(ValueError, match="probe_source"):
        TRAIN.replace(probe_source="1 2 3")  # longer than the task's sources


def test_a_shared_history_keeps_its_curves_and_at_most_a_quarter_megabyte_of_snapshots():
    from minitx.core.history import SHARED_SNAPSHOT_BYTES

    history = History()
    for step in range(1, 301):
        history.record_step(step, 1.0 / step, 1e-3, 0.5, 100.0, step / 10)
        if step % 3 == 0:  # 100 snapshots of a long probe: 8 x 11 x 25 floats, 8.8 KB each
            history.record_snapshot(step, list(range(25)), list(range(11)), torch.rand(2, 4, 11, 25))
    shared = history.for_sharing()
    kept = shared.snapshot_steps
    assert len(kept) == SHARED_SNAPSHOT_BYTES // (2 * 4 * 11 * 25 * 4) == 29
    assert kept[0] == 3 and kept[-1] == 300  # the first and the last, the rest evenly between
    assert shared.series("loss") == history.series("loss")  # every point of the curves
    assert len(history.snapshot_steps) == 100  # the run's own history is left whole
