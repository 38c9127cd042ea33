"""Tiny Hugging Face folders (tests/huggingface/tiny_tokenisers.py), one per family, made once per
session, and transformers' own tokeniser of each, the reference minitx is held to."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

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
