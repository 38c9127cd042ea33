"""Guided alignment on a Hugging Face folder (`train --init FOLDER --alignments FILE`): each word
link becomes the links of every piece of both words, as transformers' own tokeniser splits them
(sentencepiece and byte-level pieces that split words; special tokens never linked), and the run
reports its head's AER from the command line."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import TrainConfig
from minitx.core.data.task import DATA_TASK
from minitx.core.training.fine_tune import family_of, fine_tune_defaults
from minitx.core.training.trainer import Trainer
from tests.cli.conftest import run_cli
from tests.huggingface.test_alignment_exact import reference_words
from tests.huggingface.tiny_folders import save_model
from tests.huggingface.tiny_tokenisers import CORPUS

PAIRS = CORPUS[:12]


def links_of(source: str, target: str) -> list[tuple[int, int]]:
    """Made-up word links: target word j with source word j (or the last), and word 0 with 0."""
    n = len(source.split())
    return sorted({(min(j, n - 1), j) for j in range(len(target.split()))} | {(0, 0)})


@pytest.fixture(scope="module", params=("marian", "bart"))
def folder(request, tmp_path_factory):
    from transformers import AutoTokenizer

    base = tmp_path_factory.mktemp(f"guided-{request.param}")
    path = save_model(base / request.param, request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokeniser = AutoTokenizer.from_pretrained(str(path))
    pairs = base / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in PAIRS),
                     encoding="utf-8")
    links = base / "pairs.talp"
    links.write_text("".join(" ".join(f"{i}-{j}" for i, j in links_of(s, t)) + "\n" for s, t in PAIRS),
                     encoding="utf-8")
    return path, tokeniser, str(pairs), str(links)


def test_word_links_become_the_links_of_the_pieces_transformers_tokeniser_makes(folder):
    path, tokeniser, pairs, links = folder
    base = checkpoints.load(str(path))
    cfg = TrainConfig(**{**fine_tune_defaults(family_of(base.task)), "task": DATA_TASK, "data": pairs,
                         "init": str(path), "steps": 1, "alignments": links, "guided_head": "1:1"})
    trainer = Trainer(base.model_config, cfg, base=base)
    task = trainer.task
    make = trainer.guide.links.batches(task.pairs_batch)
    checked = 0
    for position, k in enumerate(task.train.index.tolist()):
        source, target = PAIRS[k]
        batch = make(task.train, torch.tensor([position]))
        src = tokeniser(source)["input_ids"]
        labels = tokeniser(text_target=target)["input_ids"]
        assert batch.src[0, : len(src)].tolist() == src and batch.labels[0, : len(labels)].tolist() == labels
        src_words, tgt_words = reference_words(tokeniser, src), reference_words(tokeniser, labels)
        expected = {(t, s) for i, j in links_of(source, target)
                    for t, tw in enumerate(tgt_words) if tw == j for s, sw in enumerate(src_words) if sw == i}
        assert {tuple(x) for x in batch.alignment[0].nonzero().tolist()} == expected
        checked += len(src) > len(source.split())  # a pair whose pieces split words (or add specials)
    assert checked


def test_a_guided_fine_tune_of_a_folder_reports_its_heads_aer(folder, tmp_path):
    path, _, pairs, links = folder
    run = run_cli("train", "--init", str(path), "--data", pairs, "--alignments", links,
                  "--guided-head", "1:2", "--steps", "2", "--eval-every", "2",
                  "--out", str(tmp_path / "ft.safetensors"), "--json", "--threads", "1", "--no-watch")
    assert run.exit_code == 0, run.stderr
    guided = json.loads(run.stdout)["guided_alignment"]
    assert guided["head"] == "1:2" and guided["aer"]["step"] == [0, 2]
