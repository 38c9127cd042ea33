"""A fine-tune's step is transformers' step: on tiny Marian, T5 and BART folders made by
transformers (tests/huggingface/tiny_folders.py), minitx's Trainer (`train --init`) and a plain
transformers loop take the same pairs, tokenised by transformers' own tokeniser
(`tokenizer(sources, text_target=targets)`, padding labelled -100), and give the same loss and
gradient norm as `model(..., labels=...)`, the same gradients of every trained tensor (1e-5
relative) and, after one torch.optim.AdamW step with the same settings (weight decay in
transformers' Trainer's two groups), the same weights."""

from __future__ import annotations

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import TrainConfig
from minitx.core.importing.hf_weights import BART_POSITION_OFFSET, layer_names
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.core.training.trainer import Trainer
from tests.huggingface.changed_folders import write_pairs
from tests.huggingface.conftest import labelled_batch
from tests.huggingface.tiny_folders import load_reference, save_model

PAIRS = [("the cat sat on the mat", "die Katze sass auf der Matte"),
         ("a red house", "ein rotes Haus"),
         ("green trees and blue sky over the old town", "gruene Baeume und blauer Himmel"),
         ("good morning", "guten Morgen"),
         ("where is the station", "wo ist der Bahnhof")]
CLIP = 1.0  # transformers' Trainer's max_grad_norm
STEP_FAMILIES = ("marian", "t5", "bart")


@pytest.fixture(scope="module", params=STEP_FAMILIES)
def folder(request, tmp_path_factory):
    return request.param, save_model(tmp_path_factory.mktemp(request.param) / request.param, request.param)


def their_name(reference, name: str) -> str:
    """The transformers parameter a folder name stands for (marian and bart prefix model.)."""
    params = dict(reference.named_parameters(remove_duplicate=False))
    return f"model.{name}" if f"model.{name}" in params else name


def pairs_of(reference, model_cfg, family: str) -> list[tuple[str, torch.nn.Parameter, slice]]:
    """(minitx name, transformers parameter, its rows) for every tensor minitx trains (and
    Pegasus' position tables, which it keeps fixed)."""
    names = dict(layer_names(family, model_cfg))
    names.update({"src_embed.weight": "shared.weight", "tgt_embed.weight": "decoder.embed_tokens.weight",
                  "output.weight": "lm_head.weight"})
    if model_cfg.position_encoding == "learned":  # BART's and mBART's learned tables, Pegasus' sinusoids
        names.update({"src_positions.weight": "encoder.embed_positions.weight",
                      "tgt_positions.weight": "decoder.embed_positions.weight"})
    params = dict(reference.named_parameters(remove_duplicate=False))
    out = []
    for mine, theirs in names.items():
        offset = "positions" in mine and family in ("bart", "mbart")  # position p at row p + 2
        rows = slice(BART_POSITION_OFFSET, None) if offset else slice(None)
        out.append((mine, params[their_name(reference, theirs)], rows))
    return out


def trainer_groups(reference, weight_decay: float) -> list[dict]:
    """transformers' Trainer's AdamW parameter groups: the parameters its
    get_decay_parameter_names picks at `weight_decay`, the rest (biases, norms) at 0."""
    from transformers import Trainer

    decayed = set(Trainer.get_decay_parameter_names(None, reference))
    named = [(n, p) for n, p in reference.named_parameters() if p.requires_grad]
    return [{"params": [p for n, p in named if n in decayed], "weight_decay": weight_decay},
            {"params": [p for n, p in named if n not in decayed], "weight_decay": 0.0}]


def close(mine: torch.Tensor, theirs: torch.Tensor, floor: float = 0.0, tol: float = 1e-5) -> bool:
    """Within `tol` of the reference's norm; `floor` for gradients that are zero but for
    rounding (a key bias's: softmax ignores what adds to every score)."""
    return float((mine - theirs).norm()) <= tol * float(theirs.norm()) + floor



def test_one_fine_tune_step_is_transformers_labels_loss_and_adamw_step(folder, tmp_path):
    family, path = folder
    data = write_pairs(tmp_path / "pairs.tsv", PAIRS)
    base = checkpoints.load(str(path))
    # every pair in the one step: the whole file trains, and is also what it is measured on
    cfg = TrainConfig(task="data", data=str(data), valid=str(data), init=str(path),
                      **{**fine_tune_defaults(family), "lr": 1e-3, "batch_size": len(PAIRS), "steps": 1,
                         "eval_every": 0, "device": "cpu", "clip_grad_norm": CLIP})
    trainer = Trainer(base.model_config.replace(dropout=0.0), cfg, base=base)
    stats = trainer.train_step()
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}

    reference = load_reference(path)  # eval(): no dropout, as minitx's run above
    if family == "marian":  # its sinusoids are nn.Embedding(_freeze=True); from_pretrained unfreezes them
        for stack in (reference.model.encoder, reference.model.decoder):
            stack.embed_positions.weight.requires_grad_(False)
    batch, labels = labelled_batch(path, PAIRS)
    loss = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
    loss.backward()
    trained = [p for p in reference.parameters() if p.requires_grad]
    norm = torch.nn.utils.clip_grad_norm_(trained, CLIP)
    mapped = [m for m in pairs_of(reference, trainer.model_cfg, family) if m[0] in weights]  # tied: once
    every = torch.cat([theirs.grad.flatten() for _, theirs, _ in mapped])
    floor = 1e-7 * float(every.norm())
    bad = [mine for mine, theirs, rows in mapped if not close(grads[mine], theirs.grad[rows], floor)]
    assert not bad, f"{family} gradients differ: {bad}"
    assert abs(stats.loss - loss.item()) <= 1e-5 * loss.item()
    assert abs(stats.grad_norm - float(norm)) <= 1e-5 * float(norm)
    optimiser = torch.optim.AdamW(trainer_groups(reference, 0.01), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    optimiser.step()
    # Adam's first step moves each weight by lr x sign(its gradient): a weight whose gradient is
    # zero but for rounding (a key bias's all are: softmax ignores what adds to every score) moves
    # by a coin toss in both; weights whose gradient is 1e-4 of the typical one or more must agree.
    typical = float(every.pow(2).mean().sqrt())
    bad = []
    for mine, theirs, rows in mapped:
        sure = theirs.grad[rows].abs() > 1e-4 * typical
        if not close(weights[mine][sure], theirs.detach()[rows][sure]):
            bad.append(mine)
    assert not bad, f"{family} weights after AdamW differ: {bad}"
    # every tensor minitx trained was compared
    assert {m for m, _, _ in mapped} == set(grads)
