"""Guided alignment while training (core/training/trainer.py with core/training/guided_alignment.py):
a step's gradient is the translation loss's plus weight x the guided loss's, and on a made-up
language whose alignments are known, guiding a head lowers its AER against the same run unguided."""

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from minitx.core.config import ModelConfig, TrainConfig
from minitx.core.data.pair_task import PairSet
from minitx.core.training.guided_alignment import Guide, guided_loss
from minitx.core.training.processes import shard
from minitx.core.training.trainer import Trainer

TOOL = Path(__file__).parents[2] / "tools" / "make_swapped_language.py"
MODEL = ModelConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0)


def made_up_language(folder, pairs: int = 400, seed: int = 0):
    """tools/make_swapped_language.py's language (a fixed lexicon, neighbours swapped, its gold
    alignment known): (pairs file, talp links file) in `folder`."""
    spec = importlib.util.spec_from_file_location("make_swapped_language", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.write(folder / "pairs.tsv", folder / "pairs.links", pairs, seed)
    return str(folder / "pairs.tsv"), str(folder / "pairs.links")


def run_config(data: str, steps: int, **fields) -> TrainConfig:
    return TrainConfig(**{"task": "data", "data": data, "tokens": "word", "steps": steps, "batch_size": 32,
                          "lr": 3e-3, "warmup": 20, "eval_every": 0, **fields})


def test_a_guided_steps_gradient_is_the_translation_loss_plus_weight_times_the_guided_loss(tmp_path):
    data, links = made_up_language(tmp_path, pairs=220)
    cfg = run_config(data, 1, alignments=links, guided_head="1:2", guided_weight=0.5, accumulate=2,
                     batch_size=8)
    trainer = Trainer(MODEL, cfg)
    batch = trainer.next_batch()
    src, dec, labels, gold = batch.src, batch.decoder_input, batch.labels, batch.alignment
    assert gold is not None and gold.any()
    micro = shard(len(src), trainer.processes, cfg.accumulate)
    assert len(micro) == 2  # two micro-batches: each normalised by the whole step's counts
    trainer._accumulated_loss(src, dec, labels, micro, None, gold)
    got = {n: p.grad.clone() for n, p in trainer.model.named_parameters()}
    # the reference: the whole batch at once, the two losses as the docs define them
    trainer.model.zero_grad(set_to_none=True)
    logits, maps = trainer.model(src, dec, return_attention=True)
    pad = trainer.model_cfg.pad_id
    translation = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad)
    guided = guided_loss(maps.cross[0][:, 1], gold)  # layer 1, head 2
    (translation + 0.5 * guided).backward()
    for name, p in trainer.model.named_parameters():
        torch.testing.assert_close(got[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert trainer.last_guided_loss == pytest.approx(float(guided.detach()), rel=1e-4)


def test_batches_carry_each_pairs_links_on_the_rows_of_its_target_words(tmp_path):
    data, links = made_up_language(tmp_path, pairs=220)
    trainer = Trainer(MODEL, run_config(data, 1, alignments=links, guided_head="1:1"))
    task = trainer.task
    batch = trainer.guide.links.batches(task.pairs_batch)(task.train, torch.tensor([0]))
    pair = int(task.train.index[0])  # its line in pairs.links is its link line
    gold = [tuple(map(int, link.split("-"))) for link in open(links).read().splitlines()[pair].split()]
    # a word-level pair: piece = word, so row j links column perm(j) alone, the end token's row none
    assert sorted((int(s), int(t)) for t, s in batch.alignment[0].nonzero().tolist()) == sorted(gold)
    assert not batch.alignment[0, len(gold)].any()


def test_guiding_a_head_lowers_its_aer_on_a_made_up_language_with_known_alignments(tmp_path):
    data, links = made_up_language(tmp_path)
    guided_cfg = run_config(data, 40, alignments=links, guided_head="1:1", guided_weight=1.0,
                            eval_every=40, eval_size=100)
    unguided = Trainer(MODEL, run_config(data, 40))
    unguided.run()
    guided = Trainer(MODEL, guided_cfg)
    guided.run()
    assert isinstance(guided.task.heldout, PairSet) and len(guided.guide.heldout.gold) == 100
    measure = Guide.for_run(guided_cfg, unguided.task, unguided.model_cfg)  # the same held-out gold
    before = measure.heldout_aer(unguided.model, unguided.task)
    after = guided.guide.heldout_aer(guided.model, guided.task)
    assert after < before - 0.1, (before, after)
    steps, values = guided.history.series("aer")  # step 0, then the run's last evaluation
    assert steps == [0, 40] and values[-1] == pytest.approx(after) and values[0] > after
