"""Tiny Hugging Face folders (tests/huggingface/tiny_tokenisers.py), one per family, made once per
session, and transformers' own tokeniser of each, the reference minitx is held to."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.huggingface.tiny_tokenisers import FAMILIES, TokeniserInfo, save_tokeniser

os.environ["HF_HUB_OFFLINE"] = "1"  # a local folder never needs the hub; nothing may be fetched
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def model_config(info: TokeniserInfo) -> dict:
    """The config.json fields a model of the tokeniser would have."""
    config = {"model_type": info.family, "vocab_size": info.vocab_size, "pad_token_id": info.pad,
              "eos_token_id": info.eos, "decoder_start_token_id": info.decoder_start}
    if info.bos is not None:
        config.update(bos_token_id=info.bos, forced_bos_token_id=info.bos)
    return config


@dataclass(frozen=True)
class TinyFolder:
    family: str
    path: Path
    info: TokeniserInfo
    config: dict
    reference: object  # transformers' AutoTokenizer of the folder


def reference_tokeniser(folder):
    from transformers import AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MarianTokenizer recommends sacremoses, which it does not use
        return AutoTokenizer.from_pretrained(str(folder))


def labelled_batch(folder, pairs):
    """What a transformers loop trains on: the folder's tokeniser's batch of `pairs` (targets by
    text_target), and its labels with padding as -100."""
    tokeniser = reference_tokeniser(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batch = tokeniser([s for s, _ in pairs], text_target=[t for _, t in pairs], padding=True,
                          return_tensors="pt")
    return batch, batch["labels"].masked_fill(batch["labels"] == tokeniser.pad_token_id, -100)


def adamw_loop(reference, batch, labels, optimiser, params, clip, steps, gradients=None) -> list[float]:
    """A plain transformers loop, `steps` times: zero_grad, model(..., labels=...).loss, backward,
    the norm of `params`' gradients clipped at `clip`, the optimiser's step; each step's loss.
    `gradients`, where given, gets each parameter's gradient at each step before clipping (keyed
    by its id)."""
    losses = []
    for _ in range(steps):
        optimiser.zero_grad()
        loss = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         labels=labels).loss
        loss.backward()
        for p in reference.parameters() if gradients is not None else ():
            if p.grad is not None:
                gradients.setdefault(id(p), []).append(p.grad.clone())
        torch.nn.utils.clip_grad_norm_(params, clip)
        optimiser.step()
        losses.append(loss.item())
    return losses


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory) -> dict[str, TinyFolder]:
    """family -> its folder (tokeniser files and config.json) and transformers' tokeniser of it."""
    folders = {}
    for family in FAMILIES:
        path = tmp_path_factory.mktemp(f"hf-{family}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            info = save_tokeniser(path, family)
        config = model_config(info)
        (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
        folders[family] = TinyFolder(family, path, info, config, reference_tokeniser(path))
    return folders


@pytest.fixture(params=FAMILIES)
def tiny(request, tiny_folders) -> TinyFolder:
    return tiny_folders[request.param]
