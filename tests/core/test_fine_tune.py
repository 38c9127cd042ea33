"""Fine-tuning (`minitx train --init`) in core, on the bundled reverse model (a minitx checkpoint:
no transformers needed, so these stay cheap): a step's pairs are the same however the step is
split into micro-batches and processes, its loss is the mean over all its target tokens, a
resumed fine-tune reaches the uninterrupted one's weights, and bad input fails in one line
before anything is written. transformers' own step is the reference in
tests/huggingface/test_fine_tune_exact.py."""

from __future__ import annotations

import random

import pytest
import torch

from minitx import checkpoints
from minitx.core.config import TrainConfig
from minitx.core.data.pair_files import DataError
from minitx.core.training.fine_tune import fine_tune_defaults
from minitx.core.training.processes import Processes, shard
from minitx.core.training.trainer import Trainer, TrainingDiverged


@pytest.fixture(scope="module")
def base():
    return checkpoints.load("reverse")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(train, valid) files: digit sequences and their sorted digits (a new task for reverse)."""
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("pairs")

    def write(name, n):
        lines = []
        for _ in range(n):
            src = [str(rng.randint(0, 9)) for _ in range(rng.randint(3, 8))]
            lines.append(f"{' '.join(src)}\t{' '.join(sorted(src))}\n")
        (folder / name).write_text("".join(lines), encoding="utf-8")
        return str(folder / name)

    return write("train.tsv", 96), write("valid.tsv", 16)


def config(pairs, **changes) -> TrainConfig:
    train, valid = pairs
    return TrainConfig(**{"task": "data", "data": train, "valid": valid, "init": "reverse",
                          **fine_tune_defaults("minitx"), "lr": 1e-3, "steps": 3, "eval_every": 0,
                          "eval_size": 4, "device": "cpu", **changes})


def weights(trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def trainer_for(base, pairs, **changes) -> Trainer:
    return Trainer(base.model_config.replace(dropout=0.0), config(pairs, **changes), base=base)


def test_batch_32_and_16_accumulated_twice_end_at_the_same_weights(base, pairs):
    whole = trainer_for(base, pairs, batch_size=32)
    split = trainer_for(base, pairs, batch_size=16, accumulate=2)
    for _ in range(2):
        a, b = whole.train_step(), split.train_step()
        assert a.loss == pytest.approx(b.loss, rel=1e-5)  # the mean over all the step's tokens
    mine, theirs = weights(whole), weights(split)
    # A key bias's gradient is zero but for rounding (softmax ignores what adds to every score),
    # and Adam moves each weight by about lr x the sign of its gradient: those are coin tosses.
    compared = [n for n in mine if not n.endswith("k_proj.bias")]
    assert len(compared) > 30
    assert all(torch.allclose(mine[n], theirs[n], rtol=1e-5, atol=1e-6) for n in compared)
    moved = trainer_for(base, pairs, batch_size=16)  # a different step: other weights (the test can fail)
    for _ in range(2):
        moved.train_step()
    assert any(not torch.allclose(mine[n], weights(moved)[n], rtol=1e-5, atol=1e-6) for n in compared)


def test_a_steps_loss_is_the_mean_over_all_its_target_tokens_not_of_micro_batch_means(base, pairs):
    trainer = trainer_for(base, pairs, batch_size=8, accumulate=2)
    trainer.model.eval()  # no dropout either way
    src, decoder_input, labels = trainer._feed(trainer.next_batch())  # (16, S), (16, T), (16, T)
    micro = shard(len(src), trainer.processes, 2)
    loss = trainer._accumulated_loss(src, decoder_input, labels, micro)
    with torch.no_grad():
        logits = trainer.model(src, decoder_input)
    pad = trainer.model_cfg.pad_id
    full = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad)
    halves = [torch.nn.functional.cross_entropy(logits[r].flatten(0, 1), labels[r].flatten(),
                                                ignore_index=pad) for r in micro]
    assert float(loss) == pytest.approx(float(full), rel=1e-6)
    assert (labels[micro[0]] != pad).sum() != (labels[micro[1]] != pad).sum()  # means of means would differ
    assert float(loss) != pytest.approx(float(sum(halves) / 2), rel=1e-6)


def test_each_process_takes_its_own_shard_and_the_shards_are_the_steps_micro_batches_in_order():
    rows = 12
    for world, accumulate in ((2, 1), (2, 3), (3, 2), (1, 4)):
        cut = [s for rank in range(world) for s in shard(rows, Processes(rank, world), accumulate)]
        assert [i for s in cut for i in range(rows)[s]] == list(range(rows))
        assert len(cut) == world * accumulate
    # two processes of one micro-batch each train on what one process's two micro-batches do
    assert [shard(8, Processes(r, 2), 1)[0] for r in range(2)] == shard(8, Processes(), 2)
    with pytest.raises(ValueError, match="cannot be shared by 4 processes"):
        shard(3, Processes(0, 4), 1)


def test_a_resumed_fine_tune_reaches_the_uninterrupted_weights_and_keeps_its_base(base, pairs, tmp_path):
    straight = trainer_for(base, pairs, batch_size=8, steps=3)
    while not straight.done:
        straight.train_step()
    first = trainer_for(base, pairs, batch_size=8, steps=3)
    first.train_step()
    first.save(tmp_path / "half.safetensors")
    resumed = Trainer.resume(tmp_path / "half.safetensors")
    assert resumed.base_info == first.base_info and resumed.base_info["init"] == "reverse"
    while not resumed.done:
        resumed.train_step()
    mine, theirs = weights(resumed), weights(straight)
    assert all(torch.equal(mine[n], theirs[n]) for n in mine)
    summary = checkpoints.load(str(tmp_path / "half.safetensors")).summary
    assert summary["base"]["sha256"] == first.base_info["sha256"]


def test_a_run_saved_by_two_processes_resumes_in_one_accumulating_twice(base, pairs, tmp_path):
    trainer = trainer_for(base, pairs, batch_size=8)
    trainer.train_step()
    trainer.save(tmp_path / "two.safetensors")
    # as if two processes had saved it: 8 pairs each, 16 a step
    from minitx.core.checkpoint import read_raw
    from minitx.core.training.resume import same_step_pairs

    saved = trainer.cfg
    assert same_step_pairs("f", saved, saved, 2, 1).accumulate == 2
    twice = saved.replace(accumulate=2)
    assert same_step_pairs("f", twice, twice, 1, 2).accumulate == 1
    with pytest.raises(Exception, match="its steps took 16 pairs"):
        same_step_pairs("f", saved, saved.replace(batch_size=4), 2, 1)
    assert read_raw(tmp_path / "two.safetensors")[1]["trainer"]


@pytest.mark.parametrize("change, message", [
    ({"lr": float("nan")}, "lr: must be a positive finite number"),
    ({"lr": 0.0}, "lr: must be a positive finite number"),
    ({"accumulate": 0}, "accumulate: must be a positive integer"),
])
def test_bad_settings_are_one_line_naming_the_setting(pairs, change, message):
    with pytest.raises(ValueError, match=message):
        config(pairs, **change)


def test_more_micro_batches_than_training_pairs_is_refused(base, pairs, tmp_path):
    few = tmp_path / "few.tsv"
    few.write_text("1 2 3\t1 2 3\n4 5\t4 5\n", encoding="utf-8")
    with pytest.raises(ValueError, match="2 training pairs cannot be shared by 1 process x 3 micro-batches"):
        Trainer(base.model_config, config(pairs, data=str(few), accumulate=3), base=base)


def test_a_pairs_line_without_a_tab_names_its_line_and_nothing_trains(base, tmp_path, pairs):
    bad = tmp_path / "bad.tsv"
    bad.write_text("1 2 3\t3 2 1\n4 5\n", encoding="utf-8")
    with pytest.raises(DataError, match="bad.tsv, line 2: no tab"):
        Trainer(base.model_config, config(pairs, data=str(bad)), base=base)


def test_a_non_finite_loss_names_the_step_and_first_layer_and_keeps_the_weights(base, pairs):
    trainer = trainer_for(base, pairs, batch_size=8)
    trainer.train_step()
    with torch.no_grad():
        trainer.model.decoder[1].ff[0].weight[0, 0] = float("inf")
    before = weights(trainer)
    with pytest.raises(TrainingDiverged, match="at step 2: .*first non-finite in decoder.1.ff.0"):
        trainer.train_step()
    after = weights(trainer)
    assert trainer.step_count == 1
    assert all(torch.equal(before[n], after[n]) for n in before if torch.isfinite(before[n]).all())


@pytest.mark.slow  # torch.optim's first step imports torch._dynamo: seconds
def test_an_adafactor_fine_tune_resumes_to_the_uninterrupted_weights(base, pairs, tmp_path):
    defaults = fine_tune_defaults("t5", "adafactor")
    assert defaults["optimizer"] == "adafactor" and defaults["lr"] == 1e-3
    straight = trainer_for(base, pairs, batch_size=8, steps=3, optimizer="adafactor", weight_decay=0.0)
    while not straight.done:
        straight.train_step()
    first = trainer_for(base, pairs, batch_size=8, steps=3, optimizer="adafactor", weight_decay=0.0)
    first.train_step()
    first.save(tmp_path / "ada.safetensors")
    resumed = Trainer.resume(tmp_path / "ada.safetensors")
    while not resumed.done:
        resumed.train_step()
    mine, theirs = weights(resumed), weights(straight)
    assert all(torch.equal(mine[n], theirs[n]) for n in mine)
    assert any(not torch.equal(mine[n], w) for n, w in weights(trainer_for(base, pairs)).items())


def test_pairs_longer_than_max_length_are_cut_and_counted(base, pairs):
    from minitx.core.training.fine_tune import fine_tune_task

    train, valid = pairs
    whole = fine_tune_task(base.task, train, valid, 0, base.model_config.max_len, 0)
    cut = fine_tune_task(base.task, train, valid, 0, base.model_config.max_len, 6)
    # a digit model wraps nothing; a Batch adds start and end: 4 digits a side fit 6 positions
    assert int(cut.train.source_lengths().max()) == 4 and int(cut.train.target_lengths().max()) == 4
    longer = int(((whole.train.source_lengths() > 4) | (whole.train.target_lengths() > 4)).sum())
    held = int(((whole.heldout.source_lengths() > 4) | (whole.heldout.target_lengths() > 4)).sum())
    assert whole.counts["cut_too_long"] == 0 and cut.counts["cut_too_long"] == longer + held > 0
    sources = whole.train.data.source, cut.train.data.source
    assert all(sources[0].row(i)[:4] == sources[1].row(i) for i in range(len(cut.train)))  # the start kept
