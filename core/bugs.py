"""Deliberately broken variants (SPEC §8), so a person can see what each classic bug looks like.

A preset changes the model config, the training config, or how batches are fed to the model.
The diagnostics never read this: they recognise a bug from measurements alone.
"""

from __future__ import annotations

BUGS: dict[str, str] = {
    "no-shift": "target not shifted right: the decoder sees the token it must predict",
    "no-causal-mask": "decoder self-attention sees future tokens",
    "no-scale": "attention scores not divided by sqrt(d_k)",
    "swap-cross": "cross-attention keys/values come from the decoder, not the encoder",
    "no-reverse": "data generation forgot to reverse: targets are copies",
    "no-warmup": "full learning rate from step 1",
}

MODEL_EFFECTS = {
    "no-causal-mask": {"causal_mask": False},
    "no-scale": {"scale_attention": False},
    "swap-cross": {"swap_cross_attention": True},
}

TRAIN_EFFECTS = {"no-warmup": {"warmup": 0}}


def apply_bug(model_cfg, train_cfg):
    """Returns (model_cfg, train_cfg) with train_cfg.bug's effects on the configs applied."""
    name = train_cfg.bug
    if not name:
        return model_cfg, train_cfg
    if name not in BUGS:
        raise ValueError(f"bug: must be one of {', '.join(BUGS)}; got {name!r}")
    model_cfg = model_cfg.replace(**MODEL_EFFECTS.get(name, {}))
    train_cfg = train_cfg.replace(**TRAIN_EFFECTS.get(name, {}))
    return model_cfg, train_cfg
