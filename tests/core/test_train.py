import math

import pytest
import torch

from minitx.core.checkpoint import CheckpointError
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.training.events import RunListener
from minitx.core.training.results import StepStats
from minitx.core.training.trainer import Trainer, TrainingDiverged, resolve_device


def test_step_reports_loss_grad_norm_lr_and_speed(tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg)
    stats = trainer.train_step()
    assert isinstance(stats, StepStats) and stats.step == 1
    assert math.isfinite(stats.loss) and stats.grad_norm > 0
    assert stats.lr == pytest.approx(tiny_train_cfg.lr / tiny_train_cfg.warmup)
    assert stats.examples_per_s > 0 and stats.accuracy is None


def test_first_step_loss_of_the_reference_model_is_healthy():
    trainer = Trainer(ModelConfig(), TrainConfig(device="cpu"))
    assert 2.5 < trainer.train_step().loss < 3.5


class Recorder(RunListener):
    """Every event of a run, in order; asks to stop once the trainer reaches `stop_at`, and saves
    at `save_at`."""

    def __init__(self, stop_at=None, save_at=None, path=None):
        self.events, self.stop_at, self.save_at, self.path = [], stop_at, save_at, path

    def on_step(self, trainer, stats):
        self.events.append(("step", stats.step))
        if stats.step == self.save_at:
            trainer.save(self.path)

    def on_evaluation(self, trainer, result):
        self.events.append(("evaluation", trainer.step_count, result.n, result.complete))

    def on_snapshot(self, trainer, step):
        self.events.append(("snapshot", step))

    def on_save(self, trainer, path, resumable):
        self.events.append(("save", path.name, resumable))

    def stop_requested(self, trainer):
        return self.stop_at is not None and trainer.step_count >= self.stop_at


def test_run_tells_every_listener_of_each_step_evaluation_and_snapshot(tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg.replace(steps=10, eval_every=5, eval_size=40))
    first, second = Recorder(), Recorder()
    last = trainer.run(first, second)
    assert first.events == second.events
    assert [e[1] for e in first.events if e[0] == "step"] == list(range(1, 11))
    # the evaluation and snapshot of a step come before that step's own event
    at = first.events.index
    assert at(("step", 4)) < at(("evaluation", 5, 40, True)) < at(("step", 5))
    assert ("evaluation", 10, 40, True) in first.events and ("snapshot", 10) in first.events
    assert last.step == 10 and last.accuracy is not None and last.eval_n == 40


def test_a_listener_asking_to_stop_ends_the_run_between_steps(tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg)
    watcher = Recorder(stop_at=3)
    trainer.run(Recorder(), watcher)
    assert trainer.step_count == 3 and watcher.events[-1] == ("step", 3)
    trainer.run(until_step=5)  # the same run goes on where it stopped
    assert trainer.step_count == 5


def test_a_save_during_a_run_is_an_event_and_a_save_outside_one_is_not(tiny_model_cfg, tiny_train_cfg,
                                                                        tmp_path):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg.replace(steps=4, eval_every=0))
    recorder = Recorder(save_at=2, path=tmp_path / "mid.safetensors")
    trainer.run(recorder)
    assert ("save", "mid.safetensors", True) in recorder.events
    trainer.save(tmp_path / "after.safetensors")
    assert not any(e[0] == "save" and e[1] == "after.safetensors" for e in recorder.events)


def test_training_lowers_the_loss(tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg.replace(steps=150, lr=3e-3))
    losses = [trainer.train_step().loss for _ in range(150)]
    assert sum(losses[-10:]) / 10 < 0.8 * sum(losses[:10]) / 10


def test_non_finite_loss_stops_training_and_keeps_the_last_good_weights(tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg)
    trainer.train_step()
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with torch.no_grad():
        trainer.model.output.weight[0, 0] = float("nan")
    with pytest.raises(TrainingDiverged, match="diverged at step 2"):
        trainer.train_step()
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if k != "output.weight")
    assert trainer.step_count == 1


