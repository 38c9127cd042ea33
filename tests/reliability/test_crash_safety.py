"""Crashes lose nothing: kills at random moments (also inside saves), failed saves, divergence,
and stop/resume reproduce an uninterrupted run bit for bit on the CPU."""

from __future__ import annotations

import errno
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from minitx.core.checkpoint import CheckpointError, load_checkpoint, read_raw, save_checkpoint
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.training.trainer import Trainer, TrainingDiverged

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("crash_worker.py")

TINY = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                   max_len=8, dropout=0.1)


def tiny_train(**changes) -> TrainConfig:
    base = dict(steps=12, batch_size=8, warmup=3, min_source_len=2, max_source_len=5, eval_every=0,
                device="cpu", seed=5)
    return TrainConfig(**{**base, **changes})


# Wall-clock measurements in the run's history: the same steps, other seconds on every run.
TIMINGS = ("history.seconds", "history.examples_per_s")


def assert_same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    different = [k for k in a if not (torch.equal(a[k], b[k]) if k not in TIMINGS
                                      else a[k].shape == b[k].shape)]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


def temp_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


# ---------------------------------------------------------------------------------------------
# (a) SIGKILL at random moments


class Zygote:
    """Drives crash_worker.py: one warm process that forks a training child per run."""

    def __init__(self) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []  # lines skipped by the last expect()s of this run
        threading.Thread(target=self._read, daemon=True).start()
        self.expect("warm", timeout=120)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("EOF")

    def expect(self, prefix: str, timeout: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line != "EOF", "the worker died"
            if line.startswith(prefix):
                return line.split()
            self.seen.append(line)

    def start(self, path: Path, steps: int, save_every: int, fsync_delay: float) -> int:
        self.seen: list[str] = []
        self.proc.stdin.write(f"train {path} {steps} {save_every} {fsync_delay}\n")
        self.proc.stdin.flush()
        return int(self.expect("child")[1])

    def wait_exit(self, pid: int, timeout: float = 60) -> int:
        words = self.expect(f"exit {pid}", timeout)
        return int(words[2])

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


def saved_steps(lines: list[str]) -> list[int]:
    return [int(line.split()[2]) for line in lines if line.startswith("saved ")]


@pytest.mark.slow  # tier 2: fifteen kills of a saving process take ~20 s
def test_sigkill_at_random_moments_never_loses_the_checkpoint_and_resume_is_bit_exact(
        tmp_path, zygote):
    # 100 saves with two slow fsyncs each take >= 4 s, more than 15 kills at most 0.15 s apart
    # allow, so every kill interrupts a running child however fast the machine is.
    steps, save_every, fsync_delay, kills = 200, 2, 0.02, 15
    rng = random.Random(1234)  # the kill moments

    reference = tmp_path / "reference.safetensors"
    pid = zygote.start(reference, steps, save_every, 0.0)
    assert zygote.wait_exit(pid) == 0, zygote.seen
    assert zygote.seen[-1] == f"done {pid} {steps}"

    path = tmp_path / "killed.safetensors"
    last_on_disk, mid_save_kills = 0, 0
    for i in range(kills):
        pid = zygote.start(path, steps, save_every, fsync_delay)
        zygote.expect(f"ready {pid}")
        if i % 3 == 0:  # inside a save for sure: during the fsync of its temporary file
            zygote.expect(f"fsync {pid}")
            time.sleep(rng.uniform(0.0, fsync_delay / 2))
        elif i % 3 == 1:  # once this run has saved: on a busy machine 0.15 s may not reach a save
            zygote.seen.append(" ".join(zygote.expect(f"saved {pid}")))
            time.sleep(rng.uniform(0.0, 0.15))
        else:  # anywhere: in a step, in a save, between the two
            time.sleep(rng.uniform(0.0, 0.15))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # it finished (or failed) first; the status says which
            pass
        status = zygote.wait_exit(pid)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        assert killed or status == 0, f"the child failed by itself: {zygote.seen}"
        left_behind = temp_files(tmp_path)  # what a crashed save leaves (safe to delete)
        mid_save_kills += bool(left_behind)
        if i % 3 == 0:
            assert left_behind, "a save in progress wrote no temporary file"
        for tmp in left_behind:
            tmp.unlink()
        if i == 0:
            assert not path.exists(), "a save interrupted before its rename created the file"
        if not path.exists():  # killed before the first save of the run finished
            assert last_on_disk == 0 and not saved_steps(zygote.seen), "a checkpoint vanished"
            continue
        ckpt = load_checkpoint(path)  # the latest checkpoint on disk always loads
        on_disk = ckpt.summary["steps"]
        acknowledged = saved_steps(zygote.seen)
        assert on_disk >= max(acknowledged, default=last_on_disk), "a finished save was lost"
        assert on_disk >= last_on_disk, "the checkpoint went back in time"
        last_on_disk = on_disk
    print(f"{kills} kills, {mid_save_kills} inside a save, last checkpoint at step {last_on_disk}")
    assert 0 < last_on_disk < steps, "the kills did not interrupt a run in progress"

    pid = zygote.start(path, steps, save_every, 0.0)  # resume and train to the end
    assert zygote.wait_exit(pid) == 0, zygote.seen
    got, _ = read_raw(path)
    want, _ = read_raw(reference)
    assert_same_tensors(got, want)  # weights, Adam moments and RNG states, bit for bit


# ---------------------------------------------------------------------------------------------
# (b) A save that fails half-way


@pytest.fixture
def trained(tmp_path) -> tuple[Trainer, Path]:
    trainer = Trainer(TINY, tiny_train(steps=4))
    trainer.run()
    path = trainer.save(tmp_path / "model.safetensors")
    return trainer, path


def disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class HalfWriter:
    """A file whose write stores half the bytes and then finds the disk full."""

    def __init__(self, f) -> None:
        self.f = f

    def write(self, data: bytes) -> int:
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


@pytest.mark.parametrize("failure", ["write", "fsync", "rename"])
def test_failed_save_keeps_previous_checkpoint_and_leaves_no_temp_file(
        trained, monkeypatch, failure):
    trainer, path = trained
    before = path.read_bytes()
    trainer.train_step()  # the new save would differ from the old one
    real_fdopen = os.fdopen
    if failure == "write":
        monkeypatch.setattr(os, "fdopen", lambda *a, **k: HalfWriter(real_fdopen(*a, **k)))
    elif failure == "fsync":
        monkeypatch.setattr(os, "fsync", disk_full)
    else:
        monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(CheckpointError, match=r"^cannot write .*: No space left on device$"):
        trainer.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load_checkpoint(path).summary["steps"] == 4
    assert temp_files(path.parent) == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.safetensors"]


def test_save_refuses_non_finite_weights_instead_of_replacing_a_good_file(trained):
    trainer, path = trained
    before = path.read_bytes()
    with torch.no_grad():
        trainer.model.output.bias[0] = float("inf")
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        trainer.save(path)
    assert path.read_bytes() == before and temp_files(path.parent) == []


def test_float16_save_that_would_overflow_is_refused(trained):
    trainer, path = trained
    with torch.no_grad():
        trainer.model.output.bias[0] = 1e6  # finite in float32, inf in float16
    with pytest.raises(CheckpointError, match="in float16"):
        save_checkpoint(path.with_name("half.safetensors"), trainer.model, trainer.task,
                        dtype="float16")
    assert not path.with_name("half.safetensors").exists()


# ---------------------------------------------------------------------------------------------
# (c) Divergence


def test_divergence_stops_with_a_clear_message_and_the_last_good_checkpoint_loads(tmp_path):
    trainer = Trainer(TINY, tiny_train(lr=1e10, warmup=0, steps=50))
    trainer.train_step()
    good = trainer.save(tmp_path / "good.safetensors")
    with pytest.raises(TrainingDiverged) as info:
        trainer.run()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("training diverged at step ")
    assert "lower learning rate" in message
    assert trainer.step_count < 50
    ckpt = load_checkpoint(good)
    assert all(bool(torch.isfinite(t).all()) for t in ckpt.model.state_dict().values())
    # The guard kept the weights of the last good step, so saving after the error is safe too.
    after = trainer.save(tmp_path / "after.safetensors")
    assert load_checkpoint(after).summary["steps"] == trainer.step_count


def test_an_update_that_makes_the_weights_non_finite_keeps_the_last_good_weights(tmp_path):
    try:
        trainer = Trainer(TINY, tiny_train(lr=float("inf"), warmup=0))
    except ValueError:
        return  # refused up front: also a correct answer
    with pytest.raises(TrainingDiverged):
        trainer.run()
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())


