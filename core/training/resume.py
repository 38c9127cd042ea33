"""Continuing a run: what it may change (one rule, which the Trainer, `minitx train --resume` and
the app's Train form all ask), and what a file must hold before a run continues from it: a
schedule restart inside the run, the same data the run trained on, and a complete, finite set of
Adam moments. Each check fails with one line, before training starts, so a broken file never
fails mid-run."""

from __future__ import annotations

from pathlib import Path

import torch

from minitx.core.checkpoint import CheckpointError
from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.pair_files import DataError, sha256_of

# The TrainConfig fields a continued run may change; everything else, the whole model config
# included, is the run's own. data and valid: a file may have moved; its contents are checked
# (check_same_data), not its name.
FREE_ON_RESUME = ("steps", "device", "eval_every", "eval_size", "until", "data", "valid", "patience",
                  "gradient_checkpointing")  # the same gradients, recomputed
# How a step's pairs are split: it may change (with the number of processes, say) as long as a
# step takes the same pairs, which same_step_pairs checks.
SPLIT_ON_RESUME = ("batch_size", "accumulate")


def resumed_config(path, saved_model: ModelConfig, saved: TrainConfig, asked: TrainConfig | None,
                   asked_model: ModelConfig | None = None) -> TrainConfig:
    """The saved run's TrainConfig with what it may change (FREE_ON_RESUME) taken from `asked`;
    CheckpointError naming the first setting asked to change that may not (a model setting,
    when `asked_model` is given, too)."""
    if asked_model is not None:
        for key, value in saved_model.to_dict().items():
            if getattr(asked_model, key) != value:
                raise CheckpointError(f"cannot resume {path}: its model {key} is {value!r}, the run "
                                      f"asks for {getattr(asked_model, key)!r}")
    if asked is None:
        return saved
    for key, value in saved.to_dict().items():
        if key not in FREE_ON_RESUME + SPLIT_ON_RESUME and getattr(asked, key) != value:
            raise CheckpointError(f"cannot resume {path}: its {key} is {value!r}, the run asks for "
                                  f"{getattr(asked, key)!r} (a continued run may change only "
                                  f"{', '.join(FREE_ON_RESUME[:5])})")
    return saved.replace(**{k: getattr(asked, k) for k in FREE_ON_RESUME + SPLIT_ON_RESUME})


def same_step_pairs(path, saved: TrainConfig, asked: TrainConfig, saved_processes,
                    processes: int) -> TrainConfig:
    """`asked` split so that a step takes the pairs the saved run's steps took (batch size x
    accumulate x processes): a run saved under torchrun resumes in one process, and the other
    way round, by accumulating more (or fewer) micro-batches when its split was not changed."""
    if type(saved_processes) is not int or saved_processes < 1:
        raise CheckpointError(f"{path} has invalid training metadata: processes {saved_processes!r}")
    total = saved.step_pairs * saved_processes
    split_unchanged = (asked.batch_size, asked.accumulate) == (saved.batch_size, saved.accumulate)
    if split_unchanged and processes != saved_processes:
        per_process, left = divmod(total, asked.batch_size * processes)
        if not left and per_process:
            asked = asked.replace(accumulate=per_process)
    if asked.step_pairs * processes != total:
        raise CheckpointError(
            f"cannot resume {path}: its steps took {total} pairs ({saved.batch_size} x {saved.accumulate} "
            f"micro-batches x {saved_processes} processes); {asked.batch_size} x {asked.accumulate} x "
            f"{processes} processes take {asked.step_pairs * processes}: give --batch-size and --accumulate "
            "that make the same")
    return asked


def restart_from(value, step: int, peak_lr: float) -> tuple[int, float] | None:
    """The saved schedule restart: None, or [step <= the run's step, 0 < lr <= the peak lr]."""
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and type(value[0]) is int
            and isinstance(value[1], (int, float)) and not isinstance(value[1], bool)):
        raise ValueError(f"lr_restart {value!r} is not [step, lr]")
    start, lr = value
    if not (0 <= start <= step and 0 < lr <= peak_lr):
        raise ValueError(f"lr_restart {value!r} is outside the run (step {step}, peak lr {peak_lr})")
    return start, float(lr)


def check_same_data(path, task, train_cfg: TrainConfig) -> None:
    """Refuse to resume on data other than the run's: the files' sha256 must be the recorded ones."""
    provenance = task.provenance
    for key, file in (("data", train_cfg.data), ("valid", train_cfg.valid)):
        recorded = provenance.get(key)
        if not file or not recorded:
            continue
        try:
            digest = sha256_of(file)
        except DataError as e:
            raise CheckpointError(f"cannot resume {path}: {e}; give --{key} FILE (the run's "
                                  f"{recorded['file']})") from None
        if digest != recorded["sha256"]:
            raise CheckpointError(
                f"cannot resume {path}: it was trained on {recorded['file']} ({recorded['pairs']:,} "
                f"pairs, sha256 {recorded['sha256'][:12]}…) and {Path(file).name} holds other data "
                f"(sha256 {digest[:12]}…)")


def check_optim_state(optim_state: dict, params: dict[str, torch.Tensor], step: int,
                      fields: tuple[str, ...] = ("step", "exp_avg", "exp_avg_sq")) -> None:
    """Adam moments (or Adafactor's variances, `fields`) from a file: one complete, finite set
    per parameter (none before step 1), each the parameter's shape, so a broken file fails here
    and not in the middle of training."""
    if step > 0 and len(optim_state) != len(params):
        raise ValueError(f"optimizer state covers {len(optim_state)} of {len(params)} parameters")
    names = {id(p): n for n, p in params.items()}
    for p, s in optim_state.items():
        name = names[id(p)]
        if "step" not in s or not set(s) <= set(fields):
            raise ValueError(f"optimizer state of {name} has fields {sorted(s)}")
        if "exp_avg" in fields and set(s) != set(fields):
            raise ValueError(f"optimizer state of {name} has fields {sorted(s)}")
        for key in ("exp_avg", "exp_avg_sq"):
            if key not in s:
                continue
            if s[key].shape != p.shape or s[key].dtype != p.dtype:
                raise ValueError(f"optimizer {key} of {name} has shape {tuple(s[key].shape)} and "
                                 f"dtype {s[key].dtype}, the parameter {tuple(p.shape)} {p.dtype}")
        if s["step"].numel() != 1 or not s["step"].dtype.is_floating_point:
            raise ValueError(f"optimizer step of {name} is not a single float")
        s["step"] = s["step"].reshape(())
        finite = all(bool(torch.isfinite(t).all()) for t in s.values())
        if not finite or any(bool((s[k] < 0).any()) for k in s if k != "exp_avg"):
            raise ValueError(f"optimizer state of {name} holds NaN, infinite or negative values")