def test_device_auto_falls_back_to_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    with pytest.raises(ValueError, match="cuda"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto").type == "cuda"


def test_resuming_reproduces_the_uninterrupted_run_bit_exactly(tmp_path, tiny_model_cfg, tiny_train_cfg):
    cfg = tiny_train_cfg.replace(steps=12, eval_every=4)
    model_cfg = tiny_model_cfg.replace(dropout=0.2)  # dropout makes the RNG state matter
    straight = Trainer(model_cfg, cfg)
    straight.run()

    first = Trainer(model_cfg, cfg)
    first.run(until_step=5)
    first.save(tmp_path / "run.safetensors")
    torch.manual_seed(999)  # disturb the global RNG: resume must restore it
    resumed = Trainer.resume(tmp_path / "run.safetensors", cfg)
    assert resumed.step_count == 5
    resumed.run()
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_resume_refuses_a_different_config(tmp_path, tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg)
    trainer.train_step()
    trainer.save(tmp_path / "run.safetensors")
    with pytest.raises(CheckpointError, match="its lr is"):
        Trainer.resume(tmp_path / "run.safetensors", tiny_train_cfg.replace(lr=5e-3))
    longer = Trainer.resume(tmp_path / "run.safetensors", tiny_train_cfg.replace(steps=99))
    assert longer.cfg.steps == 99


def test_an_inference_only_checkpoint_cannot_be_resumed(tmp_path, tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg)
    trainer.save(tmp_path / "model.safetensors", resumable=False)
    with pytest.raises(CheckpointError, match="cannot be resumed"):
        Trainer.resume(tmp_path / "model.safetensors")


def test_length_bucketed_batches_hold_one_length_and_no_padding(tiny_model_cfg, tiny_train_cfg):
    trainer = Trainer(tiny_model_cfg, tiny_train_cfg.replace(bucket_lengths=True))
    seen = set()
    for _ in range(30):
        batch = trainer.next_batch()
        assert batch.lengths.unique().numel() == 1
        assert (batch.src != 10).all()  # no PAD
        seen.add(int(batch.lengths[0]))
    assert seen == set(range(tiny_train_cfg.min_source_len, tiny_train_cfg.max_source_len + 1))


def test_length_bucketed_batches_favour_long_sources_by_the_length_power(tiny_model_cfg, tiny_train_cfg):
    counts = {}
    for power in (0.0, 2.0):
        trainer = Trainer(tiny_model_cfg, tiny_train_cfg.replace(bucket_lengths=True, length_power=power,
                                                                 min_source_len=2, max_source_len=6))
        lengths = [int(trainer.next_batch().lengths[0]) for _ in range(1500)]
        counts[power] = [lengths.count(n) / len(lengths) for n in range(2, 7)]
    assert max(counts[0.0]) - min(counts[0.0]) < 0.06  # uniform: about 1/5 each
    squares = [n * n / 90 for n in range(2, 7)]  # 4 + 9 + 16 + 25 + 36 = 90
    assert all(abs(share - want) < 0.04 for share, want in zip(counts[2.0], squares))


def test_resuming_a_length_weighted_run_reproduces_it_bit_exactly(tmp_path, tiny_model_cfg, tiny_train_cfg):
    cfg = tiny_train_cfg.replace(steps=10, bucket_lengths=True, length_power=2.0)
    straight = Trainer(tiny_model_cfg, cfg)
    straight.run()
    first = Trainer(tiny_model_cfg, cfg)
    first.run(until_step=4)
    first.save(tmp_path / "run.safetensors")
    resumed = Trainer.resume(tmp_path / "run.safetensors", cfg)
    resumed.run()
    assert all(torch.equal(a, b) for a, b in zip(straight.model.parameters(), resumed.model.parameters()))


def test_a_saved_accuracy_is_measured_on_the_weights_saved_whenever_the_run_stopped(tmp_path):
    """A run stopped between evaluations, after an evaluation that stopped early (--until out of
    reach), saves the exact match of the weights it writes, on the run's held-out sequences: not
    the earlier, rougher figure (the app's x then w, an interrupted `minitx train`)."""
    from minitx.core.checkpoint import load_checkpoint
    from minitx.core.training.evaluation import evaluate

    cfg = TrainConfig(task="copy", min_source_len=1, max_source_len=2, steps=60, batch_size=16, warmup=5,
                      lr=0.005, eval_every=5, eval_size=200, until=0.999, device="cpu")
    model = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_len=6,
                        dropout=0.0)
    trainer = Trainer(model, cfg)
    trainer.run(until_step=13)
    last_eval = trainer.history.evaluations()[-1]
    assert last_eval[0] == 10 and not last_eval[3]  # step 10's evaluation stopped early
    saved = load_checkpoint(trainer.save(tmp_path / "stopped.safetensors"))
    weights = evaluate(saved.model, saved.task, 200, seed=trainer.heldout_seed).accuracy
    assert saved.summary["steps"] == 13 and saved.summary["accuracy"] == pytest.approx(weights)
    assert weights != pytest.approx(last_eval[1])  # what the file used to say
    assert trainer.history.evaluations()[-1] == last_eval  # the curve keeps its evaluation steps