# ---------------------------------------------------------------------------------------------
# Exact resume


def run_to_end(trainer: Trainer) -> dict[str, torch.Tensor]:
    trainer.run()
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


@pytest.mark.parametrize("stop_at", [1, 5, 9])
def test_stopping_at_step_k_and_resuming_reproduces_the_uninterrupted_run(tmp_path, stop_at):
    cfg = tiny_train(steps=12)
    uninterrupted = Trainer(TINY, cfg)
    want = run_to_end(uninterrupted)

    first = Trainer(TINY, cfg)
    first.run(until_step=stop_at)
    assert first.step_count == stop_at
    path = first.save(tmp_path / "stopped.safetensors")
    torch.manual_seed(999)  # whatever happens to the global RNG in between must not matter
    resumed = Trainer.resume(path)
    assert resumed.step_count == stop_at
    assert_same_tensors(run_to_end(resumed), want)
    assert_same_tensors(resumed.state_tensors(), uninterrupted.state_tensors())


def test_resume_without_the_saved_rng_state_would_differ(tmp_path):
    """The control for the test above: with dropout on, the RNG state is what makes it exact."""
    cfg = tiny_train(steps=12)
    want = run_to_end(Trainer(TINY, cfg))
    first = Trainer(TINY, cfg)
    first.run(until_step=5)
    resumed = Trainer.resume(first.save(tmp_path / "stopped.safetensors"))
    torch.manual_seed(999)  # throw the restored dropout RNG away
    got = run_to_end(resumed)
    assert any(not torch.equal(got[k], want[k]) for k in want)
