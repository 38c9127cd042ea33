"""A training process to be killed: used by test_crash_safety.py (not a test itself).

Importing torch (and the optimiser machinery) takes seconds, so this runs as a "zygote": it
imports everything once, then for each line `train CKPT STEPS SAVE_EVERY FSYNC_DELAY` on stdin
forks a child that trains (resuming from CKPT when it exists) and saves every SAVE_EVERY steps.
The test SIGKILLs the children. Children report on stdout:

    ready PID STEP        training is about to start from STEP
    saved PID STEP        a save returned (the file on disk now holds STEP)
    fsync PID             inside a save, the temporary file is being fsynced
    done PID STEP         finished
The zygote reports `child PID` after forking and `exit PID STATUS` when the child is gone.

FSYNC_DELAY (seconds) makes every fsync slow, like a slow disk, so that random kill moments land
inside saves often; the moment of the kill is chosen by the test.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

import torch

torch.set_num_threads(1)  # before any parallel op: single-threaded is deterministic and fork-safe

from minitx.core.config import ModelConfig, TrainConfig  # noqa: E402
from minitx.core.training.trainer import Trainer  # noqa: E402

MODEL = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                    max_len=8, dropout=0.1)


def train_config(steps: int) -> TrainConfig:
    return TrainConfig(steps=steps, batch_size=8, warmup=3, min_source_len=2, max_source_len=5, eval_every=0,
                       device="cpu", seed=7)


def say(*words) -> None:
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


def train(path: str, steps: int, save_every: int, fsync_delay: float) -> None:
    pid = os.getpid()
    real_fsync = os.fsync

    def slow_fsync(fd):
        if fsync_delay:
            say("fsync", pid)
            time.sleep(fsync_delay)
        return real_fsync(fd)

    os.fsync = slow_fsync
    if os.path.exists(path):
        trainer = Trainer.resume(path, train_config(steps))
    else:
        trainer = Trainer(MODEL, train_config(steps))
    say("ready", pid, trainer.step_count)
    while not trainer.done:
        trainer.train_step()
        if trainer.step_count % save_every == 0 or trainer.done:
            trainer.save(path)
            say("saved", pid, trainer.step_count)
    say("done", pid, trainer.step_count)


def main() -> None:
    Trainer(MODEL, train_config(1))  # warm every lazy import before forking
    say("warm")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] != "train":
            say("unknown", words[0])
            continue
        child = os.fork()
        if child == 0:
            code = 0
            try:
                train(words[1], int(words[2]), int(words[3]), float(words[4]))
            except BaseException:  # noqa: BLE001 - report and exit with a failure status
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                os._exit(code)
        say("child", child)
        _, status = os.waitpid(child, 0)
        say("exit", child, status)


if __name__ == "__main__":
    main()
