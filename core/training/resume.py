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
FREE_ON_RESUME = ("steps", "device", "eval_every", "eval_size", "until", "data", "valid")


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
        if key not in FREE_ON_RESUME and getattr(asked, key) != value:
            raise CheckpointError(f"cannot resume {path}: its {key} is {value!r}, the run asks for "
                                  f"{getattr(asked, key)!r} (a continued run may change only "
                                  f"{', '.join(FREE_ON_RESUME[:5])})")
    return saved.replace(**{k: getattr(asked, k) for k in FREE_ON_RESUME})


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


def check_optim_state(optim_state: dict, params: dict[str, torch.Tensor], step: int) -> None:
    """Adam moments from a file: one complete, finite set per parameter (none before step 1),
    each the parameter's shape, so a broken file fails here and not in the middle of training."""
    if step > 0 and len(optim_state) != len(params):
        raise ValueError(f"optimizer state covers {len(optim_state)} of {len(params)} parameters")
    names = {id(p): n for n, p in params.items()}
    for p, s in optim_state.items():
        name = names[id(p)]
        if set(s) != {"step", "exp_avg", "exp_avg_sq"}:
            raise ValueError(f"optimizer state of {name} has fields {sorted(s)}")
        for key in ("exp_avg", "exp_avg_sq"):
            if s[key].shape != p.shape or s[key].dtype != p.dtype:
                raise ValueError(f"optimizer {key} of {name} has shape {tuple(s[key].shape)} and "
                                 f"dtype {s[key].dtype}, the parameter {tuple(p.shape)} {p.dtype}")
        if s["step"].numel() != 1 or not s["step"].dtype.is_floating_point:
            raise ValueError(f"optimizer step of {name} is not a single float")
        s["step"] = s["step"].reshape(())
        finite = all(bool(torch.isfinite(t).all()) for t in s.values())
        if not finite or bool((s["exp_avg_sq"] < 0).any()):
            raise ValueError(f"optimizer state of {name} holds NaN, infinite or negative values")
